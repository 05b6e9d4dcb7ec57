"""The pipeline is a guest in the host's app (issue 13, points 1, 2, 3, 4, 7, 9).

Each point through the three hosts: a `StateGraph` with `ModelNode`, `create_react_agent`
with the pipeline as `pre_model_hook`, and LangChain's `create_agent` with the middleware.
The scripted model (`StreamingScript`) records exactly what it receives.
"""

from __future__ import annotations

import asyncio
import json
import operator
import os
import subprocess
import sys
import textwrap
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langchain_core.tools import tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.prebuilt.chat_agent_executor import AgentState
from typing_extensions import NotRequired

from langgraph_ctx import JsonlSaver
from langgraph_ctx.context.budget import ContextBudget
from langgraph_ctx.context.compaction.conversation import is_summary_class_message
from langgraph_ctx.context.llm_error import error_status, is_llm_error, is_recoverable_error
from langgraph_ctx.context.notebook import ErrorRecord, notebook_reducer
from langgraph_ctx.context.prompt import PromptParts, compose_system_prompt
from langgraph_ctx.context.tokens import count_tokens
from langgraph_ctx.errors import PersonaDroppedWarning, StateKeyConflictError
from langgraph_ctx.nodes.compaction import CompactionNode
from langgraph_ctx.nodes.errors import ModelNode
from langgraph_ctx.nodes.pipeline import ContextPipeline, context_pipeline
from langgraph_ctx.nodes.state import (
    COMPACTION_LOG_SIZE,
    ContextState,
    StateKeys,
    compaction_history,
)
from langgraph_ctx.testing import Cut, StreamingScript

HOSTS = ["state_graph", "react_agent", "create_agent"]
FRENCH = "ALWAYS ANSWER IN FRENCH."
PARTS = PromptParts(persona="You are Ada, a careful analyst.")


@tool
def lookup(city: str) -> str:
    """Look up facts about a city."""
    return f"{city}: population 545,000"


@tool
def explode(what: str) -> str:
    """Always fails."""
    raise RuntimeError(f"cannot explode {what}")


