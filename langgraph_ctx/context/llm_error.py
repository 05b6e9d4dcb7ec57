"""`LLM_ERROR` messages: a failed model call kept in the conversation, so "continue" works.

When a model call fails or times out, the conversation gets an assistant message holding
what the model had streamed so far (if anything) followed by a structured block:

```text
Here is the plan: first we load the sales CSV, then we

LLM_ERROR
- kind: timeout
- error: ModelTimeoutError: no output chunk within 2 s
- partial_output: 55 characters above; the reply is incomplete
- attempts: 1
- at: 2026-11-22T05:18:12.745+00:00
- next: when asked to continue, resume where the partial output stops; do not repeat it
```

The message stays in `messages` (and in the checkpointer's log), so the next request sends
it back and the model can resume from it. It is marked for UIs and nodes:
`additional_kwargs={"langgraph_ctx": "llm_error"}` (providers do not send that field) and
the structured error in `response_metadata["llm_error"]` (`LLMError` as JSON). It never
carries tool calls: calls cut off mid-stream are listed in the block, not executed.

```python
from langgraph_ctx.context.llm_error import is_llm_error, read_llm_error

for message in state["messages"]:
    if is_llm_error(message):
        print(read_llm_error(message).kind)   # "timeout" | "network" | "error"
```
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timezone
from typing import Any, Final, Literal

from langchain_core.messages import AIMessage, BaseMessage
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from langgraph_ctx.context.content import content_text

__all__ = [
    "LLM_ERROR_HEADER",
    "LLM_ERROR_MARKER",
    "ErrorKind",
    "LLMError",
    "classify_error",
    "error_status",
    "is_llm_error",
    "is_recoverable_error",
    "llm_error_block",
    "llm_error_message",
    "read_llm_error",
]

ErrorKind = Literal["timeout", "network", "error"]

#: First line of the structured block.
LLM_ERROR_HEADER: Final[str] = "LLM_ERROR"
#: `additional_kwargs` key and value that mark an LLM_ERROR message.
LLM_ERROR_MARKER: Final[tuple[str, str]] = ("langgraph_ctx", "llm_error")
_MESSAGE_CLIP = 500  # characters of an exception's text kept in the block


def utc_now() -> str:
    """The current time, ISO-8601 in UTC, as records store it."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


class LLMError(BaseModel):
    """What went wrong in a model call (in `response_metadata["llm_error"]` as JSON)."""

    model_config = ConfigDict(frozen=True)

    kind: ErrorKind
    """`timeout`, `network` (connection problems) or `error` (anything else)."""
    error_type: str
    """The exception's class name, e.g. `ModelTimeoutError`, `APIConnectionError`."""
    message: str
    """The exception's text (clipped)."""
    partial_chars: int = 0
    """Characters of reply text streamed before the failure (kept in the message)."""
    unfinished_tool_calls: list[str] = Field(default_factory=list)
    """Tool calls cut off mid-stream, as `name(arguments so far)`; they were not run."""
    attempts: int = 1
    """Attempts made, retries included."""
    streamed_id: str | None = None
    """Id of the chunks streamed before the failure (`stream_mode="messages"`): a UI that
    shows them can replace them with this message."""
    at: str = Field(default_factory=utc_now)


def _class_names(error: BaseException) -> list[str]:
    return [cls.__name__.lower() for cls in type(error).__mro__]


def classify_error(error: BaseException) -> ErrorKind:
    """`timeout`, `network` or `error` for an exception, from its type and base classes.

    Covers the standard exceptions and the provider SDKs' own (`APITimeoutError`,
    `httpx.ReadTimeout`, `APIConnectionError`, ...), which need not inherit from them.

    Example:
        ```python
        classify_error(TimeoutError()), classify_error(ConnectionResetError())
        # ('timeout', 'network')
        ```
    """
    names = _class_names(error)
    if isinstance(error, TimeoutError) or any("timeout" in n for n in names):
        return "timeout"
    if isinstance(error, ConnectionError) or any(
        word in n for n in names for word in ("connection", "network", "connecterror")
    ):
        return "network"
    return "error"


#: Status codes a retry or a "continue" can get past: timeout, conflict, too early, rate
#: limit, and every 5xx (including Anthropic's 529 "overloaded").
RECOVERABLE_STATUS: Final[frozenset[int]] = frozenset({408, 409, 425, 429})

#: Provider exception class names (openai, anthropic, ...) of requests no retry fixes:
#: the key, the permissions, the model name or the request itself is wrong.
CONFIGURATION_ERRORS: Final[frozenset[str]] = frozenset(
    {
        "authenticationerror",
        "permissiondeniederror",
        "badrequesterror",
        "notfounderror",
        "unprocessableentityerror",
        "invalidrequesterror",
    }
)

#: The ``type`` or ``code`` words of an OpenAI-style error payload (what langchain-openai
#: raises as ``ValueError(payload)`` for an error sent with HTTP 200) of a request no
#: retry fixes.
CONFIGURATION_CODES: Final[frozenset[str]] = frozenset(
    {
        "invalid_request_error",
        "authentication_error",
        "permission_error",
        "not_found_error",
        "invalid_api_key",
        "model_not_found",
    }
)

