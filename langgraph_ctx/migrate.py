"""Move the threads of a `SqliteSaver` database into a `JsonlSaver` directory.

```python
from langgraph_ctx.migrate import import_sqlite

report = import_sqlite("sqlite:///checkpoints.db", "./chats")
for thread in report.threads:
    print(thread.thread_id, thread.checkpoints, thread.path)
```

Each thread is replayed through `JsonlSaver.put` and `put_writes`, as LangGraph itself
would have saved it: checkpoints parents first (oldest first within each namespace),
each with its parent's config and the channel versions that changed since the parent
(``new_versions``), then every pending write of that checkpoint with its task id and
task path. The JSONL thread therefore answers ``get_state``, ``get_state_history``,
pending writes and `DeltaChannel` histories exactly as the database did
(`compare_with_sqlite` checks it, checkpoint by checkpoint), and graphs carry on from it.

Channel versions are kept as `SqliteSaver` wrote them (``"<zero-padded counter>.<random>"``
strings): `JsonlSaver` numbers versions the same way, so graphs, and the LangGraph server,
carry on from them.

The database is opened read-only and read in one transaction (a consistent snapshot,
even while an application writes to it). No ``langgraph-checkpoint-sqlite`` is needed:
rows are read with SQL and deserialized with LangGraph's `JsonPlusSerializer`, exactly
as `SqliteSaver` reads them. A thread is written to a private directory first and moved
into place in one atomic replace, so an interrupted import never leaves half a thread.
"""

from __future__ import annotations

import importlib
import json
import shutil
import sqlite3
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing, contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import CheckpointTuple, writes_sort_key
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.serde.types import _DeltaSnapshot

from langgraph_ctx.codec.database_values import loads_database_value as _loads
from langgraph_ctx.errors import (
    ClassUnavailableError,
    SqliteSourceError,
    ThreadExistsError,
    ThreadNotFoundError,
)
from langgraph_ctx.saver.jsonl import JsonlSaver
from langgraph_ctx.storage.jsonl import JsonlStorage

__all__ = [
    "ClassUnavailableError",
    "ImportReport",
    "ImportedThread",
    "SqliteSourceError",
    "compare_with_sqlite",
    "count_checkpoints",
    "import_sqlite",
    "sqlite_path",
    "sqlite_thread_ids",
]

Progress = Callable[[int], None]
"""Called with the number of checkpoints just imported (for a progress bar)."""


@dataclass
class ImportedThread:
    """One thread `import_sqlite` wrote."""

    thread_id: str
    path: str
    checkpoints: int
    writes: int
    namespaces: list[str]
    replaced: bool = False
    """The thread existed and was replaced (``force=True``); the old log is its
    newest backup (``<thread>.jsonl.1``)."""


@dataclass
class ImportReport:
    """What `import_sqlite` did."""

    source: str
    target: str
    threads: list[ImportedThread] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    """Threads left as they were because they already existed (``skip_existing=True``)."""
    problems: list[str] = field(default_factory=list)
    """With ``check=True``: where an imported thread differs from the database as the
    import read it (`compare_with_sqlite`'s findings; ``[]``: identical)."""

    @property
    def checkpoints(self) -> int:
        return sum(t.checkpoints for t in self.threads)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "checkpoints": self.checkpoints}


def sqlite_path(source: str | Path) -> Path:
    """The database file of ``sqlite:///relative.db``, ``sqlite:////abs.db`` or a plain path.

    Raises:
        SqliteSourceError: an in-memory URL, or another scheme.
    """
    text = str(source)
    if "://" in text:
        scheme, _, rest = text.partition("://")
        if scheme != "sqlite":
            raise SqliteSourceError(
                f"{text!r} is not a SQLite URL; use sqlite:///path/to/checkpoints.db"
            )
        if not rest.startswith("/") or rest in ("/", "/:memory:"):
            raise SqliteSourceError(
                f"{text!r} names no database file; use sqlite:///path/to/checkpoints.db"
            )
        text = rest[1:].split("?", 1)[0]
    return Path(text)


