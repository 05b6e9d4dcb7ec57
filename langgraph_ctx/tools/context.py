"""`context_tools`: explicit, model-driven context switching for a graph's `ToolNode`.

```python
from langgraph.graph import START, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph_ctx import ContextState, JsonlSaver, ModelNode, context_pipeline
from langgraph_ctx.tools import context_tools

saver = JsonlSaver("./chats")
tools = context_tools(saver)            # chat_context_new / _load / _list / _clear_active
pipeline = context_pipeline("personalized", tools=tools)

builder = StateGraph(ContextState)      # declares `active_context`
builder.add_node("model", ModelNode(llm, tools=tools))
builder.add_node("tools", ToolNode(tools))
entry = pipeline.add_to(builder, before="model")
builder.add_edge(START, entry)
builder.add_conditional_edges("model", tools_condition)
builder.add_edge("tools", entry)        # the switch shows in the very next model call
graph = builder.compile(checkpointer=saver)
```

The model decides when to switch; the tools update the state's `active_context` through
`Command` (`langgraph_ctx.context.active_context`), and the context pipeline shows the
model only the active context. `messages`, the user's transcript, is never changed: the
tools only append their own results, as every tool does.

- `chat_context_new(title?, reason?)`: archives the active context (a fork of the thread at
  its last assistant message), then starts a fresh one at the user's latest message;
- `chat_context_load(query?, context_id?, mode?)`: makes an archived context (by id, or the
  best BM25 match) the active one, shown with the "for reference only" banner;
- `chat_context_list(limit?)`: the archives, newest first: id, title, created / archived,
  message count, summary preview;
- `chat_context_clear_active()`: starts a fresh context at the user's latest message,
  without archiving.

Bad input (unknown ids, empty queries, no match, nothing archived, several archives with
one title) and storage failures give a tool result with `status="error"` saying what to
do, never an exception: the run goes on and the model can act on it.

One module (a little over 600 lines, a third of them the tools' descriptions and
docstrings) because the four tools share one state contract and one error path
(`ContextTools`): splitting them would spread one conversation with the model over files.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any

from langchain_core.messages import BaseMessage, SystemMessage, ToolMessage, convert_to_messages
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, InjectedToolCallId, StructuredTool
from langgraph.errors import GraphBubbleUp
from langgraph.prebuilt import InjectedState
from langgraph.types import Command
from pydantic import Field

from langgraph_ctx.context.active_context import (
    LoadedContext,
    current_user_index,
    new_active_context,
    read_active_context,
)
from langgraph_ctx.context.archive import (
    ArchivedContext,
    ArchiveSelection,
    ArchiveSummarizer,
    ContextArchive,
    ContextIndex,
    LoadMode,
    normalize_title,
    render_loaded_context,
    select_archive,
)
from langgraph_ctx.context.tokens import TokenCounter, count_tokens

__all__ = ["ContextTools", "ToolResult", "context_tools"]

NEW_DESCRIPTION = """\
Archive the current working context and start a fresh one. Call it when the earlier \
conversation is unrelated to the user's latest message, or so long or mixed that it could \
mislead your answer (for example, the user moves to a new topic). The current context is \
saved under `title` and can be brought back with chat_context_load. Afterwards you see only \
the system prompt and the user's latest message; the conversation history itself is kept."""

LOAD_DESCRIPTION = """\
Switch to an archived context. Call it when the user refers back to an earlier topic \
("back to the Paris plan"). Give `context_id` (from chat_context_list) or `query` (words \
from its title or content). The chosen archive becomes the active context and is shown to \
you as an ARCHIVED CONTEXT block, for reference only: it may not match the current \
question. It replaces the current context (call chat_context_new first to keep that one)."""

LIST_DESCRIPTION = """\
List this conversation's archived contexts, newest first: id, title, when created and \
archived, number of messages and a summary preview."""

CLEAR_DESCRIPTION = """\
Clear the active context without archiving it: the earlier conversation and any loaded \
archive are no longer shown to you. Use it when the context is wrong or polluted; \
afterwards you see only the system prompt and the user's latest message."""


@dataclass
class ToolResult:
    """What a context tool tells the model, and what it changes in the state."""

    content: str
    ok: bool = True
    update: dict[str, Any] = field(default_factory=dict)
    artifact: dict[str, Any] = field(default_factory=dict)


class _BadInput(Exception):
    """Input the model can fix; the message is the tool result."""


def _get(state: Any, key: str) -> Any:
    if isinstance(state, Mapping):
        return state.get(key)
    return getattr(state, key, None)