def config(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def exact(messages: list[BaseMessage], tools: list[Any] = ()) -> int:
    return count_tokens(messages, model="gpt-4o", tools=list(tools) or None)


def system_messages(sent: list[BaseMessage]) -> list[BaseMessage]:
    return [m for m in sent if m.type == "system"]


def build(
    host: str,
    saver: JsonlSaver,
    model: StreamingScript,
    pipeline: ContextPipeline,
    *,
    tools: list[Any] = (),
    host_prompt: str | None = None,
    state_schema: type | None = None,
    tool_node: ToolNode | None = None,
    **model_call: Any,
) -> Any:
    """The app, in one of the three hosts, with the pipeline added the documented way.

    `host_prompt`: the app's own system prompt, given where each host takes it
    (`context_pipeline(system_prompt=...)`, `pipeline.create_react_agent(prompt=...)`,
    `create_agent(system_prompt=...)`). `model_call`: `ModelNode` / middleware settings.
    """
    tools = list(tools)
    if host == "state_graph":
        if host_prompt is not None:
            pipeline = pipeline.with_system_prompt(host_prompt)
        builder = StateGraph(state_schema or pipeline.state_schema())
        builder.add_node(
            "model", ModelNode(model, tools=tools or None, keys=pipeline.keys, **model_call)
        )
        entry = pipeline.add_to(builder, before="model")
        builder.add_edge(START, entry)
        if tools:
            builder.add_node("tools", tool_node or ToolNode(tools))
            builder.add_conditional_edges("model", tools_condition)
            builder.add_edge("tools", entry)
        return builder.compile(checkpointer=saver)
    if host == "react_agent":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # create_react_agent
            return pipeline.create_react_agent(
                model,
                tool_node or tools,
                prompt=host_prompt,
                state_schema=state_schema,
                checkpointer=saver,
            )
    from langchain.agents import create_agent

    return create_agent(
        model,
        tools,
        system_prompt=host_prompt,
        # only the app's own tools here (the offered ones: test_compaction_relevance)
        middleware=[pipeline.middleware(offer_tools=False, **model_call)],
        state_schema=state_schema,
        checkpointer=saver,
    )


# -- 1. the host's system prompt ---------------------------------------------------------------


@pytest.mark.parametrize("host", HOSTS)
def test_the_hosts_prompt_comes_first_in_one_counted_system_message(
    host: str, saver: JsonlSaver
) -> None:
    model = StreamingScript(
        script=[
            AIMessage("", tool_calls=[{"name": "lookup", "args": {"city": "Lyon"}, "id": "c1"}]),
            "Lyon compte 545 000 habitants.",
        ]
    )
    # A StateGraph app gives its prompt to the pipeline; the agents keep their own argument.
    in_pipeline = FRENCH if host == "state_graph" else None
    pipeline = context_pipeline(
        "planning", tools=[lookup], prompt=PARTS, mode="agent", system_prompt=in_pipeline
    )
    app = build(host, saver, model, pipeline, tools=[lookup],
                host_prompt=None if in_pipeline else FRENCH)  # fmt: skip
    state = app.invoke({"messages": [("user", "How big is Lyon?")]}, config("p1"))

    expected = f"{FRENCH}\n\n{compose_system_prompt('agent', PARTS)}"
    assert len(model.received) == 2
    for sent in model.received:  # both calls: before and after the tool
        [system] = system_messages(sent)
        assert sent[0] is system or sent[0] == system
        assert system.content == expected
    system_tokens = exact([SystemMessage(expected)]) - exact([])
    assert state["context_usage"].breakdown["system"] == system_tokens
    assert state["context_usage"].used == exact(model.received[-1], [lookup])


def test_context_pipeline_system_prompt_is_sent_in_a_plain_react_agent(saver: JsonlSaver) -> None:
    from langgraph.prebuilt import create_react_agent

    from langgraph_ctx.nodes.state import ContextAgentState

    model = StreamingScript(script=["Bonjour."])
    pipeline = context_pipeline("fast", system_prompt=FRENCH, mode="agent")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        agent = create_react_agent(
            model, [lookup], pre_model_hook=pipeline, state_schema=ContextAgentState
        )
    agent.invoke({"messages": [("user", "hi")]})
    [system] = system_messages(model.received[-1])
    assert system.content.startswith(FRENCH + "\n\nYou are an agent")


def test_the_agents_prompt_then_the_pipelines_then_the_modes(saver: JsonlSaver) -> None:
    model = StreamingScript(script=["Bonjour."])
    pipeline = context_pipeline("fast", system_prompt="Cite sources.")
    app = build("create_agent", saver, model, pipeline, host_prompt=FRENCH)
    app.invoke({"messages": [("user", "hi")]}, config("p1b"))
    [system] = system_messages(model.received[-1])
    assert system.content.startswith(f"{FRENCH}\n\nCite sources.\n\nYou are a helpful")


@pytest.mark.parametrize("host", ["state_graph", "react_agent"])
@pytest.mark.parametrize("rewrite", [False, True])
def test_a_system_message_opening_the_history_joins_the_one_system_message(
    host: str, rewrite: bool, saver: JsonlSaver
) -> None:
    model = StreamingScript(script=[lambda msgs: f"compris, {len(msgs)}"])
    compaction = CompactionNode("window", trigger=("messages", 5), target=450,
                                rewrite_messages=rewrite)  # fmt: skip
    pipeline = context_pipeline("planning", mode="agent", compaction=compaction)
    app = build(host, saver, model, pipeline)
    first = {"messages": [SystemMessage(FRENCH, id="host-prompt"), ("user", words(0))]}
    state = app.invoke(first, config("p1s"))
    for i in range(1, 6):
        state = app.invoke({"messages": [("user", words(i))]}, config("p1s"))
    assert state["compaction_log"], "the small trigger must have compacted"
    for sent in model.received:  # one system message, besides the running summaries
        [system] = [m for m in system_messages(sent) if not is_summary_class_message(m)]
        assert system.content.startswith(f"{FRENCH}\n\nYou are an agent")
    assert state["messages"][0].content == FRENCH  # the history keeps the host's prompt
    assert (len(state["messages"]) < 13) is rewrite  # 1 + 6 turns of 2, unless rewritten
    assert state["context_usage"].used == exact(model.received[-1])


def test_create_agent_with_prompt_false_sends_the_hosts_prompt_alone(saver: JsonlSaver) -> None:
    model = StreamingScript(script=["Bonjour."])
    pipeline = context_pipeline("fast", prompt=False)
    app = build("create_agent", saver, model, pipeline, host_prompt=FRENCH)
    state = app.invoke({"messages": [("user", "hi")]}, config("p1f"))
    [system] = system_messages(model.received[-1])
    assert system.content == FRENCH
    assert state["context_usage"].breakdown["system"] == exact([SystemMessage(FRENCH)]) - exact([])


# -- 2. a persona the mode drops is never silently absent ---------------------------------------


@pytest.mark.parametrize("host", HOSTS)
def test_a_persona_chat_mode_drops_warns_once_and_is_sent_in_agent_mode(
    host: str, saver: JsonlSaver
) -> None:
    model = StreamingScript(script=["hello", "hello again", "as Ada"])
    app = build(host, saver, model, context_pipeline("fast", prompt=PARTS, mode="chat"))
    with pytest.warns(PersonaDroppedWarning, match="persona") as caught:
        app.invoke({"messages": [("user", "hi")]}, config("p2"))
        app.invoke({"messages": [("user", "and again")]}, config("p2"))
    assert len([w for w in caught if w.category is PersonaDroppedWarning]) == 1
    assert all("You are Ada" not in system_messages(s)[0].content for s in model.received)

    with warnings.catch_warnings():
        warnings.simplefilter("error", PersonaDroppedWarning)  # agent mode: no warning
        app.invoke({"messages": [("user", "who are you?")], "mode": "agent"}, config("p2"))
    assert "You are Ada, a careful analyst." in system_messages(model.received[-1])[0].content


# -- 3. configuration errors raise, failures "continue" can fix become LLM_ERROR -----------------


def provider_error(name: str, status: int | None = None, **attrs: Any) -> BaseException:
    """An exception shaped like a provider SDK's (openai / anthropic are not installed)."""
    namespace: dict[str, Any] = dict(attrs)
    if status is not None:
        namespace["status_code"] = status
    return type(name, (Exception,), namespace)(f"status {status}")


class _Response:
    status_code = 403


@pytest.mark.parametrize(
    ("error", "recoverable"),
    [
        (provider_error("AuthenticationError", 401), False),
        (provider_error("PermissionDeniedError", 403), False),
        (provider_error("BadRequestError", 400), False),
        (provider_error("NotFoundError", 404), False),
        (provider_error("UnprocessableEntityError", 422), False),
        (provider_error("AuthenticationError"), False),  # by name, no status
        (provider_error("APIStatusError", response=_Response()), False),  # response.status_code
        (provider_error("GoogleError", http_status=401), False),
        (provider_error("GrpcLike", code=404), False),
        (provider_error("RateLimitError", 429), True),
        (provider_error("InternalServerError", 500), True),
        (provider_error("OverloadedError", 529), True),
        (provider_error("APITimeoutError"), True),
        (provider_error("APIConnectionError"), True),
        (provider_error("ReadTimeout"), True),  # httpx
        (provider_error("RemoteProtocolError"), True),  # httpx: stream closed mid-way
        (provider_error("APIError"), True),  # a provider's base class, no status: mid-stream
        # langchain-openai, for an error an OpenAI-compatible API sends with HTTP 200:
        (ValueError({"message": "Provider returned error", "code": 502}), True),
        (ValueError({"message": "Rate limited upstream", "code": 429}), True),
        (ValueError({"message": "Invalid model", "code": 400}), False),
        (ValueError("No generations found in stream."), True),  # langchain-core, empty stream
        (asyncio.TimeoutError(), True),
        (ConnectionResetError(), True),
        # Anything else raises, as without the pipeline: no reply hides it from the app.
        (provider_error("ErrorWithCode", code="invalid_api_key"), False),  # not a status
        (ValueError("unknown"), False),
        (TypeError("unsupported operand"), False),  # a bug in the app's code
        (KeyError("model"), False),
        (provider_error("PolicyViolation"), False),  # an exception of the app's own
    ],
)
def test_which_failures_continue_can_fix(error: BaseException, recoverable: bool) -> None:
    assert is_recoverable_error(error) is recoverable
    assert is_recoverable_error(error, streamed=True)  # a stream cut mid-way


def test_a_wrapped_provider_error_is_read_through_its_cause() -> None:
    """langchain-google-genai raises its own error "from" Google's (a 429 there): the
    status is read from the cause, so a rate limit stays a reply."""
    from langgraph_ctx.context.llm_error import is_configuration_error

    class ChatGoogleGenerativeAIError(Exception):
        pass

    ChatGoogleGenerativeAIError.__module__ = "langchain_google_genai.chat_models"  # theirs

    def wrapped(status: int) -> BaseException:
        try:
            try:
                raise provider_error("ClientError", code=status)
            except Exception as inner:
                raise ChatGoogleGenerativeAIError(f"Error calling model: {status}") from inner
        except ChatGoogleGenerativeAIError as outer:
            return outer

    assert error_status(wrapped(429)) == 429 and is_recoverable_error(wrapped(429))
    assert not is_recoverable_error(wrapped(403)) and is_configuration_error(wrapped(403))
    assert not is_configuration_error(TypeError("a bug")) and not is_configuration_error(
        wrapped(503)
    )
    # The app's own exception raised from a provider's is the app's: it raises.
    try:
        try:
            raise provider_error("RateLimitError", 429)
        except Exception as inner:
            raise PolicyViolation("user u42 is over the plan's quota") from inner
    except PolicyViolation as own:
        assert error_status(own) is None and not is_recoverable_error(own)
    # OpenAI's error payload names a wrong key in words: raised, by the summarizer too.
    wrong_key = ValueError({"message": "Incorrect API key", "type": "invalid_request_error",
                            "code": "invalid_api_key"})  # fmt: skip
    assert is_configuration_error(wrong_key) and not is_recoverable_error(wrong_key)
    assert error_status(ValueError({"code": 100})) is None  # no error status: not one


def test_the_status_is_read_from_the_usual_attributes() -> None:
    assert error_status(provider_error("A", 401)) == 401
    assert error_status(provider_error("B", response=_Response())) == 403
    assert error_status(provider_error("C", code="401")) == 401
    assert error_status(provider_error("D", code="rate_limited")) is None
    assert error_status(ValueError()) is None


@pytest.mark.parametrize("host", HOSTS)
def test_a_wrong_api_key_raises_instead_of_becoming_a_chat_reply(
    host: str, saver: JsonlSaver
) -> None:
    auth = provider_error("AuthenticationError", 401)
    model = StreamingScript(script=[auth, "never"])
    retries = {} if host == "react_agent" else {"max_retries": 2, "retry_delay": 0.01}
    app = build(host, saver, model, context_pipeline("fast"), **retries)
    with pytest.raises(type(auth), match="status 401"):
        app.invoke({"messages": [("user", "hi")]}, config("p3"))
    assert len(model.received) == 1  # no retry either: it would fail the same way


@pytest.mark.parametrize("host", HOSTS)
def test_a_run_after_a_failed_one_warns_of_no_dropped_state_key(
    host: str, saver: JsonlSaver
) -> None:
    """The first run's model call fails (a wrong key, fixed before the next run): nothing of
    that step was saved, so the next run finds no compaction cursor. The compaction node
    took that for a state that drops its keys and warned so."""
    auth = provider_error("AuthenticationError", 401)
    model = StreamingScript(script=[auth, "fine now"])
    app = build(host, saver, model, context_pipeline("fast"))
    with pytest.raises(type(auth)):
        app.invoke({"messages": [("user", "hi")]}, config(f"again-{host}"))
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        out = app.invoke({"messages": [("user", "hi again")]}, config(f"again-{host}"))
    assert out["messages"][-1].content == "fine now"


class PolicyViolation(Exception):
    """A guardrail of the app's own refusing a request."""


@pytest.mark.parametrize("door", ["sync", "async"])
@pytest.mark.parametrize("host", HOSTS)
def test_a_bug_in_the_apps_code_raises_instead_of_becoming_a_chat_reply(
    host: str, door: str, saver: JsonlSaver
) -> None:
    """A `TypeError` from the model call (the app's wrapper, a tool schema it built) is a
    bug no retry and no "continue" fixes: it reaches the app, as without the pipeline,
    and nothing of it is saved as a reply."""
    model = StreamingScript(script=[TypeError("unsupported operand type(s)"), "never"])
    retries = {} if host == "react_agent" else {"max_retries": 2, "retry_delay": 0.01}
    app = build(host, saver, model, context_pipeline("fast"), **retries)
    inputs = {"messages": [("user", "hi")]}
    with pytest.raises(TypeError, match="unsupported operand"):
        if door == "sync":
            app.invoke(inputs, config(f"bug-{host}"))
        else:
            asyncio.run(app.ainvoke(inputs, config(f"bug-{host}")))
    assert len(model.received) == 1  # not retried either
    saved = app.get_state(config(f"bug-{host}")).values.get("messages", [])
    assert not any(is_llm_error(m) for m in saved)


def test_an_exception_of_a_later_middleware_reaches_the_app(saver: JsonlSaver) -> None:
    """The middleware's model call runs the middleware after it too: a guardrail there
    that refuses the request raises to the app, as it does without the pipeline."""
    from langchain.agents import create_agent
    from langchain.agents.middleware import wrap_model_call

    @wrap_model_call  # type: ignore[arg-type]
    def guard(request: Any, handler: Any) -> Any:
        raise PolicyViolation("blocked: the request holds a card number")

    for middleware in ([guard], [context_pipeline("fast").middleware(), guard]):
        model = StreamingScript(script=["never"])
        agent = create_agent(model, [], middleware=middleware, checkpointer=saver)
        thread = config(f"guard-{len(middleware)}")
        with pytest.raises(PolicyViolation, match="card number"):
            agent.invoke({"messages": [("user", "my card is 4111 1111 1111 1111")]}, thread)
        saved = agent.get_state(thread).values.get("messages", [])
        assert not any(is_llm_error(m) for m in saved)


@pytest.mark.parametrize("door", ["invoke", "ainvoke"])
@pytest.mark.parametrize("kind", ["retry", "fallback"])
@pytest.mark.parametrize("order", ["host first", "pipeline first"])
def test_the_hosts_retry_and_fallback_middleware_get_the_failure_in_either_order(
    kind: str, order: str, door: str, saver: JsonlSaver
) -> None:
    """LangChain's `ModelRetryMiddleware` / `ModelFallbackMiddleware` listed before the
    pipeline (wrapping it, the order the docs give for the host's middleware) never saw a
    failed call: the pipeline had made it an `LLM_ERROR` reply, so the retry did not retry
    and the fallback did not fall back. Now they get it, in either order, as without the
    pipeline; and a retry of the same step's request warns of nothing."""
    from langchain.agents import create_agent
    from langchain.agents.middleware import ModelFallbackMiddleware, ModelRetryMiddleware

    primary = StreamingScript(script=[ConnectionError("connection reset"), "from primary"])
    backup = StreamingScript(script=["from backup"])
    host: Any = (
        ModelRetryMiddleware(max_retries=2, initial_delay=0, jitter=False)
        if kind == "retry"
        else ModelFallbackMiddleware(backup)
    )
    pipe = context_pipeline("fast").middleware()
    middleware = [host, pipe] if order == "host first" else [pipe, host]
    agent = create_agent(primary, [], middleware=middleware, checkpointer=saver)
    thread = config(f"{kind}-{order}-{door}")
    inputs = {"messages": [("user", "hi")]}
    # (recorded, not raised: a retry middleware would retry a warning raised as an error)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UserWarning)
        if door == "invoke":
            agent.invoke(inputs, thread)
        else:
            asyncio.run(agent.ainvoke(inputs, thread))
    assert not [w for w in caught if issubclass(w.category, UserWarning)]
    saved = agent.get_state(thread).values["messages"]
    assert not any(is_llm_error(m) for m in saved)
    assert saved[-1].content == ("from primary" if kind == "retry" else "from backup")
    assert (len(primary.received), len(backup.received)) == ((2, 0) if kind == "retry" else (1, 1))


def test_a_host_retry_that_gives_up_with_its_own_reply_leaves_no_false_key_warning(
    saver: JsonlSaver,
) -> None:
    """`ModelRetryMiddleware` (its default ``on_failure="continue"``) before the pipeline
    gives up on a thread's first model call and saves a reply of its own: nothing the
    pipeline wrote for that call was saved. The next run warned that the state drops the
    pipeline's keys (review 21)."""
    from langchain.agents import create_agent
    from langchain.agents.middleware import ModelRetryMiddleware

    model = StreamingScript(script=[ConnectionError("reset"), ConnectionError("reset"), "fine"])
    retry = ModelRetryMiddleware(max_retries=1, initial_delay=0, jitter=False)
    agent = create_agent(model, [], middleware=[retry, context_pipeline("fast").middleware()],
                         checkpointer=saver)  # fmt: skip
    out = agent.invoke({"messages": [("user", "hi")]}, config("gave-up"))
    assert out["messages"][-1].content.startswith("Model call failed")
    with warnings.catch_warnings(record=True) as caught:  # (a raised one would be retried)
        warnings.simplefilter("always", UserWarning)
        out = agent.invoke({"messages": [("user", "hi again")]}, config("gave-up"))
    assert not [str(w.message) for w in caught if issubclass(w.category, UserWarning)]
    assert out["messages"][-1].content == "fine"
    assert agent.get_state(config("gave-up")).values.get("compaction_cursor") is not None


def test_one_middleware_in_agents_with_and_without_a_host_retry_says_so(
    saver: JsonlSaver,
) -> None:
    """One `pipeline.middleware()` instance in two agents, one with a host retry before
    it: the last agent built decided for both, silently (review 21). Failures now go to
    the host's retry where there is one and are raised where there is none, as without
    the pipeline, and building the second agent warns how to keep both behaviours."""
    from langchain.agents import create_agent
    from langchain.agents.middleware import ModelRetryMiddleware

    for retry_first in (False, True):  # (either agent built first)
        shared = context_pipeline("fast").middleware()
        plain_model = StreamingScript(script=[ConnectionError("reset")])
        retry = ModelRetryMiddleware(max_retries=1, initial_delay=0, jitter=False)
        retried_model = StreamingScript(script=[ConnectionError("reset"), "retried"])
        with pytest.warns(UserWarning, match="own pipeline.middleware") as caught:
            if retry_first:
                retried = create_agent(retried_model, [], middleware=[retry, shared])
                plain = create_agent(plain_model, [], middleware=[shared])
            else:
                plain = create_agent(plain_model, [], middleware=[shared])
                retried = create_agent(retried_model, [], middleware=[retry, shared])
        assert caught[0].filename == __file__  # pointed at the app's create_agent call
        thread = f"shared-{retry_first}"
        out = retried.invoke({"messages": [("user", "hi")]}, config(f"{thread}-retry"))
        assert out["messages"][-1].content == "retried" and len(retried_model.received) == 2
        with pytest.raises(ConnectionError):
            plain.invoke({"messages": [("user", "hi")]}, config(f"{thread}-plain"))
    # A host's tool retry decides nothing while the pipeline leaves tool errors alone
    # (tool_errors=False): agents that differ only in it draw no warning.
    from langchain.agents.middleware import ToolRetryMiddleware

    shared = context_pipeline("fast").middleware()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        create_agent(StreamingScript(script=["a"]), [], middleware=[ToolRetryMiddleware(), shared])
        create_agent(StreamingScript(script=["b"]), [], middleware=[shared])
    assert not [w for w in caught if "own pipeline.middleware" in str(w.message)]


@pytest.mark.parametrize("kind", ["retry", "error"])
def test_the_hosts_tool_retry_and_error_middleware_keep_their_job_under_tool_errors(
    kind: str, saver: JsonlSaver
) -> None:
    """With ``tool_errors=True``, a host `ToolRetryMiddleware` / `ToolErrorMiddleware` listed
    before the pipeline never saw a tool's failure (the pipeline made it its own error
    result): the tool ran once, the host's ``on_error`` text was replaced. Now the host's
    middleware gets it, as without the pipeline."""
    from langchain.agents import create_agent
    from langchain.agents.middleware import ToolErrorMiddleware, ToolRetryMiddleware

    runs: list[str] = []

    @tool
    def flaky(x: str) -> str:
        """Fails on its first run."""
        runs.append(x)
        if len(runs) == 1:
            raise ConnectionError("tool backend reset")
        return "tool ok"

    host: Any = (
        ToolRetryMiddleware(max_retries=1, initial_delay=0, jitter=False)
        if kind == "retry"
        else ToolErrorMiddleware(on_error=lambda e, r: f"HOST: tool failed ({e})")
    )
    call = {"name": "flaky", "args": {"x": "1"}, "id": "c1", "type": "tool_call"}
    model = StreamingScript(script=[AIMessage("", tool_calls=[call]), "Done"])
    pipe = context_pipeline("fast").middleware(tool_errors=True, offer_tools=False)
    agent = create_agent(model, [flaky], middleware=[host, pipe], checkpointer=saver)
    agent.invoke({"messages": [("user", "go")]}, config(f"tool-{kind}"))
    result = [m for m in agent.get_state(config(f"tool-{kind}")).values["messages"]
              if m.type == "tool"]  # fmt: skip
    expected = "tool ok" if kind == "retry" else "HOST: tool failed (tool backend reset)"
    assert [m.content for m in result] == [expected]
    assert len(runs) == (2 if kind == "retry" else 1)


def test_an_error_after_a_fallback_finished_the_reply_is_no_cut_stream(
    saver: JsonlSaver,
) -> None:
    """A model `.with_fallbacks(...)`: the first run streams a few words and is cut, the
    fallback finishes the reply, then a later middleware raises. The newest run ended,
    so that error is the app's and reaches it (it was kept as a reply holding the dead
    run's words)."""
    from langchain.agents import create_agent
    from langchain.agents.middleware import wrap_model_call

    @wrap_model_call  # type: ignore[arg-type]
    def guard(request: Any, handler: Any) -> Any:
        handler(request)
        raise PolicyViolation("blocked by the app's output guardrail")

    cut = Cut("Partial words from the first", 3, error=ConnectionError("reset"))
    model = StreamingScript(script=[cut]).with_fallbacks([StreamingScript(script=["whole"])])
    agent = create_agent(model, [], checkpointer=saver,
                         middleware=[context_pipeline("fast").middleware(), guard])  # fmt: skip
    with pytest.raises(PolicyViolation, match="output guardrail"):
        agent.invoke({"messages": [("user", "hi")]}, config("fallback"))
    saved = agent.get_state(config("fallback")).values.get("messages", [])
    assert not any(is_llm_error(m) for m in saved)


def test_a_structured_output_error_the_agent_raises_stays_raised(saver: JsonlSaver) -> None:
    """`ToolStrategy(handle_errors=False)`: the app asked for invalid structured output to
    raise; with the middleware it still raises, and no `LLM_ERROR` reply is saved."""
    from langchain.agents import create_agent
    from langchain.agents.structured_output import (
        StructuredOutputValidationError,
        ToolStrategy,
    )
    from pydantic import BaseModel

    class Weather(BaseModel):
        city: str
        temp: int

    invalid = {"city": "Paris", "temp": "hot"}
    for middleware in ([], [context_pipeline("fast").middleware()]):
        reply = AIMessage("", tool_calls=[{"name": "Weather", "args": invalid, "id": "s1"}])
        agent = create_agent(
            StreamingScript(script=[reply]),
            [],
            response_format=ToolStrategy(Weather, handle_errors=False),
            middleware=middleware,
            checkpointer=saver,
        )
        thread = config(f"structured-{len(middleware)}")
        with pytest.raises(StructuredOutputValidationError):
            agent.invoke({"messages": [("user", "weather in Paris?")]}, thread)
        saved = agent.get_state(thread).values.get("messages", [])
        assert not any(is_llm_error(m) for m in saved)


@pytest.mark.parametrize("host", ["state_graph", "create_agent"])
def test_rate_limits_and_cut_streams_stay_llm_error_replies(host: str, saver: JsonlSaver) -> None:
    limited = provider_error("RateLimitError", 429)
    cut = Cut("Voici le plan : d'abord", 3, error=provider_error("AuthenticationError", 401))
    model = StreamingScript(script=[limited, limited, cut, "suite"])
    app = build(host, saver, model, context_pipeline("fast"), max_retries=1, retry_delay=0.01)
    state = app.invoke({"messages": [("user", "plan")]}, config("p3b"))
    assert is_llm_error(state["messages"][-1]) and len(model.received) == 2  # retried once
    state = app.invoke({"messages": [("user", "again")]}, config("p3b"))
    failed = state["messages"][-1]
    assert is_llm_error(failed) and failed.content.startswith("Voici le plan\n\nLLM_ERROR")
    assert [r["error_type"] for r in state["error_notebook"]] == [
        "RateLimitError",
        "AuthenticationError",
    ]


@pytest.mark.parametrize("host", ["state_graph", "create_agent"])
def test_recoverable_errors_changes_the_split(host: str, saver: JsonlSaver) -> None:
    model = StreamingScript(script=[provider_error("AuthenticationError", 401), "ok"])
    pipeline = context_pipeline("fast", recoverable_errors=lambda error: True)
    setting = {"recoverable_errors": pipeline.recoverable_errors} if host == "state_graph" else {}
    app = build(host, saver, model, pipeline, **setting)
    state = app.invoke({"messages": [("user", "hi")]}, config("p3c"))
    assert is_llm_error(state["messages"][-1])

    strict = StreamingScript(script=[provider_error("RateLimitError", 429)])
    never: Callable[[BaseException], bool] = lambda error: False  # noqa: E731
    app = build(host, saver, strict, context_pipeline("fast", recoverable_errors=never),
                **({"recoverable_errors": never} if host == "state_graph" else {}))  # fmt: skip
    with pytest.raises(Exception, match="status 429"):
        app.invoke({"messages": [("user", "hi")]}, config("p3d"))


# -- 4. tool errors follow the host's own handling -----------------------------------------------


def explode_call(call_id: str = "c1") -> AIMessage:
    return AIMessage("", tool_calls=[{"name": "explode", "args": {"what": "moon"}, "id": call_id}])


@pytest.mark.parametrize("host", HOSTS)
def test_a_tool_that_raises_fails_the_run_as_without_the_pipeline(
    host: str, saver: JsonlSaver
) -> None:
    model = StreamingScript(script=[explode_call(), "done"])
    app = build(host, saver, model, context_pipeline("fast"), tools=[explode])
    with pytest.raises(RuntimeError, match="cannot explode moon"):
        app.invoke({"messages": [("user", "blow it up")]}, config("p4"))


@pytest.mark.parametrize("host", HOSTS)
def test_tool_errors_the_host_handles_are_recorded(host: str, saver: JsonlSaver) -> None:
    model = StreamingScript(script=[explode_call(), "it failed"])
    handled = ToolNode([explode], handle_tool_errors=True)
    if host == "create_agent":  # create_agent builds its own ToolNode: the middleware catches
        app = build(host, saver, model, context_pipeline("fast"), tools=[explode],
                    tool_errors=True)  # fmt: skip
    else:
        app = build(host, saver, model, context_pipeline("fast"), tools=[explode],
                    tool_node=handled)  # fmt: skip
    state = app.invoke({"messages": [("user", "blow it up")]}, config("p4b"))
    assert state["messages"][2].status == "error"
    assert model.received[-1][-1].status == "error"  # the model saw the error result
    [record] = state["error_notebook"]
    assert record["tool_name"] == "explode" and record["kind"] == "tool_error"


# -- 7. app-owned state keys --------------------------------------------------------------------


class AppState(MessagesState):
    mode: str  # the app's own: "thorough" or "quick"


class AppContextState(ContextState):
    mode: str  # type: ignore[misc]  # the app's own, over the pipeline's


class AppAgentState(AgentState):  # create_react_agent's
    mode: NotRequired[str]


def app_langchain_state() -> type:
    """The same app state on `create_agent`'s own `AgentState`."""
    from langchain.agents.middleware.types import AgentState as LangChainAgentState

    return type("AppLangChainState", (LangChainAgentState,), {"__annotations__": {"mode": str}})


@pytest.mark.parametrize("host", HOSTS)
def test_an_app_key_of_the_same_name_is_a_clear_error(host: str, saver: JsonlSaver) -> None:
    model = StreamingScript(script=["ok"])
    pipeline = context_pipeline("fast")
    if host == "state_graph":
        with pytest.raises(StateKeyConflictError, match=r"'mode'.*keys=\{'mode': 'ctx_mode'\}"):
            build(host, saver, model, pipeline, state_schema=AppContextState)  # add_to
        with pytest.raises(StateKeyConflictError, match="'mode'"):
            pipeline.state_schema(AppState)
        return
    if host == "react_agent":
        schema = type("ReactState", (AppAgentState,), {"__annotations__": {}})
        with pytest.raises(StateKeyConflictError, match="'mode'") as raised:
            build(host, saver, model, pipeline, state_schema=schema)
        assert raised.value.key == "mode"
        return
    app = build(host, saver, model, pipeline, state_schema=app_langchain_state())
    with pytest.raises(StateKeyConflictError, match=r"holds 'thorough'.*ctx_mode"):
        app.invoke({"messages": [("user", "hi")], "mode": "thorough"}, config("p7"))
    assert model.received == []  # caught before the model call


def test_a_plain_react_agent_with_an_app_mode_fails_clearly_at_the_first_call() -> None:
    from langgraph.prebuilt import create_react_agent

    model = StreamingScript(script=["ok"])
    from langgraph_ctx.nodes.state import ContextAgentState

    state = type("S", (ContextAgentState,), {"__annotations__": {"mode": NotRequired[str]}})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        agent = create_react_agent(
            model, [lookup], pre_model_hook=context_pipeline("fast"), state_schema=state
        )
    with pytest.raises(StateKeyConflictError, match="'mode'"):
        agent.invoke({"messages": [("user", "hi")], "mode": "thorough"})


@pytest.mark.parametrize("host", HOSTS)
def test_renamed_keys_leave_the_apps_own_keys_alone(host: str, saver: JsonlSaver) -> None:
    model = StreamingScript(script=["quick answer", "agent answer"])
    pipeline = context_pipeline("fast", prompt=PARTS, keys={"mode": "ctx_mode"})
    if host == "state_graph":
        schema: type | None = pipeline.state_schema(AppState)
    elif host == "react_agent":
        schema = pipeline.keys.schema(AppAgentState)
    else:
        schema = app_langchain_state()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PersonaDroppedWarning)
        app = build(host, saver, model, pipeline, state_schema=schema)
        state = app.invoke({"messages": [("user", "hi")], "mode": "thorough"}, config("p7b"))
    assert state["mode"] == "thorough" and state["ctx_mode"] == "chat"  # the default, written
    assert "- active: chat" in system_messages(model.received[-1])[0].content

    state = app.invoke(
        {"messages": [("user", "go")], "mode": "quick", "ctx_mode": "agent"}, config("p7b")
    )
    assert state["mode"] == "quick" and state["ctx_mode"] == "agent"
    assert "- active: agent" in system_messages(model.received[-1])[0].content
    if host != "react_agent":  # the react agent's own model node does not tag replies
        assert state["messages"][-1].response_metadata["langgraph_ctx"]["mode"] == "agent"