@contextmanager
def _open(source: str | Path) -> Iterator[sqlite3.Connection]:
    path = sqlite_path(source)
    if path.is_dir():
        raise SqliteSourceError(f"{path} is a directory, not a SqliteSaver database file")
    if not path.is_file():
        raise FileNotFoundError(f"no such database file: {path}")
    uri = path.resolve().as_uri() + "?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True, check_same_thread=False)
    except sqlite3.Error as exc:
        raise SqliteSourceError(f"{path}: cannot open the database ({exc})") from None
    with closing(conn):
        try:
            tables = {
                name: {row[1] for row in conn.execute(f"PRAGMA table_info({name})")}
                for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
            }
        except sqlite3.DatabaseError as exc:
            raise SqliteSourceError(f"{path}: not a SQLite database ({exc})") from None
        needed = {
            "thread_id",
            "checkpoint_ns",
            "checkpoint_id",
            "parent_checkpoint_id",
            "type",
            "checkpoint",
            "metadata",
        }
        if not needed <= tables.get("checkpoints", set()):
            raise SqliteSourceError(
                f"{path}: not a SqliteSaver database (no 'checkpoints' table with its columns)"
            )
        conn.execute("BEGIN")  # one read transaction: a consistent snapshot
        try:
            yield conn
        finally:
            conn.rollback()


def _writes_columns(conn: sqlite3.Connection) -> str | None:
    columns = {row[1] for row in conn.execute("PRAGMA table_info(writes)")}
    if not columns:
        return None
    task_path = "task_path" if "task_path" in columns else "''"
    return f"task_id, {task_path}, idx, channel, type, value"


def sqlite_thread_ids(source: str | Path) -> list[str]:
    """Every thread id in a `SqliteSaver` database."""
    with _open(source) as conn:
        return [row[0] for row in conn.execute(_THREADS_SQL)]


_THREADS_SQL = "SELECT DISTINCT thread_id FROM checkpoints ORDER BY thread_id"


def count_checkpoints(source: str | Path, threads: Sequence[str] | None = None) -> int:
    """How many checkpoints (every namespace) the database holds for ``threads`` (or all)."""
    with _open(source) as conn:
        if threads is None:
            return int(conn.execute("SELECT COUNT(*) FROM checkpoints").fetchone()[0])
        total = 0
        for thread_id in dict.fromkeys(threads):
            row = conn.execute(
                "SELECT COUNT(*) FROM checkpoints WHERE thread_id = ?", (thread_id,)
            ).fetchone()
            total += int(row[0])
        return total


def _ordered(rows: Sequence[tuple[str, str, str | None]]) -> list[tuple[str, str, str | None]]:
    """Checkpoints with every parent before its children (ids are only time-ordered
    within one process), oldest id first otherwise."""
    by_key = {(ns, cid): (ns, cid, parent) for ns, cid, parent in rows}
    done: set[tuple[str, str]] = set()
    out: list[tuple[str, str, str | None]] = []
    for ns, cid, _ in sorted(rows, key=lambda r: (r[1], r[0])):
        stack = [(ns, cid)]
        pending: list[tuple[str, str]] = []
        while stack:  # walk up to the first ancestor already placed
            key = stack.pop()
            if key in done or key in pending:
                continue
            pending.append(key)
            parent = by_key[key][2]
            if parent and (key[0], parent) in by_key:
                stack.append((key[0], parent))
        for key in reversed(pending):
            done.add(key)
            out.append(by_key[key])
    return out


def _load_tuple(
    conn: sqlite3.Connection,
    serde: SerializerProtocol,
    writes_sql: str | None,
    thread_id: str,
    ns: str,
    checkpoint_id: str,
    plain_data: bool = False,
) -> tuple[dict[str, Any], dict[str, Any], str | None, list[tuple[str, str, int, str, Any]]]:
    row = conn.execute(
        "SELECT type, checkpoint, metadata, parent_checkpoint_id FROM checkpoints "
        "WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?",
        (thread_id, ns, checkpoint_id),
    ).fetchone()
    type_, blob, metadata, parent = row
    where = f"thread {thread_id!r}, namespace {ns!r}, checkpoint {checkpoint_id}"
    checkpoint = _loads(serde, (type_, blob), where, plain_data)
    meta = json.loads(metadata) if metadata is not None else {}
    writes: list[tuple[str, str, int, str, Any]] = []
    if writes_sql is not None:
        for task_id, task_path, idx, channel, wtype, value in conn.execute(
            f"SELECT {writes_sql} FROM writes "
            "WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?",
            (thread_id, ns, checkpoint_id),
        ):
            value = _loads(serde, (wtype, value), where, plain_data)
            writes.append((task_id, task_path, idx, channel, value))
    return checkpoint, meta, parent, writes