def _when(iso: str | None) -> str:
    """`2026-11-22T05:18:12.745+00:00` -> `2026-11-22 05:18:12 UTC`."""
    if not iso:
        return "unknown"
    return iso[:19].replace("T", " ") + (" UTC" if iso.endswith(("+00:00", "Z")) else "")


def _line(entry: ArchivedContext) -> str:
    return (
        f'{entry.context_id} "{entry.title}": {entry.message_count} messages, created '
        f"{_when(entry.created_at)}, archived {_when(entry.archived_at)}"
        + (f". {entry.summary_preview}" if entry.summary_preview else "")
    )


def _listing(entries: Sequence[ArchivedContext]) -> str:
    return "\n".join(f"- {_line(e)}" for e in entries)


class ContextTools:
    """The four context tools' logic, bound to one archive. `context_tools` builds them.

    Each method takes the graph state and config and returns a `ToolResult`; the
    LangChain tools wrap them (`as_tools`). Use it directly to drive the same logic from
    your own code, e.g. a UI button that starts a new context.

    Example:
        ```python
        tools = ContextTools(ContextArchive(saver))
        state = graph.get_state(config).values
        result = tools.new(state, config, title="Paris trip")
        result.content                      # 'Archived the previous context as c_... '
        graph.update_state(config, {"active_context": result.update["active_context"]})
        ```
    """

    def __init__(
        self,
        archive: ContextArchive,
        *,
        summarizer: ArchiveSummarizer | None = None,
        token_counter: TokenCounter | None = None,
        model: str = "gpt-4o",
        max_loaded_tokens: int = 1_500,
        recent_rounds: int = 3,
        list_limit: int = 20,
    ) -> None:
        if max_loaded_tokens < 200:
            raise ValueError("max_loaded_tokens must be at least 200 (the block's header)")
        if recent_rounds < 1 or list_limit < 1:
            raise ValueError("recent_rounds and list_limit must be at least 1")
        self.archive = archive
        self.summarizer = summarizer
        self.counter: TokenCounter = token_counter or functools.partial(count_tokens, model=model)
        self.max_loaded_tokens = max_loaded_tokens
        self.recent_rounds = recent_rounds
        self.list_limit = list_limit

    # -- shared pieces -------------------------------------------------------------
    @staticmethod
    def _thread(config: RunnableConfig | None) -> str:
        thread_id = ((config or {}).get("configurable") or {}).get("thread_id")
        if isinstance(thread_id, bool) or not isinstance(thread_id, (str, int)):  # "": a thread
            raise _BadInput(
                "the context tools need a thread: run the graph with a checkpointer and "
                "config={'configurable': {'thread_id': ...}}. Nothing was changed."
            )
        return str(thread_id)  # LangGraph saves checkpoints under str(thread_id)

    @staticmethod
    def _messages(state: Any) -> list[BaseMessage]:
        return convert_to_messages(_get(state, "messages") or [])

    @staticmethod
    def _fresh_start(messages: Sequence[BaseMessage]) -> str | None:
        """Where a new context starts: the user's latest message (else the newest message)."""
        at = current_user_index(messages)
        if at is None:
            at = len(messages) - 1
        return messages[at].id if at >= 0 else None

    @staticmethod
    def _reset(state: Any, active: Mapping[str, Any]) -> dict[str, Any]:
        update: dict[str, Any] = {"active_context": active}
        if _get(state, "running_summary"):
            update["running_summary"] = None  # it summarised the old context
        return update

    # -- the tools -------------------------------------------------------------------
    def new(
        self,
        state: Any,
        config: RunnableConfig | None,
        title: str | None = None,
        reason: str | None = None,
    ) -> ToolResult:
        """`chat_context_new`: archive the active context, start a fresh one."""
        thread_id = self._thread(config)
        messages = self._messages(state)
        outcome = self.archive.archive(
            thread_id,
            messages,
            _get(state, "active_context"),
            title=title,
            reason=reason,
            summarizer=self.summarizer,
        )
        entry = outcome.entry
        active = new_active_context(
            self._fresh_start(messages), "new", archived_as=entry.context_id if entry else None
        )
        fresh = (
            "A fresh context starts with the user's latest message: the earlier messages are "
            "no longer shown to you (they stay in the conversation history)."
        )
        if outcome.status == "archived" and entry is not None:
            text = (
                f'Archived the previous context as {entry.context_id} "{entry.title}" '
                f"({entry.message_count} messages). {fresh} Bring it back with "
                f'chat_context_load(context_id="{entry.context_id}").'
            )
            if outcome.same_title:
                ids = ", ".join(e.context_id for e in outcome.same_title)
                text += (
                    f" Note: {len(outcome.same_title)} other archived context(s) have the same "
                    f"title ({ids}); use the context_id to tell them apart."
                )
            if outcome.summary_error:
                text += f" (The summarizer failed, {outcome.summary_error}; kept a short extract.)"
        elif outcome.status == "already_archived" and entry is not None:
            text = (
                f'This context is already archived as {entry.context_id} "{entry.title}"; '
                f"nothing new to archive. {fresh}"
            )
        else:
            text = f"Nothing to archive: the active context has no earlier exchange. {fresh}"
        return ToolResult(
            text,
            update=self._reset(state, active),
            artifact={
                "status": outcome.status,
                "context": entry.to_json() if entry else None,
                "same_title": [e.context_id for e in outcome.same_title],
                "active_context": active,
            },
        )

    def load(
        self,
        state: Any,
        config: RunnableConfig | None,
        query: str | None = None,
        context_id: str | None = None,
        mode: LoadMode = "full",
    ) -> ToolResult:
        """`chat_context_load`: make an archived context the active one."""
        thread_id = self._thread(config)
        entries = self.archive.entries(thread_id)
        selection = select_archive(
            entries, context_id=context_id, query=query, documents=self.archive.search_text
        )
        if selection.chosen is None:
            return self._not_loaded(selection, context_id=context_id, query=query)
        entry = selection.chosen
        archived = self.archive.messages(entry)
        text, shown = render_loaded_context(
            entry,
            archived,
            mode=mode,
            max_tokens=self.max_loaded_tokens,
            count_tokens=lambda block: self.counter([SystemMessage(block)]),
            recent_rounds=self.recent_rounds,
        )
        loaded: LoadedContext = {
            "context_id": entry.context_id,
            "title": entry.title,
            "archive_thread_id": entry.archive_thread_id,
            "mode": mode,
            "messages": shown,
            "text": text,
        }
        active = new_active_context(self._fresh_start(self._messages(state)), "load", loaded=loaded)
        how = {
            "id": "by its id",
            "title": "by its title",
            "search": "by search (matched: " + ", ".join(selection.terms) + ")",
        }[selection.how or "id"]
        content = (
            f'Loaded {entry.context_id} "{entry.title}" {how} as the active context: '
            f"{shown} of {entry.message_count} messages, mode {mode}. It is shown to you before "
            "the user's latest message as an ARCHIVED CONTEXT block, for reference only: it "
            "may not match the current question. Answer the user's latest message."
        )
        if selection.candidates:
            content += (
                " Other close matches (load one by context_id if it fits better):\n"
                + _listing(selection.candidates)
            )
        return ToolResult(
            content,
            update=self._reset(state, active),
            artifact={
                "status": "loaded",
                "how": selection.how,
                "score": selection.score,
                "context": entry.to_json(),
                "candidates": [e.context_id for e in selection.candidates],
                "active_context": active,
            },
        )

    def _not_loaded(
        self, selection: ArchiveSelection, *, context_id: str | None, query: str | None
    ) -> ToolResult:
        problem = selection.problem
        listing = _listing(selection.candidates)
        unchanged = "Nothing was loaded; the active context is unchanged."
        if problem == "nothing_archived":
            text = (
                f"{unchanged} This conversation has no archived contexts yet "
                "(chat_context_new archives the current one)."
            )
        elif problem == "unknown_id":
            text = f"{unchanged} No archived context has the id {context_id!r}."
            wanted = normalize_title(context_id or "")
            titled = [e for e in selection.candidates if normalize_title(e.title) == wanted]
            if titled:
                text += " It is the title of:\n" + _listing(titled)
                text += "\nCall chat_context_load(context_id=...) with one of these ids."
            else:
                text += f" Archived contexts (newest first):\n{listing}\nUse one of these ids."
        elif problem == "no_input":
            text = (
                f"{unchanged} Give context_id (see chat_context_list) or query (words from "
                f"the context's title or content). Archived contexts (newest first):\n{listing}"
            )
        elif problem == "empty_query":
            text = (
                f"{unchanged} The query is empty: give words from the context's title or "
                f"content, or a context_id. Archived contexts (newest first):\n{listing}"
            )
        elif problem == "ambiguous":
            what = f"have the title {query!r}"
            if selection.how != "title":
                what = f"match {query!r} equally well"
            text = (
                f"{unchanged} {len(selection.candidates)} archived contexts {what}:\n{listing}\n"
                "Call chat_context_load(context_id=...) with the one you mean (or ask the "
                "user which one)."
            )
        else:  # no_match
            text = (
                f"{unchanged} No archived context matches {query!r}. Archived contexts "
                f"(newest first):\n{listing}\nTry other words, or a context_id."
            )
        return ToolResult(
            text,
            ok=False,
            artifact={
                "status": problem,
                "candidates": [e.context_id for e in selection.candidates],
            },
        )

    def list_contexts(
        self, state: Any, config: RunnableConfig | None, limit: int | None = None
    ) -> ToolResult:
        """`chat_context_list`: the archived contexts, newest first."""
        thread_id = self._thread(config)
        if limit is not None and limit < 1:
            raise _BadInput(
                f"limit must be at least 1 (got {limit}); omit it for the newest {self.list_limit}."
            )
        entries = self.archive.entries(thread_id)
        shown = entries[: limit or self.list_limit]
        active = read_active_context(_get(state, "active_context"))
        loaded = active.get("loaded") if active else None
        if active is None:
            now = "Active context: the whole conversation (no switch yet)."
        elif isinstance(loaded, Mapping):
            now = (
                f'Active context: loaded {loaded.get("context_id")} "{loaded.get("title")}" '
                f"(since {_when(active.get('started_at'))})."
            )
        else:
            now = f"Active context: fresh since {_when(active.get('started_at'))}."
        if not entries:
            text = f"No archived contexts yet (chat_context_new archives the current one). {now}"
        else:
            more = f", showing the newest {len(shown)}" if len(shown) < len(entries) else ""
            text = (
                f"{len(entries)} archived context(s), newest first{more} (load one with "
                f"chat_context_load(context_id=...)):\n{_listing(shown)}\n{now}"
            )
        return ToolResult(
            text,
            artifact={
                "status": "listed",
                "contexts": [e.to_json() for e in shown],
                "total": len(entries),
            },
        )

    def clear(self, state: Any, config: RunnableConfig | None) -> ToolResult:
        """`chat_context_clear_active`: start a fresh context without archiving."""
        messages = self._messages(state)
        before = read_active_context(_get(state, "active_context"))
        loaded = before.get("loaded") if before else None
        active = new_active_context(self._fresh_start(messages), "clear")
        dropped = (
            f' (including the loaded archive {loaded.get("context_id")} "{loaded.get("title")}",'
            " which stays archived)"
            if isinstance(loaded, Mapping)
            else ""
        )
        text = (
            f"Cleared the active context{dropped}: you now see only the system prompt and the "
            "user's latest message. Nothing was archived (chat_context_new archives before "
            "starting fresh); the conversation history is unchanged."
        )
        return ToolResult(
            text,
            update=self._reset(state, active),
            artifact={"status": "cleared", "active_context": active},
        )

    # -- as LangChain tools ---------------------------------------------------------------
    def run(self, name: str, tool_call_id: str, work: Callable[[], ToolResult]) -> Command[Any]:
        """Run one tool's logic; any failure becomes an error result, never an exception."""
        try:
            result = work()
        except GraphBubbleUp:  # interrupts and the like belong to LangGraph
            raise
        except _BadInput as err:
            result = ToolResult(str(err), ok=False, artifact={"status": "bad_input"})
        except Exception as err:
            result = ToolResult(
                f"{name} failed: {type(err).__name__}: {err}. Nothing was changed; the active "
                "context is as it was.",
                ok=False,
                artifact={"status": "failed", "error_type": type(err).__name__},
            )
        message = ToolMessage(
            content=result.content,
            tool_call_id=tool_call_id,
            name=name,
            status="success" if result.ok else "error",
            artifact={"tool": name, **result.artifact, "ok": result.ok},
        )
        return Command(update={**result.update, "messages": [message]})

    def as_tools(self) -> list[BaseTool]:
        """The four tools, for `ToolNode` and `bind_tools` (sync and async)."""

        def chat_context_new(
            title: Annotated[
                str | None,
                Field(description="Short title of the context being archived, e.g. 'Paris trip'."),
            ] = None,
            reason: Annotated[
                str | None, Field(description="Why you switch, in a few words (kept with it).")
            ] = None,
            *,
            state: Annotated[Any, InjectedState],
            tool_call_id: Annotated[str, InjectedToolCallId],
            config: RunnableConfig,
        ) -> Command[Any]:
            return self.run(
                "chat_context_new", tool_call_id, lambda: self.new(state, config, title, reason)
            )

        def chat_context_load(
            query: Annotated[
                str | None, Field(description="Words from the archived context's title or content.")
            ] = None,
            context_id: Annotated[
                str | None, Field(description="An id from chat_context_list (c_<date>_<hex>).")
            ] = None,
            mode: Annotated[
                LoadMode,
                Field(description="full: messages; recent: the last rounds; summary: summary only"),
            ] = "full",
            *,
            state: Annotated[Any, InjectedState],
            tool_call_id: Annotated[str, InjectedToolCallId],
            config: RunnableConfig,
        ) -> Command[Any]:
            return self.run(
                "chat_context_load",
                tool_call_id,
                lambda: self.load(state, config, query=query, context_id=context_id, mode=mode),
            )

        def chat_context_list(
            limit: Annotated[
                int | None, Field(description="At most this many, newest first (default 20).")
            ] = None,
            *,
            state: Annotated[Any, InjectedState],
            tool_call_id: Annotated[str, InjectedToolCallId],
            config: RunnableConfig,
        ) -> Command[Any]:
            return self.run(
                "chat_context_list", tool_call_id, lambda: self.list_contexts(state, config, limit)
            )

        def chat_context_clear_active(
            *,
            state: Annotated[Any, InjectedState],
            tool_call_id: Annotated[str, InjectedToolCallId],
            config: RunnableConfig,
        ) -> Command[Any]:
            return self.run(
                "chat_context_clear_active", tool_call_id, lambda: self.clear(state, config)
            )

        return [
            _tool(chat_context_new, NEW_DESCRIPTION),
            _tool(chat_context_load, LOAD_DESCRIPTION),
            _tool(chat_context_list, LIST_DESCRIPTION),
            _tool(chat_context_clear_active, CLEAR_DESCRIPTION),
        ]


