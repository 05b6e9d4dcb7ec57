"""Retention: delete or trim the threads nobody has touched for a while.

What LangGraph's server does with ``ThreadTTLConfig`` (``strategy="delete"`` or
``"keep_latest"``), for any `LogSaver`, as a call you make when you choose (a cron job,
``langgraph-ctx prune --older-than 30d``), never as hidden I/O when a saver opens:

```python
from datetime import timedelta
from langgraph_ctx import JsonlSaver
from langgraph_ctx.saver.retention import sweep

saver = JsonlSaver("./chats")
report = sweep(saver, older_than="30d", dry_run=True)   # what would go, nothing changes
for action in report.actions:
    print(action.thread_id, action.action, action.last_activity)
sweep(saver, older_than=timedelta(days=30), keep_latest=True)  # trim instead of delete
```

A thread's age is the time since its newest checkpoint (any namespace). ``delete``
removes the thread with its revert backups and its context archives
(``<thread>.ctx.<id>``). ``keep_latest`` keeps the latest checkpoint of each namespace
*with its pending writes*: a thread waiting at an interrupt, with the results of the
tool calls that finished before it, resumes after the sweep exactly as before it.

Two parts, so the decision is testable without a store: `plan_sweep` (pure: thread
activity in, actions out) and `sweep` (reads the activity through the saver's public
methods, `list_threads` and `checkpoint_infos`, then applies the plan with `prune` and
`delete_thread`).
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, Literal

from langgraph_ctx.context.archive.forks import archive_owner, archive_threads_of
from langgraph_ctx.errors import LangGraphCtxError
from langgraph_ctx.storage.thread_ids import id_list

if TYPE_CHECKING:
    from langgraph_ctx.saver.log import LogSaver

__all__ = [
    "SweepAction",
    "SweepReport",
    "ThreadActivity",
    "parse_age",
    "plan_sweep",
    "sweep",
]

_AGE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_age(text: str | timedelta) -> timedelta:
    """``"30d"``, ``"12h"``, ``"90m"``, ``"2w"``, ``"45s"`` (or a `timedelta`) as a `timedelta`.

    Example:
        >>> parse_age("30d"), parse_age("1.5h")
        (datetime.timedelta(days=30), datetime.timedelta(seconds=5400))

    Raises:
        ValueError: anything else, or a negative age.
    """
    if isinstance(text, timedelta):
        age = text
    else:
        match = _AGE.fullmatch(str(text))
        if match is None:
            raise ValueError(
                f"cannot read the age {text!r}: use a number and a unit, s, m, h, d or w "
                "(30d, 12h, 2w)"
            )
        age = timedelta(**{_UNITS[match.group(2)]: float(match.group(1))})
    if age < timedelta(0):
        raise ValueError(f"the age must not be negative, got {age}")
    return age


@dataclass(frozen=True)
class ThreadActivity:
    """What the sweep decides on: a thread's newest checkpoint and how many it has."""

    thread_id: str
    last_activity: str
    """ISO timestamp of the newest checkpoint, any namespace (``""``: none)."""
    checkpoints: int
    namespaces: int
    """Namespaces with a checkpoint: what ``keep_latest`` keeps one checkpoint of each."""
    kept: int | None = None
    """Checkpoints ``keep_latest`` keeps (a `DeltaChannel`'s ancestors too); ``None``: one a
    namespace."""


@dataclass(frozen=True)
class SweepAction:
    """One thing the sweep does (or, in a dry run, would do) to a thread."""

    thread_id: str
    action: Literal["delete", "keep_latest"]
    last_activity: str
    checkpoints_before: int
    checkpoints_after: int
    archives: tuple[str, ...] = ()
    """Context archives deleted with the thread (``delete`` only)."""


@dataclass
class SweepReport:
    """What `sweep` did, or would do with ``dry_run=True``."""

    cutoff: str
    """Threads whose newest checkpoint is older than this (ISO, UTC) were swept."""
    strategy: Literal["delete", "keep_latest"]
    dry_run: bool
    actions: list[SweepAction] = field(default_factory=list)
    threads_seen: int = 0
    errors: dict[str, str] = field(default_factory=dict)
    """Threads left alone because they could not be read (thread id -> why)."""

    @property
    def deleted(self) -> list[str]:
        return [a.thread_id for a in self.actions if a.action == "delete"]

    @property
    def pruned(self) -> list[str]:
        return [a.thread_id for a in self.actions if a.action == "keep_latest"]

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["actions"] = [{**asdict(a), "archives": list(a.archives)} for a in self.actions]
        return out


def _when(ts: str) -> datetime | None:
    try:
        when = datetime.fromisoformat(ts)
    except (TypeError, ValueError):
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=timezone.utc)