def test_state_keys_validation() -> None:
    with pytest.raises(ValueError, match="not keys of the pipeline"):
        StateKeys.of({"moed": "x"})
    with pytest.raises(ValueError, match="two of the pipeline's keys"):
        StateKeys.of({"mode": "system_prompt"})
    with pytest.raises(ValueError, match="'messages'"):
        StateKeys.of({"mode": "messages"})
    keys = StateKeys.of({"mode": "ctx_mode"})
    assert keys.read({"mode": "thorough", "ctx_mode": "agent"}) == {"mode": "agent"}
    assert keys.write({"mode": "chat", "messages": []}) == {"ctx_mode": "chat", "messages": []}
    # A subclass of ContextState, reducers of its own: no conflict.
    class Mine(ContextState):
        error_notebook: Annotated[list[ErrorRecord], notebook_reducer(200)]
        compaction_log: Annotated[list[dict[str, Any]], operator.add]

    context_pipeline("fast").check_schema(Mine)


# -- 9. no stale run tags; a bounded compaction_log ---------------------------------------------

RUN = {"workflow_id": "wf", "run_id": "r1", "step": {"id": "s1", "brief": "Collect."}}


@pytest.mark.parametrize("host", ["state_graph", "create_agent"])
def test_replies_after_a_completed_run_carry_no_run_id(host: str, saver: JsonlSaver) -> None:
    model = StreamingScript(script=["step done", "about the run", "chatting"])
    app = build(host, saver, model, context_pipeline("fast"))
    state = app.invoke(
        {"messages": [("user", "go")], "mode": "run", "run_context": RUN}, config("p9")
    )
    assert state["messages"][-1].response_metadata["langgraph_ctx"] == {
        "mode": "run",
        "run_id": "r1",
        "step_id": "s1",
    }
    done = {**RUN, "status": "completed"}
    state = app.invoke({"messages": [("user", "how was it?")], "run_context": done}, config("p9"))
    assert state["messages"][-1].response_metadata["langgraph_ctx"] == {"mode": "run"}
    state = app.invoke({"messages": [("user", "thanks")], "mode": "chat"}, config("p9"))
    assert state["messages"][-1].response_metadata["langgraph_ctx"] == {"mode": "chat"}


