"""Check the thread files of a `JsonlSaver` directory, line by line.

```python
from langgraph_ctx.cli.verify import verify_directory

report = verify_directory("./chats")
for problem in report.problems:
    print(problem)          # chats/task-001.jsonl:42: corrupt: not valid JSON (...)
report.exit_code            # 0 clean, 1 errors, 3 only torn last lines / empty files
```

Two passes per file:

1. **Lines.** Every complete line must parse (format version, kind) and be well formed
   for its kind, by the codec's own parsers (`langgraph_ctx.codec.lines`, the ones the
   saver reads with); every reference must point at something in the file: message ordinals
   (``msgs``, ``append``, ``msg``, ``like``), ``parent`` and ``ckpt`` line numbers,
   ``base`` lines. A last line without its newline is a *torn* line (a write cut short
   by a crash: the saver ignores it and removes it before the next append).
2. **Checkpoints.** When the lines are sound, every checkpoint is decoded the way the
   saver reads it (`get_tuple`: values, metadata, pending writes, and the
   `DeltaChannel` history it needs), so anything the saver would refuse shows here.

Both passes read one snapshot of the file (the second through a private copy), so
verifying never changes a thread, even one that is being written to.
"""

from __future__ import annotations

import shutil
import tempfile
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph_ctx.codec.lines import (
    CheckpointHead,
    check_position,
    checkpoint_key,
    checkpoint_values,
    delta_base_values,
    is_list_value,
    list_link,
    loads_line,
    message_like,
    message_ordinal,
    parse_checkpoint_line,
    parse_writes_line,
)
from langgraph_ctx.codec.messages import message_from_body
from langgraph_ctx.codec.values import message_refs
from langgraph_ctx.errors import CodecError, CorruptLogError, ThreadNotFoundError
from langgraph_ctx.saver.jsonl import JsonlSaver
from langgraph_ctx.storage.jsonl import JsonlStorage

__all__ = [
    "FileReport",
    "Problem",
    "VerifyReport",
    "verify_directory",
    "verify_file",
]

ProblemKind = Literal["torn", "empty", "corrupt", "dangling", "undecodable", "warning"]
Severity = Literal["error", "warning"]