def _tool(func: Callable[..., Command[Any]], description: str) -> BaseTool:
    """A tool whose async door runs the sync one in a worker thread (savers do blocking I/O)."""

    async def coroutine(*args: Any, config: RunnableConfig, **kwargs: Any) -> Command[Any]:
        return await asyncio.to_thread(func, *args, config=config, **kwargs)

    return StructuredTool.from_function(
        func=func, coroutine=coroutine, name=func.__name__, description=description
    )


def context_tools(
    saver: Any,
    *,
    index: ContextIndex | None = None,
    summarizer: ArchiveSummarizer | None = None,
    model: str = "gpt-4o",
    token_counter: TokenCounter | None = None,
    max_loaded_tokens: int = 1_500,
    recent_rounds: int = 3,
    list_limit: int = 20,
) -> list[BaseTool]:
    """The context-switching tools, bound to the graph's checkpointer.

    Args:
        saver: the checkpointer the graph is compiled with (`JsonlSaver`, `RedisLogSaver`,
            `InMemorySaver`, or any `BaseCheckpointSaver`), or a `ContextArchive`.
        index: where the archive index lives; default beside the threads (a JSON file for
            `JsonlSaver`, a key for `RedisLogSaver`, memory otherwise).
        summarizer: makes an archive's short summary from its messages (may call a
            model); default: an extract (first and last request, last answer). If it
            raises, the extract is kept.
        model: tokenizer for the size limit of a loaded archive.
        token_counter: count with this instead (`Callable[[Sequence[BaseMessage]], int]`).
        max_loaded_tokens: the most a loaded archive may take of the model's context;
            its oldest messages are left out first.
        recent_rounds: rounds shown by `chat_context_load(mode="recent")`.
        list_limit: archives `chat_context_list` shows by default.

    Returns:
        `[chat_context_new, chat_context_load, chat_context_list, chat_context_clear_active]`.

    Example:
        ```python
        saver = JsonlSaver("./chats")
        tools = context_tools(saver, max_loaded_tokens=1_000)
        [t.name for t in tools]
        # ['chat_context_new', 'chat_context_load', 'chat_context_list',
        #  'chat_context_clear_active']
        builder.add_node("tools", ToolNode([*tools, *my_tools]))   # the graph: see above
        ```
    """
    archive = saver if isinstance(saver, ContextArchive) else ContextArchive(saver, index=index)
    return ContextTools(
        archive,
        summarizer=summarizer,
        token_counter=token_counter,
        model=model,
        max_loaded_tokens=max_loaded_tokens,
        recent_rounds=recent_rounds,
        list_limit=list_limit,
    ).as_tools()
