"""`JsonlSaver`: LangGraph checkpoints as one readable JSONL file per thread.

Storage layout::

    root_dir/
      <thread>.jsonl      header, then messages, checkpoints and writes, one per line
      <thread>.jsonl.1    the log as it was before the last `revert` (then .2, ...)
      .locks/             advisory lock files

``jq`` on a thread file shows the conversation::

    jq -c 'select(.t == "msg") | .msg | {type, content}' chats/task-001.jsonl

See the README ("File format") for every line kind.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from types import TracebackType

from langgraph.checkpoint.serde.base import SerializerProtocol

from langgraph_ctx.saver.log import (
    DEFAULT_CACHED_LINES,
    DEFAULT_CACHED_THREADS,
    LogSaver,
    OnCorrupt,
)
from langgraph_ctx.storage.jsonl import JsonlStorage


class JsonlSaver(LogSaver):
    """A LangGraph checkpointer that keeps each thread as an append-only JSONL file.

    Drop-in for `InMemorySaver` / `SqliteSaver`, from `invoke` and `ainvoke`
    alike, plus `fork` and `revert`.

    Args:
        root_dir: Directory for the thread files (created by the first write;
            making the saver does no I/O, so it is safe inside an event loop). A
            relative directory is taken from the current directory when the saver is
            made, and stays that one after an ``os.chdir``.
            A read-only directory can be read; writes raise `ReadOnlyLogError`.
        fsync: Flush each checkpoint to disk before `put` returns (one
            ``fdatasync`` per checkpoint), so a saved checkpoint survives a power
            loss, not only a crash. Without it an acknowledged write survives a
            process crash, not necessarily an OS crash. A step's pending writes
            (`put_writes`) are written at once and flushed with the step's
            checkpoint: what a power loss can lose is the pending writes of a step
            whose checkpoint was not saved yet, and LangGraph runs such a step
            again, as if it had never run. Closing the saver flushes them too.
        serde: Serializer for values that are neither plain JSON nor messages.
            Default: LangGraph's `JsonPlusSerializer` restricted to its safe
            types plus ``allowed_types``.
        allowed_types: Classes your state holds that may be rebuilt from a file.
        on_corrupt: ``"raise"`` (default) or ``"skip"`` corrupt lines with a warning.
        max_cached_threads: Threads whose index stays in memory between calls
            (least recently used go first; an evicted thread reopens from its log).
        max_cached_lines: Bound on the log lines those indexes cover together.
        inline_async: Serve ``ainvoke`` on the event loop itself (default): file
            calls of microseconds inline, ``fdatasync`` and lock waits off the
            loop. ``False`` runs every async call in a worker thread, for
            blocking-call detectors (the LangGraph server uses it).

    Example:
        ```python
        from langgraph.graph import START, MessagesState, StateGraph
        from langgraph_ctx import JsonlSaver

        def chatbot(state: MessagesState):
            return {"messages": [("ai", f"you said: {state['messages'][-1].content}")]}

        builder = StateGraph(MessagesState)
        builder.add_node(chatbot)
        builder.add_edge(START, "chatbot")
        saver = JsonlSaver("./chats")
        graph = builder.compile(checkpointer=saver)
        config = {"configurable": {"thread_id": "task-001"}}
        graph.invoke({"messages": [("user", "hi")]}, config)

        saver.fork("task-001", "task-001-retry")
        ```
    """

    _release_lines = True  # a line read again is a pread from the page cache

    def __init__(
        self,
        root_dir: str | os.PathLike[str],
        *,
        fsync: bool = False,
        serde: SerializerProtocol | None = None,
        allowed_types: Iterable[type | tuple[str, ...]] = (),
        on_corrupt: OnCorrupt = "raise",
        max_cached_threads: int | None = DEFAULT_CACHED_THREADS,
        max_cached_lines: int | None = DEFAULT_CACHED_LINES,
        inline_async: bool = True,
    ) -> None:
        self.storage: JsonlStorage
        super().__init__(
            JsonlStorage(root_dir, fsync=fsync, inline_async=inline_async),
            serde=serde,
            allowed_types=allowed_types,
            on_corrupt=on_corrupt,
            max_cached_threads=max_cached_threads,
            max_cached_lines=max_cached_lines,
        )

    @property
    def root_dir(self) -> str:
        """The directory holding the thread files, as an absolute path."""
        return str(self.storage.root)

    def path(self, thread_id: str) -> str:
        """The file that holds ``thread_id`` (it may not exist yet).

        Example:
            ```python
            print(open(saver.path("task-001")).readline())
            ```
        """
        return str(self.storage.path(thread_id))

    def close(self) -> None:
        """Close the files kept open for threads in use (flushing pending writes).

        The saver stays usable: the next call opens what it needs. Leaving the
        ``with`` block calls it, and so does dropping the saver.
        """
        self.storage.close()

    # Like InMemorySaver: usable as ``with JsonlSaver(...) as saver`` and ``async with``.
    def __enter__(self) -> JsonlSaver:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> JsonlSaver:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