def test_notebook_records_of_a_react_agent_after_a_completed_run_carry_no_run_id(
    saver: JsonlSaver,
) -> None:
    model = StreamingScript(script=[explode_call(), "failed", explode_call("c2"), "failed again"])
    handled = ToolNode([explode], handle_tool_errors=True)
    app = build("react_agent", saver, model, context_pipeline("fast"), tool_node=handled)
    state = app.invoke(
        {"messages": [("user", "go")], "mode": "run", "run_context": RUN}, config("p9r")
    )
    assert state["error_notebook"][-1]["run_id"] == "r1"
    done = {**RUN, "status": "completed"}
    state = app.invoke({"messages": [("user", "retry")], "run_context": done}, config("p9r"))
    assert state["error_notebook"][-1]["run_id"] is None


def words(i: int) -> str:
    return f"turn {i}: the depot at /srv/depot/{i}.csv holds {i * 37} pallets " + "padding " * 30


@pytest.mark.parametrize("host", HOSTS)
def test_compaction_log_keeps_a_window_and_the_history_keeps_all(
    host: str, saver: JsonlSaver
) -> None:
    model = StreamingScript(script=[lambda msgs: f"noted {len(msgs)}"])
    compaction = CompactionNode("window", trigger=("messages", 4), target=400)
    pipeline = context_pipeline(ContextBudget(total=4_000, output_reserve=200),
                                compaction=compaction)  # fmt: skip
    app = build(host, saver, model, pipeline)
    turns = COMPACTION_LOG_SIZE + 4
    for i in range(turns):
        state = app.invoke({"messages": [("user", words(i))]}, config("p9c"))
    history = compaction_history(app.get_state_history(config("p9c")))
    assert len(history) > COMPACTION_LOG_SIZE
    assert len(state["compaction_log"]) == COMPACTION_LOG_SIZE
    assert state["compaction_log"] == history[-COMPACTION_LOG_SIZE:]


