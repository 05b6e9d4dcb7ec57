"""Check the thread files of a `JsonlSaver` directory, line by line.

```python
from langgraph_ctx.cli.verify import verify_directory

report = verify_directory("./chats")
for problem in report.problems:
    print(problem)          # chats/task-001.jsonl:42: corrupt: not valid JSON (...)
report.exit_code            # 0 clean, 1 errors, 3 only torn last lines / empty files
```

One pass over the lines of a file, each line checked once:

1. **Lines.** Every complete line must carry a matching checksum (format 2; format-1
   lines have none and are counted in `FileReport.unchecked`), parse (format version,
   kind) and be well formed for its kind, by the codec's own parsers
   (`langgraph_ctx.codec.lines`, the ones the saver reads with); every reference must
   point at something in the file: message ordinals (``msgs``, ``append``, ``msg``,
   ``like``; an ordinal defined twice is an error), ``parent`` and ``ckpt`` line numbers,
   ``base`` lines, and the lines a ``snap`` names. A last line without its newline is a
   *torn* line (a write cut short by a crash: the saver ignores it and removes it before
   the next append).
2. **Decoding.** While the lines are sound, each line is also decoded the way the saver
   reads it, through the saver's own index: each message once, each stored value,
   metadata, pending write and folded `DeltaChannel` value once, on the line that holds
   it, and each message list's length against the ``keep`` of the lists built on it.
   A checkpoint's state is these pieces put together, so anything the saver would refuse
   in `get_tuple` shows here; a ``snap`` line must equal the snapshot the saver would
   write at that point (a cold open starts from it), and the work is proportional to the
   file's size, not to checkpoints times history.
3. **A new saver's open.** A sound log that carries a snapshot is also opened as a new
   saver opens it (from its last snapshot, by the saver's own index) and each
   namespace's head, and its pending writes, compared with the whole file's.

The pass reads one snapshot of the file, so verifying never changes a thread, even one
that is being written to. (One module, a little over 600 lines: the line pass, the decode
pass and the report they fill are read together when a check changes.)
"""

from __future__ import annotations

import contextlib
import re
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph_ctx.codec.lines import (
    SNAP_PREFIX,
    CheckpointHead,
    based_refs_checked,
    check_position,
    checkpoint_from_line,
    checkpoint_key,
    checkpoint_values,
    delta_base_values,
    is_list_value,
    line_checksum,
    list_link,
    loads_line,
    message_like,
    message_ordinal,
    parse_checkpoint_line,
    parse_snapshot_line,
    parse_writes_line,
    snapshot_as_gaps,
    wide_int_in_line,
)
from langgraph_ctx.codec.messages import message_from_body
from langgraph_ctx.codec.values import PACKAGE_MODELS, message_refs, refs_of
from langgraph_ctx.errors import (
    OTHER_SERIALIZER,
    CodecError,
    CorruptLogError,
    NotARegularFileError,
    SymlinkRefusedError,
    ThreadNotFoundError,
)
from langgraph_ctx.saver._index import _Index
from langgraph_ctx.storage.jsonl import JsonlStorage, read_file
from langgraph_ctx.storage.thread_ids import hashed_thread_id, is_hashed

Progress = Callable[[int], None]
"""Called with the number of lines just checked (for a progress bar)."""

__all__ = [
    "FileReport",
    "Problem",
    "Progress",
    "VerifyReport",
    "verify_directory",
    "verify_file",
]