def _put_writes(
    saver: JsonlSaver,
    thread_id: str,
    ns: str,
    checkpoint_id: str,
    writes: Sequence[tuple[str, str, int, str, Any]],
) -> None:
    """Each task's writes, at their original indexes: regular writes in one call (their
    index is their position), special channels (negative indexes) in another."""
    config = {
        "configurable": {
            "thread_id": thread_id,
            "checkpoint_ns": ns,
            "checkpoint_id": checkpoint_id,
        }
    }
    tasks: dict[str, tuple[str, list[tuple[int, str, Any]]]] = {}
    for task_id, task_path, idx, channel, value in writes:
        tasks.setdefault(task_id, (task_path, []))[1].append((idx, channel, value))
    for task_id, (task_path, items) in tasks.items():
        items.sort(key=lambda item: item[0])
        regular = [(ch, v) for idx, ch, v in items if idx >= 0]
        special = [(ch, v) for idx, ch, v in items if idx < 0]
        for group in (regular, special):
            if group:
                saver.put_writes(config, group, task_id, task_path)  # type: ignore[arg-type]


def _import_thread(
    conn: sqlite3.Connection,
    serde: SerializerProtocol,
    writes_sql: str | None,
    saver: JsonlSaver,
    thread_id: str,
    progress: Progress | None,
    plain_data: bool = False,
) -> tuple[int, int, list[str]]:
    rows = conn.execute(
        "SELECT checkpoint_ns, checkpoint_id, parent_checkpoint_id FROM checkpoints "
        "WHERE thread_id = ?",
        (thread_id,),
    ).fetchall()
    versions: dict[tuple[str, str], dict[str, Any]] = {}
    n_writes = 0
    for ns, checkpoint_id, _ in _ordered(rows):
        checkpoint, metadata, parent, writes = _load_tuple(
            conn, serde, writes_sql, thread_id, ns, checkpoint_id, plain_data
        )
        current = dict(checkpoint.get("channel_versions") or {})
        before = versions.get((ns, parent), {}) if parent else {}
        new_versions = {ch: v for ch, v in current.items() if before.get(ch) != v}
        config = {
            "configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": parent}
        }
        saver.put(config, checkpoint, metadata, new_versions)  # type: ignore[arg-type]
        versions[(ns, checkpoint_id)] = current
        _put_writes(saver, thread_id, ns, checkpoint_id, writes)
        n_writes += len(writes)
        if progress is not None:
            progress(1)
    if writes_sql is not None:  # writes of checkpoints that were never saved
        orphans = conn.execute(
            "SELECT DISTINCT checkpoint_ns, checkpoint_id FROM writes WHERE thread_id = ? "
            "AND NOT EXISTS (SELECT 1 FROM checkpoints c WHERE c.thread_id = writes.thread_id "
            "AND c.checkpoint_ns = writes.checkpoint_ns "
            "AND c.checkpoint_id = writes.checkpoint_id)",
            (thread_id,),
        ).fetchall()
        for ns, checkpoint_id in orphans:
            where = f"thread {thread_id!r}, namespace {ns!r}, writes of {checkpoint_id}"
            writes = [
                (task_id, task_path, idx, channel, _loads(serde, (wtype, value), where, plain_data))
                for task_id, task_path, idx, channel, wtype, value in conn.execute(
                    f"SELECT {writes_sql} FROM writes "
                    "WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?",
                    (thread_id, ns, checkpoint_id),
                )
            ]
            _put_writes(saver, thread_id, ns, checkpoint_id, writes)
            n_writes += len(writes)
    return len(rows), n_writes, sorted({ns for ns, _, _ in rows})