#: How the messages of failures "continue" can fix begin, whatever their class:
#: langchain-core's, for a provider stream that ended before its first chunk.
TRANSIENT_MESSAGES: Final[tuple[str, ...]] = ("No generations found in stream",)

#: Provider exception class names of failures "continue" can fix.
TRANSIENT_ERRORS: Final[frozenset[str]] = frozenset(
    {
        "apitimeouterror",
        "apiconnectionerror",
        "ratelimiterror",
        "internalservererror",
        "serviceunavailableerror",
        "overloadederror",
        "remoteprotocolerror",  # httpx: the server closed the stream mid-way
        "incompleteread",
        "chunkedencodingerror",
        "apierror",  # openai's and anthropic's base class, raised without a status for a
        # failure the server reported mid-stream (those with a status are read by it)
    }
)


def _as_status(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and 100 <= value <= 599:
        return value
    if isinstance(value, str) and value.isdigit() and 100 <= int(value) <= 599:
        return int(value)
    return None


def error_status(error: BaseException) -> int | None:
    """The HTTP status of a provider's exception, if it carries one.

    Read from `status_code`, `response.status_code`, `http_status` or `status`, then
    `code` (only when it is an HTTP status: `code` is often a provider's error name), or
    from an error payload given as the exception's argument (``{"code": 502, ...}``); for
    a LangChain integration's own error, else from the exception it was raised from.

    Example:
        ```python
        class APIStatusError(Exception):
            status_code = 401
        error_status(APIStatusError()), error_status(ValueError())   # (401, None)
        ```
    """
    for attribute in ("status_code", "http_status", "status", "code"):
        status = _as_status(getattr(error, attribute, None))
        if status is not None:
            return status
    response = getattr(error, "response", None)
    status = _as_status(getattr(response, "status_code", None))
    if status is not None:
        return status
    # An error payload an OpenAI-compatible API sent with HTTP 200 (OpenRouter, vLLM, a
    # proxy): langchain-openai raises ValueError(response["error"]), the status inside.
    payload = _payload(error)
    if payload is not None:
        status = _as_status(payload.get("code")) or _as_status(payload.get("status"))
        return status if status is not None and status >= 400 else None
    # A LangChain integration's error raised "from" the provider's (langchain-google-genai's
    # ChatGoogleGenerativeAIError from google.genai's ClientError): the status is there.
    # Only theirs: an exception of the app's own raised from one is the app's to handle.
    cause = error.__cause__
    if cause is not None and type(error).__module__.startswith("langchain"):
        status = error_status(cause)
        return status if status is not None and status >= 400 else None
    return None


def _payload(error: BaseException) -> dict[str, Any] | None:
    """The error payload an exception was given as its one argument, if a dict."""
    args = error.args
    return args[0] if len(args) == 1 and isinstance(args[0], dict) else None


def is_recoverable_error(error: BaseException, *, streamed: bool = False) -> bool:
    """Whether "continue" (or a retry) can get past a failed model call.

    The default split of `ModelNode` and the middleware: True keeps the failure in the
    conversation as an `LLM_ERROR` reply; False raises it to the app (a wrong API key,
    model name or request would fail the same way again, and must not reach end users
    as a chat reply).

    - recoverable: a stream cut mid-way (`streamed`), timeouts (`TimeoutError`,
      `asyncio.TimeoutError`, `ModelTimeoutError`, `APITimeoutError`, httpx timeouts),
      connection errors, rate limits and server errors (status 408, 409, 425, 429, 5xx;
      `RateLimitError`, `InternalServerError`, ...);
    - not recoverable: other 4xx statuses (400, 401, 403, 404, 422, ...) and the
      provider types `AuthenticationError`, `PermissionDeniedError`, `BadRequestError`,
      `NotFoundError`, `UnprocessableEntityError`;
    - anything else (no status, a type that is none of these) raises: a bug in the
      app's code (`TypeError`, `KeyError`, ...), an exception of the app's own (a
      guardrail's), a structured-output error the app chose to raise, as they would
      without the pipeline. Only a failure known to be passing is kept as a reply.

    The status code wins over the type name; the provider SDKs need not be installed
    (only attributes and class names are read).

    Example:
        ```python
        class AuthenticationError(Exception):
            status_code = 401
        is_recoverable_error(AuthenticationError()), is_recoverable_error(TimeoutError())
        # (False, True)
        ```
    """
    if streamed:
        return True
    status = error_status(error)
    if status is not None:
        return status in RECOVERABLE_STATUS or status >= 500 or status < 400
    if is_configuration_error(error):
        return False
    if str(error).startswith(TRANSIENT_MESSAGES):
        return True
    return not TRANSIENT_ERRORS.isdisjoint(_class_names(error)) or classify_error(error) != "error"


def is_configuration_error(error: BaseException) -> bool:
    """Whether a failed model call names a request no retry fixes: a wrong key, model or
    request (a 4xx status but 408/409/425/429, or the providers' `AuthenticationError`,
    `BadRequestError`, ...). The summarizer of compaction raises those and falls back to
    extraction on anything else (a summary is an extra; a bug in it must not stop the
    turn), where a model node keeps only what is known to pass (`is_recoverable_error`).

    Example:
        ```python
        class AuthenticationError(Exception):
            status_code = 401
        is_configuration_error(AuthenticationError()), is_configuration_error(KeyError())
        # (True, False)
        ```
    """
    status = error_status(error)
    if status is not None:
        return 400 <= status < 500 and status not in RECOVERABLE_STATUS
    payload = _payload(error)
    if payload is not None and {payload.get("type"), payload.get("code")} & CONFIGURATION_CODES:
        return True  # OpenAI's error payload, its codes words: a wrong key, a bad request
    return not CONFIGURATION_ERRORS.isdisjoint(_class_names(error))


def _unfinished_calls(partial: BaseMessage | None) -> list[str]:
    if partial is None:
        return []
    calls: list[str] = []
    chunks = getattr(partial, "tool_call_chunks", None) or []
    if chunks:
        for chunk in chunks:
            calls.append(f"{chunk.get('name') or '?'}({chunk.get('args') or ''}")
        return calls
    for call in getattr(partial, "tool_calls", None) or []:
        calls.append(f"{call['name']}({json.dumps(call['args'], ensure_ascii=False)})")
    for call in getattr(partial, "invalid_tool_calls", None) or []:
        calls.append(f"{call.get('name') or '?'}({call.get('args') or ''}")
    return calls


def llm_error_block(info: LLMError) -> str:
    """The text of the `LLM_ERROR` block for `info`."""
    lines = [
        LLM_ERROR_HEADER,
        f"- kind: {info.kind}",
        f"- error: {info.error_type}: {info.message}"
        if info.message
        else f"- error: {info.error_type}",
    ]
    if info.partial_chars:
        lines.append(
            f"- partial_output: {info.partial_chars} characters above; the reply is incomplete"
        )
    else:
        lines.append("- partial_output: none")
    lines += [
        f"- unfinished_tool_call: {call} (cut off, not run)" for call in info.unfinished_tool_calls
    ]
    lines += [f"- attempts: {info.attempts}", f"- at: {info.at}"]
    if info.partial_chars:
        lines.append(
            "- next: when asked to continue, resume where the partial output stops; "
            "do not repeat it"
        )
    else:
        lines.append("- next: when asked to continue, answer the request again")
    return "\n".join(lines)


def llm_error_message(
    error: BaseException,
    *,
    partial: BaseMessage | str | None = None,
    attempts: int = 1,
    id: str | None = None,
    response_metadata: dict[str, Any] | None = None,
) -> AIMessage:
    """The assistant message that records a failed model call (see the module docstring).

    Args:
        error: the exception the call raised (or the timeout).
        partial: what was streamed before the failure: the merged chunks, or text.
        attempts: attempts made, retries included.
        id: the message id; default the partial reply's id plus `~llm-error` (a new id,
            so LangGraph's `stream_mode="messages"` emits the message after the chunks it
            streamed under the partial reply's id, named in `streamed_id`), else a new one.
        response_metadata: more metadata to keep on the message.

    Example:
        ```python
        message = llm_error_message(TimeoutError("read timed out"), partial="Here is the")
        message.content.splitlines()[:3]   # ['Here is the', '', 'LLM_ERROR']
        ```
    """
    text = partial if isinstance(partial, str) else content_text(partial.content) if partial else ""
    text = text.rstrip()
    message_text = " ".join(str(error).split())
    if len(message_text) > _MESSAGE_CLIP:
        message_text = message_text[: _MESSAGE_CLIP - 1] + "…"
    streamed_id = partial.id if isinstance(partial, BaseMessage) else None
    info = LLMError(
        kind=classify_error(error),
        error_type=type(error).__name__,
        message=message_text,
        partial_chars=len(text),
        unfinished_tool_calls=_unfinished_calls(
            partial if isinstance(partial, BaseMessage) else None
        ),
        attempts=attempts,
        streamed_id=streamed_id,
    )
    block = llm_error_block(info)
    key, value = LLM_ERROR_MARKER
    ident = id or (f"{streamed_id}~llm-error" if streamed_id else f"llm-error-{uuid.uuid4()}")
    return AIMessage(
        content=f"{text}\n\n{block}" if text else block,
        id=ident,
        additional_kwargs={key: value},
        response_metadata={**(response_metadata or {}), "llm_error": info.model_dump(mode="json")},
    )


def is_llm_error(message: Any) -> bool:
    """True for an assistant message made by `llm_error_message` (a failed model call)."""
    if not isinstance(message, BaseMessage) or message.type != "ai":
        return False
    key, value = LLM_ERROR_MARKER
    return (message.additional_kwargs or {}).get(key) == value


def read_llm_error(message: BaseMessage) -> LLMError | None:
    """The `LLMError` of an LLM_ERROR message, or None for any other message."""
    if not is_llm_error(message):
        return None
    try:
        return LLMError.model_validate(message.response_metadata.get("llm_error") or {})
    except ValidationError:
        return None