def test_pipeline_create_react_agent_takes_a_response_format(saver: JsonlSaver) -> None:
    """`pipeline.create_react_agent(..., response_format=X)` raised `ValueError: Missing
    required key(s) {'structured_response'}`: its default schema lacked the key LangGraph's
    own default has. Now the default is LangGraph's schema plus the pipeline's keys."""
    from pydantic import BaseModel

    from langgraph_ctx.testing import ScriptedChatModel

    class Answer(BaseModel):
        city: str

    call = {"name": "Answer", "args": {"city": "Oslo"}, "id": "s1"}
    model = ScriptedChatModel(
        script=[AIMessage("It is sunny in Oslo."), AIMessage("", tool_calls=[call])],
        model_name="gpt-4o",
    )
    pipeline = context_pipeline("fast", model="gpt-4o", tools=[lookup], mode="agent")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # create_react_agent
        agent = pipeline.create_react_agent(
            model, [lookup], response_format=Answer, checkpointer=saver
        )
    state = agent.invoke({"messages": [("user", "weather?")]}, {"configurable": {"thread_id": "r"}})
    assert state["structured_response"] == Answer(city="Oslo")
    assert state["context_usage"].used > 0  # the pipeline ran before the model
    first = model.received[0]
    assert isinstance(first[0], SystemMessage) and "agent" in first[0].content.lower()