def import_sqlite(
    source: str | Path,
    target: str | Path,
    *,
    threads: Sequence[str] | None = None,
    force: bool = False,
    skip_existing: bool = False,
    serde: SerializerProtocol | None = None,
    progress: Progress | None = None,
    plain_data: bool = False,
    check: bool = False,
    modules: Sequence[str] = (),
) -> ImportReport:
    """Copy threads of a `SqliteSaver` database into a `JsonlSaver` directory.

    Args:
        source: ``sqlite:///path.db`` or a path to the database file (opened read-only).
        target: The JSONL directory (created if missing).
        threads: Thread ids to import (default: every thread of the database).
        force: Replace threads that already exist in ``target``; each old log is kept
            as that thread's newest revert backup (``<thread>.jsonl.1``).
        skip_existing: Leave threads that already exist in ``target`` as they are
            (listed in `ImportReport.skipped`): how an interrupted import resumes.
        serde: How the database's values were serialized (default: LangGraph's
            `JsonPlusSerializer`, what `SqliteSaver` uses unless given another). The
            JSONL threads are written through it too: an `EncryptedSerializer`'s stay
            encrypted (open them with ``JsonlSaver(target, serde=...)``).
        progress: Called with 1 after each imported checkpoint. An exception it raises
            (``KeyboardInterrupt`` included) stops the import between two checkpoints:
            the threads already moved into place stay, complete; the one being
            staged is dropped.
        modules: The application's modules to import first (``"myapp.state"``): the
            classes of its state. A value naming a class of a module not loaded is never
            read (reading would import the module it names and call the name in it).
        check: Compare each imported thread with the database as the import read it (the
            same read transaction: an application writing meanwhile is no difference);
            what differs goes to `ImportReport.problems`.
        plain_data: Import a value whose class cannot be made in this process as the
            serializer gives it (its fields, a dict), for good, instead of stopping with
            `ClassUnavailableError` (for a class that no longer exists anywhere).

    Returns:
        The threads written, with their files and counts.

    Raises:
        FileNotFoundError: no such database file.
        SqliteSourceError: not a `SqliteSaver` database.
        ClassUnavailableError: a value names a class this process cannot make (its
            module does not import here): imported, it would be plain data for good.
        ThreadNotFoundError: one of ``threads`` is not in the database.
        ThreadExistsError: a thread already exists in ``target`` (and neither ``force``
            nor ``skip_existing``); nothing was written.
        ValueError: both ``force`` and ``skip_existing``.
    """
    if force and skip_existing:
        raise ValueError("force and skip_existing exclude each other")
    for module in modules:  # the caller's choice, not the file's
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise ValueError(f"cannot import the module {module!r} ({exc})") from None
    serde = serde or JsonPlusSerializer()
    root = Path(target)
    report = ImportReport(source=str(sqlite_path(source)), target=str(root))
    with _open(source) as conn:
        available = [row[0] for row in conn.execute(_THREADS_SQL)]
        if threads is None:
            wanted = available
        else:
            known = set(available)
            for thread_id in threads:
                if thread_id not in known:
                    raise ThreadNotFoundError(thread_id)
            wanted = list(dict.fromkeys(threads))
        storage = JsonlStorage(root)
        if skip_existing:
            report.skipped = [t for t in wanted if storage.exists(t)]
            wanted = [t for t in wanted if t not in set(report.skipped)]
        elif not force:
            for thread_id in wanted:
                if storage.exists(thread_id):
                    raise ThreadExistsError(thread_id)
        writes_sql = _writes_columns(conn)
        storage.make_dirs("importing")  # a new storage makes no directory until it writes
        scratch = Path(tempfile.mkdtemp(prefix=".import-", dir=root))
        try:
            for thread_id in wanted:
                # The database's serializer writes the JSONL too: an encrypting one stays
                # encrypting (LangGraph's plain one keeps the lines readable).
                staging = JsonlSaver(scratch / "staging", serde=serde)
                count, n_writes, namespaces = _import_thread(
                    conn, serde, writes_sql, staging, thread_id, progress, plain_data
                )
                staged = Path(staging.path(thread_id))
                with storage.locked(thread_id, exclusive=True):
                    existed = storage.exists(thread_id)
                    if existed and skip_existing:  # written meanwhile by someone else
                        report.skipped.append(thread_id)
                        shutil.rmtree(scratch / "staging")
                        continue
                    if existed and not force:
                        raise ThreadExistsError(thread_id)
                    with open(staged, "rb") as lines:
                        storage.replace(thread_id, lines, backup=existed)
                shutil.rmtree(scratch / "staging")
                if check:
                    target_saver = JsonlSaver(root, serde=serde)
                    report.problems += _compare(conn, serde, target_saver, thread_id, plain_data)
                report.threads.append(
                    ImportedThread(
                        thread_id=thread_id,
                        path=str(storage.path(thread_id)),
                        checkpoints=count,
                        writes=n_writes,
                        namespaces=namespaces,
                        replaced=existed,
                    )
                )
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    return report