ProblemKind = Literal[
    "torn", "empty", "corrupt", "dangling", "undecodable", "warning", "unreadable"
]
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
    snapshots: int = 0
    """``snap`` lines (each checked against the lines before it when decoding)."""
    decoded: int | None = None
    """Checkpoints decoded without error (``None``: not decoded, see `problems`)."""
    unchecked: list[list[int]] = field(default_factory=list)
    """Lines without a checksum (format 1), as ``[first, last]`` ranges: they read, but
    a change to them is found only when it breaks the line's syntax or meaning."""
    problems: list[Problem] = field(default_factory=list)

    @property
    def unchecked_count(self) -> int:
        """How many lines carry no checksum (format 1)."""
        return sum(last - first + 1 for first, last in self.unchecked)

    @property
    def ok(self) -> bool:
        """No problem at all (warnings included)."""
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["unchecked_count"] = self.unchecked_count
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
        self.bad_bodies: set[int] = set()  # ordinals whose body line is reported corrupt
        self.ckpts: dict[int, CheckpointHead] = {}  # line -> checkpoint
        self.lists: dict[int, set[str]] = {}  # line -> channels stored there as message lists
        self.writes_at: set[int] = set()  # the lines of writes
        self.refs: list[tuple[int, int, str]] = []  # (line, ordinal, where), checked at the end

    def problem(self, line: int | None, kind: ProblemKind, message: str) -> None:
        self.report.problems.append(Problem(self.report.path, line, kind, message))

    def unchecked(self, n: int) -> None:
        ranges = self.report.unchecked
        if ranges and ranges[-1][1] == n - 1:
            ranges[-1][1] = n
        else:
            ranges.append([n, n])

    def scan(
        self,
        lines: Sequence[bytes],
        decoder: _Decoder | None = None,
        progress: Progress | None = None,
    ) -> None:
        """Check every line; hand each to ``decoder`` while no error was found."""
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if decoder is not None:
                decoder.caught = caught
            self._scan(lines, decoder, progress)

    def _scan(
        self, lines: Sequence[bytes], decoder: _Decoder | None, progress: Progress | None
    ) -> None:
        unreadable: list[int] = []
        for n, raw in enumerate(lines, 1):
            if progress is not None and n % 1024 == 0:
                progress(1024)
            if line_checksum(raw) is None:
                self.unchecked(n)
            try:
                obj = loads_line(raw)
            except CodecError as exc:
                self.problem(n, "corrupt", str(exc))
                unreadable.append(n)
                continue
            wide = wide_int_in_line(raw)
            if wide is not None:  # written before such integers were refused
                self.problem(
                    n,
                    "warning",
                    f"holds the integer {wide}, beyond 64 bits: the saver reads it back as a "
                    "float, another number (store such values as strings)",
                )
            try:
                self.line(n, obj)
            except CodecError as exc:
                kind = _kind(exc)
                self.problem(n, kind, str(exc) + (f"; {_NOT_CHECKED}" if kind == "warning" else ""))
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                self.problem(n, "corrupt", f"malformed {obj.get('t')} line ({exc!r})")
            if decoder is not None:
                if any(p.severity == "error" for p in self.report.problems):
                    decoder = None  # what follows may build on the bad line: lines only
                else:
                    decoder.line(n, obj)
        if progress is not None:
            progress(len(lines) % 1024)
        if decoder is not None:
            decoder.finish()
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
            log_name = _LOG_NAME.sub("", Path(self.report.path).name)  # a backup's too
            if is_hashed(log_name) and hashed_thread_id(obj, log_name) is None:
                self.problem(
                    n,
                    "corrupt",
                    "its header names a thread whose log is not this file (a long id's log "
                    "holds its own id there): the thread is left out of listings",
                )
        elif kind == "msg":
            self.message(n, obj)
        elif kind == "ckpt":
            self.checkpoint(n, obj)
        elif kind == "snap":
            self.snapshot(n, obj)
        else:
            self.writes(n, obj)

    def add_refs(self, n: int, enc: Any, where: str) -> None:
        known = based_refs_checked(n, lambda base, ch: ch in self.lists.get(base, ()))
        for place, ordinals in message_refs(enc, known, where):
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
            if like in self.bad_bodies:
                # One problem, not two: the body's line is reported; fixing it fixes this.
                self.bad_bodies.add(ordinal)
            elif like not in self.readable:
                raise CodecError(
                    f"'like' names message #{like}, which is not readable", dangling=True
                )
            self.readable.add(ordinal)
            return
        try:
            message_from_body(obj, self.serde)
        except CodecError as exc:
            self.bad_bodies.add(ordinal)
            raise CodecError(f"message #{ordinal}: {exc}") from None
        if "msg" in obj:
            self.readable.add(ordinal)

    def checkpoint(self, n: int, obj: Mapping[str, Any]) -> None:
        ns, cid = checkpoint_key(obj)
        self.report.checkpoints += 1
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

    def snapshot(self, n: int, obj: Mapping[str, Any]) -> None:
        """A ``snap`` line's shape, and that each line it names is of the kind it says
        (whether it says what those lines say is the decoder's check)."""
        snap = parse_snapshot_line(obj, n)
        self.report.snapshots += 1
        for i, line in enumerate(snap.msg_lines):
            if line is not None and self.msg_lines.get(snap.first_msg + i) != line:
                raise CodecError(
                    f"snapshot: message #{snap.first_msg + i} is not on line {line}",
                    dangling=True,
                )
        named = [h.head.line for h in snap.heads] + [line for line, *_ in snap.lists]
        named += [w[1] for h in snap.heads for w in h.writers.values()]
        for line in named:
            if line not in self.ckpts:
                raise CodecError(f"snapshot: line {line} is not a checkpoint", dangling=True)
        for line in snap.early or ():
            if line not in self.writes_at:
                raise CodecError(f"snapshot: line {line} is not a writes line", dangling=True)

    def writes(self, n: int, obj: Mapping[str, Any]) -> None:
        _, _, _, _, items = parse_writes_line(obj, n, self.ckpts)
        self.report.writes += 1
        self.writes_at.add(n)
        for item in items:
            self.add_refs(n, item[2], f"write to {item[1]!r}")