def plan_sweep(
    threads: Sequence[ThreadActivity],
    *,
    cutoff: datetime,
    keep_latest: bool = False,
    include_archives: bool = False,
) -> list[SweepAction]:
    """The actions of a sweep: pure, from the threads' activity.

    A thread is swept when its newest checkpoint is older than ``cutoff``; one without a
    readable timestamp is never swept. ``delete`` takes the thread's context archives
    along; ``keep_latest`` is planned only for threads with more than one checkpoint per
    namespace. Archive threads are swept on their own age only with
    ``include_archives`` (otherwise they live and die with their thread).

    Example:
        >>> from datetime import datetime, timezone
        >>> threads = [
        ...     ThreadActivity("old", "2026-01-01T00:00:00+00:00", 5, 1),
        ...     ThreadActivity("old.ctx.c_20260101_0a1b2c", "2026-01-01T00:00:00+00:00", 3, 1),
        ...     ThreadActivity("new", "2026-06-01T00:00:00+00:00", 9, 1),
        ... ]
        >>> cutoff = datetime(2026, 3, 1, tzinfo=timezone.utc)
        >>> [(a.thread_id, a.action, a.archives) for a in plan_sweep(threads, cutoff=cutoff)]
        [('old', 'delete', ('old.ctx.c_20260101_0a1b2c',))]
        >>> [(a.thread_id, a.checkpoints_after) for a in plan_sweep(
        ...     threads, cutoff=cutoff, keep_latest=True)]
        [('old', 1)]
    """
    if cutoff.tzinfo is None:
        cutoff = cutoff.replace(tzinfo=timezone.utc)
    ids = [t.thread_id for t in threads]
    deleted: set[str] = set()
    actions: list[SweepAction] = []
    never = datetime.max.replace(tzinfo=timezone.utc)
    for thread in sorted(threads, key=lambda t: (_when(t.last_activity) or never, t.thread_id)):
        if thread.thread_id in deleted:
            continue  # an archive already going with its thread
        if archive_owner(thread.thread_id) is not None and not include_archives:
            continue
        when = _when(thread.last_activity)
        if when is None or when >= cutoff:
            continue
        if keep_latest:
            kept = thread.namespaces if thread.kept is None else thread.kept
            if thread.checkpoints > kept:
                actions.append(
                    SweepAction(
                        thread.thread_id,
                        "keep_latest",
                        thread.last_activity,
                        thread.checkpoints,
                        kept,
                    )
                )
            continue
        archives = tuple(a for a in archive_threads_of(thread.thread_id, ids) if a not in deleted)
        deleted.update((thread.thread_id, *archives))
        actions.append(
            SweepAction(
                thread.thread_id,
                "delete",
                thread.last_activity,
                thread.checkpoints,
                0,
                archives,
            )
        )
    # an archive planned on its own age before its thread was: it goes with the thread
    return [a for a in actions if not (a.action == "delete" and _inside(a, actions))]


def _inside(action: SweepAction, actions: Iterable[SweepAction]) -> bool:
    return any(action.thread_id in other.archives for other in actions if other is not action)


def _thread_ids(saver: LogSaver) -> list[str]:
    """Every thread, archives included (whether or not `list_threads` hides them)."""
    if "include_archives" in inspect.signature(saver.list_threads).parameters:
        return list(saver.list_threads(include_archives=True))
    return list(saver.list_threads())


def thread_activity(saver: LogSaver, thread_id: str) -> ThreadActivity:
    """A thread's activity, from `LogSaver.checkpoint_infos` (no state is decoded)."""
    infos = saver.checkpoint_infos(thread_id)
    namespaces = len({i.checkpoint_ns for i in infos})
    kept_by = getattr(saver, "kept_by_keep_latest", None)
    return ThreadActivity(
        thread_id=thread_id,
        last_activity=max((i.ts for i in infos), default=""),
        checkpoints=len(infos),
        namespaces=namespaces,
        kept=kept_by(thread_id) if callable(kept_by) and len(infos) > namespaces else None,
    )


def sweep(
    saver: LogSaver,
    *,
    older_than: str | timedelta,
    keep_latest: bool = False,
    dry_run: bool = False,
    include_archives: bool = False,
    threads: Iterable[str] | None = None,
    now: datetime | None = None,
) -> SweepReport:
    """Delete (or, with ``keep_latest``, trim) the threads idle for longer than ``older_than``.

    Args:
        saver: Any `LogSaver` (`JsonlSaver`, `RedisLogSaver`).
        older_than: The idle time, a `timedelta` or ``"30d"``-style text (`parse_age`).
        keep_latest: Keep each swept thread's latest checkpoint per namespace and its
            pending writes (interrupts, finished tool calls) instead of deleting it.
        dry_run: Only report what would be done.
        include_archives: Also sweep context archives on their own age (by default they
            are deleted with their thread and otherwise left alone).
        threads: Only consider these threads (default: every thread).
        now: The time the ages are measured from (default: the current time).

    Returns:
        The cutoff and the actions taken (or planned), oldest thread first.

    Raises:
        ValueError: an unreadable ``older_than``.
        TypeError: ``threads`` is one string, not a list of ids.
    """
    age = parse_age(older_than)
    cutoff = (now or datetime.now(timezone.utc)) - age
    if cutoff.tzinfo is None:
        cutoff = cutoff.replace(tzinfo=timezone.utc)
    every = _thread_ids(saver)
    if threads is None:
        candidates = every
    else:  # a string is one id, not its letters; a generator is read once
        wanted = set(id_list("threads", threads))
        candidates = [t for t in every if t in wanted]
    if threads is not None:  # a named thread's archives are judged with it
        named = set(candidates)
        candidates += [t for t in every if t not in named and archive_owner(t) in named]
    report = SweepReport(
        cutoff=cutoff.isoformat(),
        strategy="keep_latest" if keep_latest else "delete",
        dry_run=dry_run,
    )
    activity: list[ThreadActivity] = []
    for thread_id in candidates:
        try:
            activity.append(thread_activity(saver, thread_id))
        except LangGraphCtxError as exc:
            report.errors[thread_id] = str(exc)
    report.threads_seen = len(activity)
    report.actions = plan_sweep(
        activity, cutoff=cutoff, keep_latest=keep_latest, include_archives=include_archives
    )
    if dry_run:
        return report
    from langgraph_ctx.context.archive.store import delete_archives

    for action in report.actions:
        if action.action == "keep_latest":
            saver.prune([action.thread_id], strategy="keep_latest")
            continue
        saver.delete_thread(action.thread_id)
        # its archives, deepest first, and their indexes (`<thread>.contexts.json`)
        delete_archives(saver, action.thread_id, thread_ids=every)
    return report