def _answer_schema() -> tuple[Any, Any, dict[str, Any]]:
    """A response schema, the same schema as an ordinary tool, and a call of it."""
    from langchain_core.tools import StructuredTool
    from pydantic import BaseModel

    class Answer(BaseModel):
        """The answer."""

        city: str
        summary: str

    def answer(city: str, summary: str) -> str:
        """The answer."""
        return city

    as_tool = StructuredTool.from_function(answer, name="Answer", args_schema=Answer)
    call = {"name": "Answer", "args": {"city": "Oslo", "summary": "sunny"}, "id": "c2"}
    return Answer, as_tool, call


def test_create_agents_tool_strategy_tools_are_counted(saver: JsonlSaver) -> None:
    """A `ToolStrategy` response format's tool is bound to the model after the middleware
    (`create_agent`), so the budget left it out (290 counted, 314 sent). Counted now: the
    same as the same schema given as an ordinary tool."""
    from langchain.agents import create_agent
    from langchain.agents.structured_output import ToolStrategy

    from langgraph_ctx.testing import ScriptedChatModel

    Answer, as_tool, call = _answer_schema()
    counted = {}
    for how in ("strategy", "tool"):
        script = [AIMessage("", tool_calls=[call]), "done"]  # a tool's result: one more call
        model = ScriptedChatModel(script=script, model_name="gpt-4o")
        pipeline = context_pipeline("fast", model="gpt-4o", mode="agent")
        agent = create_agent(
            model,
            [lookup] if how == "strategy" else [lookup, as_tool],
            response_format=ToolStrategy(Answer) if how == "strategy" else None,
            middleware=[pipeline.middleware(offer_tools=False)],
            checkpointer=saver,
        )
        config = {"configurable": {"thread_id": how}}
        state = agent.invoke({"messages": [("user", "weather?")]}, config)
        assert sorted(t["function"]["name"] for t in model.tools) == ["Answer", "lookup"]
        counted[how] = state["context_usage"].breakdown["tools"]
    assert counted["strategy"] == counted["tool"] > 0


