"""A scripted, streaming chat model for the pipeline and error tests (offline, deterministic).

`StreamingScript` answers each call with the next item of its script and streams text
word by word, as a provider does. An item may be:

- a string: the reply, streamed;
- an `AIMessage`: sent as one chunk (tool calls included);
- a `Cut`: the reply is cut off after some words: the stream stalls (for a timeout to
  catch) and/or raises;
- an exception: raised before any output;
- a function of the received messages returning one of the above.

It records what it was sent (`received`), accepts `bind_tools` (recording the tools), and
reports `usage_metadata` with the input counted exactly for gpt-4o.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.chat_models import generate_from_stream
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGenerationChunk, ChatResult
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field

from langgraph_ctx.context.tokens import count_tokens


@dataclass
class Cut:
    """A reply cut off after `after` words: stall `stall` seconds, then raise `error`."""

    text: str
    after: int
    error: BaseException | None = None
    stall: float = 0.0
    tool_call: dict[str, Any] | None = None
    """A tool call whose arguments are cut off halfway (streamed after the words)."""


class StreamingScript(BaseChatModel):
    script: list[Any]
    received: list[list[BaseMessage]] = Field(default_factory=list)
    tools: list[dict[str, Any]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "streaming-script"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> StreamingScript:  # type: ignore[override]
        self.tools = [t if isinstance(t, dict) else convert_to_openai_tool(t) for t in tools]
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return generate_from_stream(self._stream(messages, stop, run_manager, **kwargs))

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        item = self.script[min(len(self.received), len(self.script) - 1)]
        self.received.append(list(messages))
        if callable(item) and not isinstance(item, type):
            item = item(messages)
        if isinstance(item, BaseException):
            raise item
        sent = count_tokens(messages, model="gpt-4o", tools=self.tools or None)
        usage = {"input_tokens": sent, "output_tokens": 5, "total_tokens": sent + 5}
        if isinstance(item, AIMessage):
            chunks = [
                {"name": c["name"], "args": json.dumps(c["args"]), "id": c["id"], "index": i}
                for i, c in enumerate(item.tool_calls)
            ]
            yield ChatGenerationChunk(
                message=AIMessageChunk(
                    content=item.content,
                    tool_call_chunks=chunks,
                    usage_metadata=usage,  # type: ignore[arg-type]
                    chunk_position="last",
                )
            )
            return
        cut = item if isinstance(item, Cut) else None
        words = (cut.text if cut else str(item)).split(" ")
        for i, word in enumerate(words):
            if cut is not None and i == cut.after:
                if cut.tool_call is not None:
                    args = json.dumps(cut.tool_call["args"])
                    yield ChatGenerationChunk(
                        message=AIMessageChunk(
                            content="",
                            tool_call_chunks=[
                                {
                                    "name": cut.tool_call["name"],
                                    "args": args[: len(args) // 2],
                                    "id": cut.tool_call["id"],
                                    "index": 0,
                                }
                            ],
                        )
                    )
                if cut.stall:
                    time.sleep(cut.stall)
                if cut.error is not None:
                    raise cut.error
            last = i == len(words) - 1
            yield ChatGenerationChunk(
                message=AIMessageChunk(
                    content=word if last else word + " ",
                    usage_metadata=usage if last else None,  # type: ignore[arg-type]
                    chunk_position="last" if last else None,
                )
            )