def _kind(exc: CodecError) -> ProblemKind:
    if OTHER_SERIALIZER in str(exc):  # intact, written by a serializer we have not: said
        return "warning"
    return "dangling" if exc.dangling else "corrupt"


_NOT_CHECKED = "not checked: `verify_file(path, serde=...)` reads it with that serializer"


# ----------------------------------------------------------------- decode pass


class _Decoder:
    """Decodes each line once, as it is scanned, through the saver's own `_Index`.

    A checkpoint's state is assembled from pieces stored on earlier lines; each
    piece is decoded here once, on its own line (so the work is linear in the
    file). Message lists are not assembled: their references are checked by the
    scanner, their messages decoded on their own lines, and their lengths
    followed here so a ``keep`` longer than its base list is found.
    """

    def __init__(
        self, report: FileReport, lines: Sequence[bytes], serde: SerializerProtocol
    ) -> None:
        self.report = report
        self.index = _Index(
            where=report.path, reader=lambda ns: {n: lines[n - 1] for n in ns}, serde=serde
        )
        self.lengths: dict[tuple[int, str], int] = {}  # (line, channel) -> list length
        self.latest: dict[tuple[str, str], int] = {}  # (ns, id) -> its last line
        self.failed: set[int] = set()  # checkpoint lines that did not decode
        self.seen: set[tuple[int | None, str]] = set()
        self.caught: list[warnings.WarningMessage] = []  # set by the scanner

    def add(self, line: int | None, kind: ProblemKind, message: str) -> None:
        if (line, message) not in self.seen:
            self.seen.add((line, message))
            self.report.problems.append(Problem(self.report.path, line, kind, message))

    def line(self, n: int, obj: dict[str, Any]) -> None:
        index = self.index
        try:
            if obj["t"] == "snap":
                self.snapshot(n, obj)
            index.add(obj, n)
            index.parsed.put(n, obj)
            kind = obj["t"]
            if kind == "msg":
                index.message(obj["n"])
            elif kind == "ckpt":
                self.checkpoint(n, obj, index.ckpt_at[n])
            elif kind == "writes":
                for item in obj["w"]:
                    self.value(item[2], n, item[1])
            elif kind == "snap":
                pass  # checked before it was indexed, below
        except CorruptLogError as exc:
            self.fail(n, exc.line if exc.line is not None else n, exc.reason)
        except CodecError as exc:
            self.fail(n, n, str(exc))
        except Exception as exc:  # anything the saver or LangGraph raises
            self.fail(n, n, f"{type(exc).__name__}: {exc}")
        if self.caught:
            for w in self.caught:
                text = str(w.message)
                self.add(n, "warning", text.splitlines()[0] if text else type(w.message).__name__)
            self.caught.clear()

    def snapshot(self, n: int, obj: Mapping[str, Any]) -> None:
        """A snapshot must say exactly what the lines before it say: it is compared
        with the one the saver would write there (a cold open trusts it)."""
        expected = self.index.snapshot()
        found = snapshot_as_gaps({k: v for k, v in obj.items() if k != "c"})
        if expected is not None and "early" not in found:
            # Written by a release before `early` existed: judged on the rest (a reader
            # does not start from it: `_Index._from_snapshot`).
            expected.pop("early", None)
        elif expected is not None and found.get("early") != expected.get("early"):
            # A `revert` or `fork` at a checkpoint empties the early writes it had made
            # (`writes_past`); the snapshot before it still names their lines, which
            # hold nothing now: as the saver reads them, the same snapshot.
            holding = {w[2] for stored in self.index._writes.values() for w in stored.values()}
            named = parse_snapshot_line(found, n, heads=False).early or []
            if [line for line in named if line in holding] == parse_snapshot_line(
                expected, n, heads=False
            ).early:
                found = {**found, "early": expected["early"]}
        if expected is None or expected != found:
            diff = sorted(
                k for k in set(found) | set(expected or {})
                if found.get(k) != (expected or {}).get(k)
            )
            raise CodecError(
                f"snapshot does not match the lines before it ({', '.join(diff)} differ): "
                "a cold open would read a wrong state; rewrite the thread "
                "(e.g. `langgraph-ctx` prune) or delete this line's snapshots"
            )

    def fail(self, n: int, line: int, reason: str) -> None:
        self.failed.add(n)
        if OTHER_SERIALIZER in reason:  # intact, and not ours to read: said, not an error
            self.add(line, "warning", f"{reason}; {_NOT_CHECKED}")
            return
        self.add(line, "undecodable", reason)

    def value(self, enc: Any, n: int, channel: str) -> None:
        """Decode a value that is not a message list (its messages must be in the file:
        a missing one is reported by the scanner, as dangling)."""
        ordinals = (o for _, refs in message_refs(enc, where=channel) for o in refs)
        if all(o in self.index.msg_lines for o in ordinals):
            self.index.decode(enc, n, channel)

    def checkpoint(self, n: int, obj: dict[str, Any], head: CheckpointHead) -> None:
        index = self.index
        self.latest[(head.ns, head.id)] = n
        index.metadata(head)
        checkpoint_from_line(obj, head, {}, index.serde)
        for channel, item in obj.get("values", {}).items():
            if len(item) != 2:
                continue
            enc = item[1]
            if not is_list_value(enc):
                self.value(enc, n, channel)
                continue
            refs = refs_of(enc)
            link, base = list_link(enc, n)
            if link == "append":
                link_of = index.links.get((n, channel))
                base = link_of[0] if link_of is not None else None
            if base is None:
                self.lengths[(n, channel)] = len(refs)
                continue
            known = self.lengths.get((base, channel))
            if known is None:
                continue  # the base is not a message list: reported by the scanner
            keep = enc["keep"] if link == "base" else known
            if keep > known:
                raise CorruptLogError(
                    index.where, n, f"channel {channel!r}: base value shorter than 'keep'"
                )
            self.lengths[(n, channel)] = keep + len(refs)
        for channel, enc in delta_base_values(obj):
            self.value(enc, n, channel)

    def finish(self) -> None:
        self.report.decoded = sum(1 for n in self.latest.values() if n not in self.failed)