@pytest.mark.parametrize(("model_name", "bound"), [("local-model", True), ("gpt-4o", False)])
def test_create_agents_raw_response_format_is_counted(
    saver: JsonlSaver, model_name: str, bound: bool
) -> None:
    """A raw schema as ``response_format`` (`AutoStrategy`): `create_agent` binds it as a
    tool for a model without native structured output, or sends it as the provider's
    response format; either way it was not counted (32 tokens of tools for 57 sent). It
    counts as the same schema given as an ordinary tool."""
    from langchain.agents import create_agent

    from langgraph_ctx.testing import ScriptedChatModel

    Answer, as_tool, call = _answer_schema()
    counted, sent = {}, {}
    for how in ("raw", "tool"):
        native = how == "raw" and not bound  # the reply is the JSON, not a tool call
        script = ['{"city": "Oslo", "summary": "sunny"}'] if native else [
            AIMessage("", tool_calls=[call]), "done"
        ]
        model = ScriptedChatModel(script=script, model_name=model_name)
        pipeline = context_pipeline("fast", model="gpt-4o", mode="agent")
        agent = create_agent(
            model,
            [lookup] if how == "raw" else [lookup, as_tool],
            response_format=Answer if how == "raw" else None,
            middleware=[pipeline.middleware(offer_tools=False)],
            checkpointer=saver,
        )
        config = {"configurable": {"thread_id": f"{model_name}-{how}"}}
        state = agent.invoke({"messages": [("user", "weather?")]}, config)
        sent[how] = sorted(t["function"]["name"] for t in model.tools)
        counted[how] = state["context_usage"].breakdown["tools"]
        if how == "raw":
            assert state["structured_response"] == Answer(city="Oslo", summary="sunny")
    assert sent["raw"] == (["Answer", "lookup"] if bound else ["lookup"])
    assert counted["raw"] == counted["tool"] > 0