def _tuple_view(tup: CheckpointTuple) -> dict[str, Any]:
    checkpoint = dict(tup.checkpoint)
    return {
        "checkpoint": checkpoint,
        "metadata": dict(tup.metadata or {}),
        "parent": (tup.parent_config or {}).get("configurable", {}).get("checkpoint_id"),
        "pending_writes": list(tup.pending_writes or []),
    }


def compare_with_sqlite(
    source: str | Path,
    target: str | Path | JsonlSaver,
    thread_id: str,
    *,
    serde: SerializerProtocol | None = None,
    plain_data: bool = False,
) -> list[str]:
    """Differences between a thread in the database and in the JSONL directory
    (``plain_data``: as `import_sqlite`'s; otherwise a class this process cannot make
    raises `ClassUnavailableError`, since both sides would read as the same dicts).

    Every checkpoint is compared whole: channel values, versions, versions seen,
    metadata, parent and pending writes (in order).
    ``[]`` means identical.
    """
    serde = serde or JsonPlusSerializer()
    saver = target if isinstance(target, JsonlSaver) else JsonlSaver(target, serde=serde)
    with _open(source) as conn:
        return _compare(conn, serde, saver, thread_id, plain_data)


def _compare(
    conn: sqlite3.Connection,
    serde: SerializerProtocol,
    saver: JsonlSaver,
    thread_id: str,
    plain_data: bool,
) -> list[str]:
    """`compare_with_sqlite` on an open read transaction (the import's own, for its check)."""
    problems: list[str] = []
    writes_sql = _writes_columns(conn)
    rows = conn.execute(
        "SELECT checkpoint_ns, checkpoint_id FROM checkpoints WHERE thread_id = ? "
        "ORDER BY checkpoint_id",
        (thread_id,),
    ).fetchall()
    stored = {(i.checkpoint_ns, i.checkpoint_id) for i in saver.checkpoint_infos(thread_id)}
    for ns, checkpoint_id in rows:
        if (ns, checkpoint_id) not in stored:
            problems.append(f"{thread_id} {ns!r} {checkpoint_id}: missing")
            continue
        checkpoint, metadata, parent, writes = _load_tuple(
            conn, serde, writes_sql, thread_id, ns, checkpoint_id, plain_data
        )
        writes.sort(key=lambda w: writes_sort_key(w[1], w[0], w[2]))
        expected = {
            "checkpoint": checkpoint,
            "metadata": metadata,
            "parent": parent,
            "pending_writes": [(task, ch, v) for task, _, _, ch, v in writes],
        }
        config = {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": ns,
                "checkpoint_id": checkpoint_id,
            }
        }
        got = saver.get_tuple(config)  # type: ignore[arg-type]
        actual = _tuple_view(got) if got is not None else None
        if actual is None:
            problems.append(f"{thread_id} {ns!r} {checkpoint_id}: missing")
            continue
        values = dict(actual["checkpoint"]["channel_values"])
        for channel, value in list(values.items()):
            # Like InMemorySaver, the JSONL saver returns a DeltaChannel's snapshot under
            # its unchanged version, where SqliteSaver keeps only what the step wrote;
            # LangGraph rebuilds the same value from either.
            if isinstance(value, _DeltaSnapshot) and channel not in checkpoint.get(
                "channel_values", {}
            ):
                del values[channel]
        actual["checkpoint"] = {**actual["checkpoint"], "channel_values": values}
        for key in expected:
            if actual[key] != expected[key]:
                problems.append(f"{thread_id} {ns!r} {checkpoint_id}: {key} differs")
    extra = stored - {(ns, cid) for ns, cid in rows}
    for ns, checkpoint_id in sorted(extra):
        problems.append(f"{thread_id} {ns!r} {checkpoint_id}: not in the database")
    return problems