# -------------------------------------------------------------------- entry points


def verify_file(
    path: str | Path,
    *,
    thread_id: str | None = None,
    decode: bool = True,
    allowed_types: Sequence[type | tuple[str, ...]] = (),
    serde: SerializerProtocol | None = None,
    progress: Progress | None = None,
) -> FileReport:
    """Check one thread file (a live log or a revert backup); see the module docstring.

    Args:
        path: The file.
        thread_id: Its thread id, for the report (default: the id in its header).
        decode: Also decode every line's values (each once: linear in the file).
        allowed_types: Classes your state holds, as for `JsonlSaver`.
        serde: Serializer for message bodies stored through it (default: the
            saver's strict `JsonPlusSerializer`).
        progress: Called with the number of lines checked since its last call.
    """
    path = Path(path)
    report = FileReport(path=str(path), thread_id=thread_id)
    try:
        data = read_file(path)
    except (SymlinkRefusedError, NotARegularFileError) as exc:
        report.problems.append(Problem(str(path), None, "unreadable", str(exc)))
        return report
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
        serde = _serde(allowed_types)
    scanner = _Scanner(report, serde)
    decoder = _Decoder(report, lines, serde) if decode and lines else None
    scanner.scan(lines, decoder, progress)
    if decoder is not None and not report.problems:
        _check_cold_open(report, path, lines, serde, decoder.index)
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
    report.problems.sort(key=lambda p: (p.line is None, p.line or 0))
    return report