_WARNING_KINDS = frozenset({"torn", "empty", "warning"})


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a file, at a 1-based line (``None``: the file as a whole)."""

    path: str
    line: int | None
    kind: ProblemKind
    """``torn`` (unfinished last line), ``empty``, ``corrupt`` (a line that does not
    parse or is malformed), ``dangling`` (a reference to something not in the file),
    ``undecodable`` (a checkpoint the saver cannot rebuild), ``warning`` (read with a
    warning, e.g. a value of a type the serializer does not allow)."""
    message: str

    @property
    def severity(self) -> Severity:
        """``warning`` for torn lines, empty files and read warnings; else ``error``."""
        return "warning" if self.kind in _WARNING_KINDS else "error"

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line is not None else self.path
        return f"{where}: {self.kind}: {self.message}"

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "severity": self.severity}


@dataclass
class FileReport:
    """What `verify_file` found in one file."""

    path: str
    thread_id: str | None
    lines: int = 0
    """Complete lines."""
    messages: int = 0
    checkpoints: int = 0
    writes: int = 0
    decoded: int | None = None
    """Checkpoints decoded without error (``None``: not decoded, see `problems`)."""
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """No problem at all (warnings included)."""
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["problems"] = [p.to_dict() for p in self.problems]
        out["ok"] = self.ok
        return out


@dataclass
class VerifyReport:
    """What `verify_directory` found."""

    root: str
    files: list[FileReport]

    @property
    def problems(self) -> list[Problem]:
        return [p for f in self.files for p in f.problems]

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "error"]

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def exit_code(self) -> int:
        """0: every file is sound; 1: errors; 3: only warnings (torn last lines, empty files)."""
        if self.errors:
            return 1
        return 3 if self.problems else 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "root": self.root,
            "ok": self.ok,
            "exit_code": self.exit_code,
            "files": [f.to_dict() for f in self.files],
            "problems": [p.to_dict() for p in self.problems],
        }


# ----------------------------------------------------------------- line checks


_UNREAD: dict[str, Any] = {}  # versions / versions seen of a checkpoint line that did not parse


class _Scanner:
    """The line pass over one file's complete lines, through the codec's parsers."""

    def __init__(self, report: FileReport, serde: SerializerProtocol) -> None:
        self.report = report
        self.serde = serde
        self.msg_lines: dict[int, int] = {}  # ordinal -> line
        self.readable: set[int] = set()  # ordinals whose body is readable JSON
        self.ckpts: dict[int, CheckpointHead] = {}  # line -> checkpoint
        self.lists: dict[int, set[str]] = {}  # line -> channels stored there as message lists
        self.refs: list[tuple[int, int, str]] = []  # (line, ordinal, where), checked at the end
        self.order: list[tuple[str, str, int]] = []  # (ns, id, line) of every checkpoint line

    def problem(self, line: int | None, kind: ProblemKind, message: str) -> None:
        self.report.problems.append(Problem(self.report.path, line, kind, message))

    def scan(self, lines: Sequence[bytes]) -> None:
        unreadable: list[int] = []
        for n, raw in enumerate(lines, 1):
            try:
                obj = loads_line(raw)
            except CodecError as exc:
                self.problem(n, "corrupt", str(exc))
                unreadable.append(n)
                continue
            try:
                self.line(n, obj)
            except CodecError as exc:
                self.problem(n, _kind(exc), str(exc))
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                self.problem(n, "corrupt", f"malformed {obj.get('t')} line ({exc!r})")
        for n, ordinal, where in self.refs:
            if ordinal not in self.msg_lines:
                lost = [u for u in unreadable if u < n]
                hint = f" (it may have been on corrupt line {lost[-1]})" if lost else ""
                self.problem(
                    n, "dangling", f"{where} refers to message #{ordinal}, not in the file{hint}"
                )

    def line(self, n: int, obj: Mapping[str, Any]) -> None:
        kind = obj["t"]
        check_position(kind, n)
        if kind == "thread":
            if not isinstance(obj.get("thread_id"), str):
                raise CodecError("the thread header has no string 'thread_id'")
            if self.report.thread_id is None:
                self.report.thread_id = obj["thread_id"]
        elif kind == "msg":
            self.message(n, obj)
        elif kind == "ckpt":
            self.checkpoint(n, obj)
        else:
            self.writes(n, obj)

    def add_refs(self, n: int, enc: Any, where: str) -> None:
        for place, ordinals in message_refs(enc, where=where):
            self.refs.extend((n, o, place) for o in ordinals)

    def message(self, n: int, obj: Mapping[str, Any]) -> None:
        ordinal = message_ordinal(obj)
        if ordinal in self.msg_lines:
            first = self.msg_lines[ordinal]
            raise CodecError(f"message #{ordinal} is already defined on line {first}")
        self.report.messages += 1
        self.msg_lines[ordinal] = n  # even when its body is bad: references to it are not
        like = message_like(obj, ordinal, self.msg_lines)
        if like is not None:
            if like not in self.readable:
                raise CodecError(
                    f"'like' names message #{like}, which is not readable", dangling=True
                )
            self.readable.add(ordinal)
            return
        try:
            message_from_body(obj, self.serde)
        except CodecError as exc:
            raise CodecError(f"message #{ordinal}: {exc}") from None
        if "msg" in obj:
            self.readable.add(ordinal)

    def checkpoint(self, n: int, obj: Mapping[str, Any]) -> None:
        ns, cid = checkpoint_key(obj)
        self.report.checkpoints += 1
        self.order.append((ns, cid, n))
        # Recorded even when the line is bad below: later lines refer to it.
        self.ckpts[n] = CheckpointHead(
            ns, cid, n, None, None, _UNREAD, _UNREAD, None, {}, frozenset(), frozenset()
        )
        try:
            head = parse_checkpoint_line(obj, n, self.ckpts)
        except CodecError as exc:
            if not exc.dangling:
                raise
            # A parent not in the file: say so, and check the rest of the line without it.
            self.problem(n, "dangling", str(exc))
            head = parse_checkpoint_line({**obj, "parent": None}, n, self.ckpts)
        self.ckpts[n] = head
        lists = self.lists[n] = set()
        for channel, item in checkpoint_values(obj).items():
            if len(item) == 1:
                continue
            enc, where = item[1], f"channel {channel!r}"
            self.add_refs(n, enc, where)
            if not is_list_value(enc):
                continue
            lists.add(channel)
            try:
                link, base = list_link(enc, n)
            except CodecError as exc:
                raise CodecError(f"{where}: {exc}", dangling=exc.dangling) from None
            if link == "append" and type(obj.get("parent")) is not int:
                raise CodecError(
                    f"{where} appends to its parent's value, but the parent is not in this file",
                    dangling=True,
                )
            if link == "base" and channel not in self.lists.get(base, ()):  # type: ignore[arg-type]
                raise CodecError(
                    f"{where}: 'base' line {base} does not store {channel!r} as messages",
                    dangling=True,
                )
        for channel, enc in delta_base_values(obj):
            self.add_refs(n, enc, f"delta_base of {channel!r}")

    def writes(self, n: int, obj: Mapping[str, Any]) -> None:
        _, _, _, _, items = parse_writes_line(obj, n, self.ckpts)
        self.report.writes += 1
        for item in items:
            self.add_refs(n, item[2], f"write to {item[1]!r}")


def _kind(exc: CodecError) -> ProblemKind:
    return "dangling" if exc.dangling else "corrupt"


# ----------------------------------------------------------------- decode pass


def _decode_all(
    report: FileReport,
    lines: Sequence[bytes],
    order: Sequence[tuple[str, str, int]],
    *,
    allowed_types: Sequence[type | tuple[str, ...]] = (),
) -> None:
    """Decode every checkpoint through a saver over a private copy of the lines."""
    tmp = tempfile.mkdtemp(prefix="langgraph-ctx-verify-")
    try:
        saver = JsonlSaver(tmp, allowed_types=allowed_types)
        copy = Path(saver.path("t"))
        with open(copy, "wb") as out:
            for raw in lines:
                out.write(raw + b"\n")
        latest: dict[tuple[str, str], int] = {}
        for ns, cid, n in order:
            latest[(ns, cid)] = n  # a re-put supersedes the earlier line
        seen: set[tuple[int | None, str]] = set()
        decoded = 0

        def add(line: int | None, kind: ProblemKind, message: str) -> None:
            if (line, message) not in seen:
                seen.add((line, message))
                report.problems.append(Problem(report.path, line, kind, message))

        for (ns, cid), n in sorted(latest.items(), key=lambda kv: kv[1]):
            config = {"configurable": {"thread_id": "t", "checkpoint_ns": ns, "checkpoint_id": cid}}
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                try:
                    tup = saver.get_tuple(config)  # type: ignore[arg-type]
                    if tup is None:
                        raise CodecError("checkpoint is in the file but the saver cannot find it")
                    counters = tup.metadata.get("counters_since_delta_snapshot")
                    if isinstance(counters, dict) and counters:
                        saver.get_delta_channel_history(
                            config=config,  # type: ignore[arg-type]
                            channels=sorted(counters),
                        )
                    decoded += 1
                except CorruptLogError as exc:
                    add(exc.line, "undecodable", exc.reason)
                except Exception as exc:  # anything the saver or LangGraph raises
                    add(n, "undecodable", f"checkpoint {cid}: {type(exc).__name__}: {exc}")
            for w in caught:
                text = str(w.message).replace(str(copy), report.path)
                add(n, "warning", text.splitlines()[0] if text else type(w.message).__name__)
        report.decoded = decoded
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# -------------------------------------------------------------------- entry points


def verify_file(
    path: str | Path,
    *,
    thread_id: str | None = None,
    decode: bool = True,
    allowed_types: Sequence[type | tuple[str, ...]] = (),
    serde: SerializerProtocol | None = None,
) -> FileReport:
    """Check one thread file (a live log or a revert backup); see the module docstring.

    Args:
        path: The file.
        thread_id: Its thread id, for the report (default: the id in its header).
        decode: Also decode every checkpoint (slower on long threads: every state
            is rebuilt).
        allowed_types: Classes your state holds, as for `JsonlSaver`.
        serde: Serializer for message bodies stored through it (default: the
            saver's strict `JsonPlusSerializer`).
    """
    path = Path(path)
    report = FileReport(path=str(path), thread_id=thread_id)
    data = path.read_bytes()
    if not data:
        report.problems.append(
            Problem(
                str(path), None, "empty", "empty file (no header): the saver sees no thread here"
            )
        )
        return report
    pieces = data.split(b"\n")
    lines, tail = pieces[:-1], pieces[-1]
    report.lines = len(lines)
    if serde is None:
        serde = JsonPlusSerializer(allowed_msgpack_modules=list(allowed_types) or None)
    scanner = _Scanner(report, serde)
    scanner.scan(lines)
    errors = any(p.severity == "error" for p in report.problems)
    if tail:
        report.problems.append(
            Problem(
                str(path),
                len(lines) + 1,
                "torn",
                f"torn last line ({len(tail)} bytes, no newline): a write cut short by a crash; "
                "the saver ignores it and removes it before the next append",
            )
        )
    if decode and not errors and lines:
        _decode_all(report, lines, scanner.order, allowed_types=allowed_types)
    report.problems.sort(key=lambda p: (p.line is None, p.line or 0))
    return report


def verify_directory(
    root: str | Path,
    *,
    threads: Sequence[str] | None = None,
    backups: bool = False,
    decode: bool = True,
    allowed_types: Sequence[type | tuple[str, ...]] = (),
) -> VerifyReport:
    """Check every thread file of a `JsonlSaver` directory (or only ``threads``).

    Args:
        root: The directory.
        threads: Thread ids to check (default: all).
        backups: Also check the revert backups (``<thread>.jsonl.1``, ...).
        decode: Also decode every checkpoint.
        allowed_types: Classes your state holds, as for `JsonlSaver`.

    Raises:
        FileNotFoundError: ``root`` is not a directory.
        ThreadNotFoundError: one of ``threads`` has no file.
    """
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"no such directory: {root}")
    storage = JsonlStorage(root)
    ids = list(threads) if threads is not None else list(storage.thread_ids())
    serde = JsonPlusSerializer(allowed_msgpack_modules=list(allowed_types) or None)
    files: list[FileReport] = []
    for thread_id in ids:
        path = storage.path(thread_id)
        if not path.exists():
            raise ThreadNotFoundError(thread_id)
        candidates = [path, *(Path(p) for p in storage.backups(thread_id))] if backups else [path]
        for candidate in candidates:
            files.append(
                verify_file(
                    candidate,
                    thread_id=thread_id,
                    decode=decode,
                    allowed_types=allowed_types,
                    serde=serde,
                )
            )
    return VerifyReport(root=str(root), files=files)