def test_a_system_message_the_app_appends_last_keeps_the_pipelines_request(
    saver: JsonlSaver,
) -> None:
    """An app that appends a system reminder after the user's message: `ModelNode` still
    sends what the pipeline composed (it ends with the newest message that is not a
    system one; the reminder is left out, as docs/pipeline.md says), with no warning that
    the request is from an earlier step."""
    from langchain_core.messages import HumanMessage

    model = StreamingScript(script=["ok"])
    pipeline = context_pipeline("fast", mode="agent", system_prompt=FRENCH)
    app = build("state_graph", saver, model, pipeline)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the "earlier step" warning would fail the test
        app.invoke(
            {"messages": [HumanMessage("hi"), SystemMessage("Reminder: be concise.")]},
            config("reminder"),
        )
    sent = model.received[0]
    assert sent[0].type == "system" and sent[0].content.startswith(FRENCH)
    assert [m.type for m in sent[1:]] == ["human"]


def test_the_documented_state_graph_wiring_counts_every_tool_the_model_is_sent() -> None:
    """docs/pipeline.md "In your StateGraph": the app binds its tools and the pipeline's
    two (`read_tool_result`, `search_history`) and gives the pipeline the same list, so
    `context_usage` is the request the model gets, tool schemas included."""
    from langgraph_ctx import arecord_tool_errors, read_tool_result, record_tool_errors
    from langgraph_ctx import search_history as search_tool

    all_tools = [lookup, read_tool_result, search_tool]
    pipeline = context_pipeline("planning", model="gpt-4o", tools=all_tools)
    assert pipeline.tools == [read_tool_result, search_tool]
    model = StreamingScript(
        script=[
            AIMessage("", tool_calls=[{"name": "lookup", "args": {"city": "Lyon"}, "id": "c1"}]),
            "Lyon: 545,000.",
        ]
    )
    builder = StateGraph(ContextState)
    builder.add_node("model", ModelNode(model, tools=all_tools))
    builder.add_node("tools", ToolNode(all_tools, wrap_tool_call=record_tool_errors,
                                       awrap_tool_call=arecord_tool_errors))  # fmt: skip
    entry = pipeline.add_to(builder, before="model")
    builder.add_edge(START, entry)
    builder.add_conditional_edges("model", tools_condition)
    builder.add_edge("tools", entry)
    state = builder.compile().invoke({"messages": [("user", "How big is Lyon?")]})
    assert state["context_usage"].used == exact(model.received[-1], all_tools)


def test_an_apps_own_system_prompt_key_is_a_conflict_named_not_a_prompt_that_grows() -> None:
    """An app whose state has its own `system_prompt` and whose dynamic prompt reads it:
    the pipeline wrote its composed prompt there, the app sent it back the next turn, and
    the prompt grew by the mode's sections each turn. It is a `StateKeyConflictError`
    naming the key, and the rename it names keeps the app's key the app's."""
    from langchain.agents import create_agent
    from langchain.agents.middleware import AgentState, dynamic_prompt
    from langgraph.checkpoint.memory import InMemorySaver

    class HostState(AgentState):  # type: ignore[type-arg]
        system_prompt: NotRequired[str]  # the app's own per-thread prompt

    @dynamic_prompt  # type: ignore[arg-type]
    def from_state(request: Any) -> str:
        return str(request.state.get("system_prompt", "DEFAULT"))

    def agent(model: StreamingScript, **keys: str) -> Any:
        pipeline = context_pipeline("fast", mode="agent", keys=keys or None)
        return create_agent(model, [], state_schema=HostState, checkpointer=InMemorySaver(),
                            middleware=[from_state, pipeline.middleware()])  # fmt: skip

    first = {"messages": [("user", "hi")], "system_prompt": "BE TERSE."}
    with pytest.raises(StateKeyConflictError, match="ctx_system_prompt"):
        agent(StreamingScript(script=["never"])).invoke(first, config("own-key"))

    @dynamic_prompt  # type: ignore[arg-type]
    def dated(request: Any) -> str:  # reads the key and adds to it
        return f"{request.state.get('system_prompt', 'DEFAULT')}\nToday is Monday."

    pipeline = context_pipeline("fast", mode="agent")
    adding = create_agent(
        StreamingScript(script=["ok", "never"]),
        [],
        state_schema=HostState,
        checkpointer=InMemorySaver(),
        middleware=[dated, pipeline.middleware()],
    )
    with pytest.raises(StateKeyConflictError, match="system_prompt"):
        adding.invoke(first, config("own-key-dated"))

    model = StreamingScript(script=["ok", "ok", "ok"])
    app = agent(model, system_prompt="ctx_system_prompt")
    state = app.invoke(first, config("renamed"))
    for _ in range(2):
        state = app.invoke({"messages": [("user", "again")]}, config("renamed"))
    assert state["system_prompt"] == "BE TERSE."  # the app's, untouched
    sizes = {len(sent[0].content) for sent in model.received}
    assert len(sizes) == 1 and model.received[0][0].content.startswith("BE TERSE.")


@pytest.mark.parametrize("saver_kind", ["InMemorySaver", "SqliteSaver"])
def test_langgraphs_strict_mode_keeps_the_pipelines_state_types(saver_kind: str) -> None:
    """With LangGraph's own savers the pipeline's models in the state (`ContextUsage`, ...)
    draw LangGraph's notice that unregistered types will be blocked; pipeline.md says
    that under ``LANGGRAPH_STRICT_MSGPACK=true`` the graph's state schema allows them, in
    every host. Checked: three turns each, the types come back, nothing is blocked."""
    script = textwrap.dedent(
        f"""
        import json, sqlite3
        from langgraph.checkpoint.memory import InMemorySaver
        from langgraph.checkpoint.sqlite import SqliteSaver
        from langgraph_ctx.nodes.pipeline import context_pipeline
        from langgraph_ctx.testing import StreamingScript
        from tests.test_guest import HOSTS, build, config

        out = {{}}
        for host in HOSTS:
            if "{saver_kind}" == "InMemorySaver":
                saver = InMemorySaver()
            else:
                saver = SqliteSaver(sqlite3.connect(":memory:", check_same_thread=False))
            model = StreamingScript(script=["one", "two", "three"])
            app = build(host, saver, model, context_pipeline("fast"))
            for text in ("a", "b", "c"):
                app.invoke({{"messages": [("user", text)]}}, config(host))
            values = app.get_state(config(host)).values
            out[host] = [type(values["context_usage"]).__name__, values["messages"][-1].content]
        print(json.dumps(out))
        """
    )
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": str(root), "LANGGRAPH_STRICT_MSGPACK": "true"}
    proc = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", script],
        capture_output=True, text=True, env=env, cwd=root, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {host: ["ContextUsage", "three"] for host in HOSTS}
    assert "Blocked" not in proc.stderr