def _check_cold_open(
    report: FileReport,
    path: Path,
    lines: list[bytes],
    serde: SerializerProtocol,
    whole: _Index,
) -> None:
    """Open a sound log as a new saver does, from its last snapshot, and compare each
    namespace's head with the whole file's (``whole``: the decode pass's index of every
    line): a file every line of which is right may still fail there (the cold-open code
    is checked, not only the lines it reads)."""
    if not any(raw.startswith(SNAP_PREFIX) for raw in lines):
        return  # no snapshot: a cold open reads every line, as the pass above did
    cold = _Index(where=str(path), reader=lambda ns: {n: lines[n - 1] for n in ns}, serde=serde)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # read warnings: the pass above names them
            cold.feed(1, lines, skip_corrupt=False)
    except (CorruptLogError, CodecError) as exc:
        report.problems.append(
            Problem(
                str(path),
                None,
                "undecodable",
                f"a new saver opening it from its last snapshot: {exc}",
            )
        )
        return
    for ns in sorted(whole._by_ns):
        want, got = whole.latest(ns), cold.latest(ns)
        if got is None or want is None or got.id != want.id:
            report.problems.append(
                Problem(
                    str(path),
                    None,
                    "undecodable",
                    f"a new saver opening it from its last snapshot finds "
                    f"{got.id if got else 'no'} checkpoint as the head of namespace {ns!r}, "
                    f"the whole file {want.id if want else 'none'}",
                )
            )
            continue
        writes, found = whole._writes.get((ns, want.id), {}), cold._writes.get((ns, got.id), {})
        if set(found) != set(writes):  # (task, index) of each: what a step would not redo
            report.problems.append(
                Problem(
                    str(path),
                    None,
                    "undecodable",
                    f"a new saver opening it from its last snapshot finds {len(found)} "
                    f"pending writes of the head of namespace {ns!r}, the whole file "
                    f"{len(writes)}: the step would run again",
                )
            )


def verify_directory(
    root: str | Path,
    *,
    threads: Sequence[str] | None = None,
    backups: bool = False,
    decode: bool = True,
    allowed_types: Sequence[type | tuple[str, ...]] = (),
    progress: Callable[[int], Progress] | None = None,
) -> VerifyReport:
    """Check every thread file of a `JsonlSaver` directory (or only ``threads``).

    Args:
        root: The directory.
        threads: Thread ids to check (default: all).
        backups: Also check the revert backups (``<thread>.jsonl.1``, ...).
        decode: Also decode every line's values.
        allowed_types: Classes your state holds, as for `JsonlSaver`.
        progress: Called with the total number of lines to check (known after the
            files are read); returns the callback `verify_file` reports lines to.

    Raises:
        FileNotFoundError: ``root`` is not a directory.
        ThreadNotFoundError: one of ``threads`` has no file.
    """
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"no such directory: {root}")
    storage = JsonlStorage(root)
    logs: list[tuple[str | None, Path]]
    if threads is None:  # every log, also one whose thread id (a long one's) does not read
        logs = [(t, root / name) for t, name in storage.logs()]
    else:
        logs = [(t, storage.path(t)) for t in threads]
    serde = _serde(allowed_types)
    files: list[FileReport] = []
    paths: list[tuple[str | None, Path]] = []
    for thread_id, path in logs:
        if thread_id is not None and not path.exists():
            raise ThreadNotFoundError(thread_id)
        found = storage.backup_paths(path) if backups else []  # by the log's file name
        paths.extend((thread_id, candidate) for candidate in [path, *found])
    advance = None
    if progress is not None:
        total = 0
        for _, candidate in paths:
            with contextlib.suppress(SymlinkRefusedError, NotARegularFileError):
                total += read_file(candidate).count(b"\n")  # (`verify_file` names why not)
        advance = progress(total)
    for thread_id, candidate in paths:
        report = verify_file(
            candidate,
            thread_id=thread_id,
            decode=decode,
            allowed_types=allowed_types,
            serde=serde,
            progress=advance,
        )
        files.append(report)
    return VerifyReport(root=str(root), files=files)


_LOG_NAME = re.compile(r"\.jsonl(\.\d+)?$")
"""The suffix of a log or backup file name (what `hashed_thread_id` does not hash)."""


def _serde(allowed_types: Sequence[type | tuple[str, ...]]) -> SerializerProtocol:
    """The saver's own strict serializer (its package models and ``allowed_types``)."""
    return JsonPlusSerializer(allowed_msgpack_modules=[*PACKAGE_MODELS, *allowed_types])
