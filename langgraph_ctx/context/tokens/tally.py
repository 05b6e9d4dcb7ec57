"""`Tally`: the counts of one message list, and how a later list reuses them.

From step to step a thread's message list only grows, and the messages it held before
come back either as the very same objects (a graph run; a checkpointer that serves its
head from memory, as `JsonlSaver` does) or as fresh copies (a checkpointer that decodes
the state again, as `SqliteSaver` does). Either way a step should cost its new messages.
`Tally.prefix` finds how many leading messages are as they were when counted, with a few
C-level comparisons per message (no hashing, no encoding, no Python loop over the
history), and catches a message edited in place:

* a field rebound (`message.content = ...`, `message.name = ...`): each message's
  `__dict__` is compared with a shallow copy taken when it was counted;
* a container changed in place (`message.tool_calls[0]["args"]["q"] = ...`,
  `message.additional_kwargs["name"] = ...`, a block of a list `content`): the
  containers a count depends on (`PROBED`) are compared with deep copies taken then.

A leaf inside those containers that is neither a dict, a list nor a tuple (an object of
the application's own class in tool call arguments) is compared by its own `==`: a change
inside it that keeps it equal to itself is not seen, as in any cache keyed by value.

A tally that a longer list continues is extended in place (`Columns` are shared, each
tally reads its own length of them), so a step copies nothing of the history either.
"""

from __future__ import annotations

import heapq
import operator
import threading
from bisect import bisect_left
from collections.abc import Callable, Sequence
from itertools import compress, count
from typing import Any, Final

from langchain_core.messages import BaseMessage

__all__ = ["GROUP_MASK", "MARKS", "PROBED", "Columns", "Tally"]

GROUP_MASK: Final = 0xFF
"""The low bits of a class: the group `Tally.total` sums by."""

MARKS: Final[dict[str, int]] = {
    "ai": 1 << 8,
    "usage": 1 << 9,
    "not_system": 1 << 10,
    "odd": 1 << 11,
}
"""High bits `classify` may set to have `Tally.last(mark)` find the last such message."""

PROBED: Final[tuple[str, ...]] = (
    "content",
    "additional_kwargs",
    "tool_calls",
    "invalid_tool_calls",
    "usage_metadata",
)
"""Fields whose containers a count (or `compute_usage`'s classes) reads: compared by
value with deep copies, so that an edit inside them is seen on the very same object.
(`response_metadata`, `artifact`, ... do not change a count: only rebinding them is seen.)"""

_GETTERS: Final[dict[str, operator.itemgetter[Any]]] = {k: operator.itemgetter(k) for k in PROBED}
_CONTAINERS: Final = (dict, list)


def _copy_tree(value: Any) -> Any:
    """`value` with its own dicts, lists and tuples (leaves by reference)."""
    if isinstance(value, dict):
        return {k: _copy_tree(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy_tree(v) for v in value]
    if type(value) is tuple:
        return tuple([_copy_tree(v) for v in value])
    return value


def _common_prefix(a: Sequence[Any], b: Sequence[Any], n: int) -> int:
    """Length of the common prefix of `a[:n]` and `b[:n]`, compared in C.

    Objects compare by identity first, so the same objects cost a pointer comparison each;
    fresh copies compare by value. A value whose `==` raises (an array in an `artifact`)
    ends the prefix there.
    """
    if n <= 0:
        return 0
    try:
        if a[:n] == b[:n]:
            return n
        return next(compress(count(), map(operator.ne, a[:n], b[:n])), n)
    except Exception:
        for i in range(n):
            try:
                if a[i] != b[i]:
                    return i
            except Exception:
                return i
        return n


_values = dict.values


def _same_fields(
    fields: Sequence[dict[str, Any]], states: Sequence[tuple[Any, ...]], n: int
) -> int:
    """Length of the common prefix of `fields[:n]` (`__dict__`s) and `states[:n]` (their
    values when counted), compared in C one message at a time: each message's values are
    made a tuple, compared and freed, so nothing builds up for the garbage collector and
    only the compact tuples of `states` are read besides the messages themselves."""
    if n <= 0:
        return 0
    try:
        if all(map(operator.eq, map(tuple, map(_values, fields[:n])), states[:n])):
            return n
        return next(
            compress(count(), map(operator.ne, map(tuple, map(_values, fields[:n])), states[:n])),
            n,
        )
    except Exception:
        for i in range(n):
            try:
                if tuple(fields[i].values()) != states[i]:
                    return i
            except Exception:
                return i
        return n


class Columns:
    """Per-message data of a list, shared by the tallies of its successive lengths.

    Only ever appended to, except `states`, whose entries may be replaced by equal
    copies (`Tally.extended`); a tally reads the first `len(tally)` entries.
    """

    __slots__ = (
        "classes",
        "counts",
        "empty_at",
        "probe_at",
        "probe_was",
        "states",
        "sums",
        "types",
    )

    def __init__(self) -> None:
        self.types: list[type] = []
        """Each message's class."""
        self.states: list[tuple[Any, ...]] = []
        """Each message's field values (its `__dict__`'s, in order) when it was counted
        (or last synced)."""
        self.probe_at: dict[str, list[int]] = {}
        """Per `PROBED` field, the indexes of the messages where it held a dict or list
        with something in it."""
        self.probe_was: dict[str, list[Any]] = {}
        """Deep copies of those dicts and lists when their messages were counted."""
        self.empty_at: dict[str, list[int]] = {}
        """Per `PROBED` field, the indexes of the messages where it held an empty dict or
        list (most `additional_kwargs` and `tool_calls`): only their truth is checked."""
        self.counts: list[int] = []
        self.classes: list[int] = []
        self.sums: dict[int, list[int]] = {}
        """Per group, the tokens of the messages of that group before each index."""

    def __len__(self) -> int:
        return len(self.counts)

    def copy(self, k: int) -> Columns:
        """The first `k` messages' data, in new lists."""
        out = Columns()
        out.types = self.types[:k]
        out.states = self.states[:k]
        for key, at in self.probe_at.items():
            m = bisect_left(at, k)
            out.probe_at[key] = at[:m]
            out.probe_was[key] = self.probe_was[key][:m]
        for key, at in self.empty_at.items():
            out.empty_at[key] = at[: bisect_left(at, k)]
        out.counts = self.counts[:k]
        out.classes = self.classes[:k]
        out.sums = {group: sums[: k + 1] for group, sums in self.sums.items()}
        return out

    def append(
        self,
        types: Sequence[type],
        fields: Sequence[dict[str, Any]],
        counts: Sequence[int],
        classes: Sequence[int],
    ) -> None:
        """Add messages (their classes, fields, counts and `classify` classes)."""
        k = len(self.counts)
        self.types.extend(types)
        self.states.extend([tuple(f.values()) for f in fields])
        for i, f in enumerate(fields, k):
            for key in PROBED:
                value = f.get(key)
                if not isinstance(value, _CONTAINERS):
                    continue
                if value:
                    self.probe_at.setdefault(key, []).append(i)
                    self.probe_was.setdefault(key, []).append(_copy_tree(value))
                else:
                    self.empty_at.setdefault(key, []).append(i)
        self.counts.extend(counts)
        self.classes.extend(classes)
        groups = [c & GROUP_MASK for c in classes]
        for group in set(groups):
            if group not in self.sums:
                self.sums[group] = [0] * (k + 1)
        for group, sums in self.sums.items():
            running = sums[-1]
            for g, tokens in zip(groups, counts, strict=True):
                if g == group:
                    running += tokens
                sums.append(running)


class Tally:
    """The counts of one message list, and sums over them that take O(1) to read.

    Built by `MessageTokenCounter.tally`; a list that continues one counted before reuses
    its prefix (`prefix`), so extending it costs only the new messages. Classes come from
    the caller's `classify(message) -> int`: a group in the low bits (`total` sums by it)
    and `MARKS` in the high ones (`last` finds them).
    """

    __slots__ = ("classify", "columns", "ids", "last_of", "n", "odd", "synced", "top")

    def __init__(self, classify: Callable[[BaseMessage], int]) -> None:
        self.classify = classify
        self.columns = Columns()
        self.n = 0
        """How many messages of `columns` this tally is."""
        self.ids: list[int] = []
        """`id()` of each message's `__dict__` when this tally was made: which objects
        the next list shares with this one (a hint only: see `extended`)."""
        self.synced = 0
        """`states[:synced]` were copied from the objects `ids` names: while those objects
        come back, their fields compare with the copies by identity (a pointer each)."""
        self.top: list[tuple[int, int]] = []
        """The three largest (tokens, index), largest first (ties: later index first)."""
        self.last_of: dict[str, int] = {}
        """Index of the last message with each mark `classify` sets in its high bits."""
        self.odd: list[int] = []
        """Indexes of the messages marked `odd`."""

    def __len__(self) -> int:
        return self.n

    @property
    def counts(self) -> list[int]:
        """Each message's tokens (a new list)."""
        return self.columns.counts[: self.n]

    def count_at(self, i: int) -> int:
        """Tokens of message `i`."""
        return self.columns.counts[i]

    def class_at(self, i: int) -> int:
        """`classify`'s class of message `i`."""
        return self.columns.classes[i]

    def total(self, group: int, start: int, end: int) -> int:
        """Tokens of the messages of `group` (a class's low bits) in `[start, end)`."""
        sums = self.columns.sums.get(group)
        return 0 if sums is None else sums[end] - sums[start]

    def last(self, mark: str) -> int | None:
        """Index of the last message with `mark` (see `MARKS`), or None."""
        return self.last_of.get(mark)

    def current(self, fields: Sequence[dict[str, Any]]) -> bool:
        """Whether `fields` are the very objects this tally was made from, all synced."""
        return self.synced == len(self.ids) == len(fields) and list(map(id, fields)) == self.ids

    def prefix(self, types: Sequence[type], fields: Sequence[dict[str, Any]]) -> int:
        """How many leading messages are as they were when this tally counted them.

        `types` and `fields` are the messages' classes and `__dict__`s. The same
        objects, unedited, cost a pointer comparison per field; fresh copies compare by
        value; an edit in place (a field rebound or a `PROBED` container changed) ends
        the prefix at the edited message.
        """
        cols = self.columns
        k = _common_prefix(types, cols.types, min(len(types), self.n))
        k = _same_fields(fields, cols.states, k)
        if not k:
            return 0
        # The fields compared equal: the same containers, or equal ones. Their contents
        # now against the copies taken when counted (one list per field, no new objects:
        # a step that allocates one per message pays for garbage collections); those
        # that were empty need only be empty still. (The dicts are copied first: another
        # thread may extend these columns meanwhile.)
        for key, at in list(cols.empty_at.items()):
            m = bisect_left(at, k)
            if not m:
                continue
            try:
                live = map(_GETTERS[key], map(fields.__getitem__, at[:m]))
                filled = next(compress(at[:m], live))
            except StopIteration:
                continue
            except Exception:  # a field deleted under our feet: recount from the first
                return at[0]
            k = filled
        for key, at in list(cols.probe_at.items()):
            m = bisect_left(at, k)
            if not m:
                continue
            try:
                now = list(map(_GETTERS[key], map(fields.__getitem__, at[:m])))
            except Exception:  # a field deleted under our feet: recount from the first
                return at[0]
            j = _common_prefix(now, cols.probe_was[key], m)
            if j < m:
                k = at[j]
        return k

    def extended(
        self,
        k: int,
        types: list[type],
        fields: list[dict[str, Any]],
        messages: list[BaseMessage],
        counts: list[int],
        lock: threading.Lock,
    ) -> Tally:
        """A new tally: this one's first `k` messages, then `messages[k:]` with `counts`.

        `types` and `fields` are those of all `messages`; the first `k` are as this
        tally counted them (`prefix`). When the new tally continues this one whole and
        nothing else did, it shares this one's columns (appended to under `lock`);
        otherwise it copies the first `k` messages' data.

        Fresh copies of the counted messages compare by value, string by string. When
        the same copies come back a second time (a checkpointer that decodes a state
        once, then serves it from memory), their fields are copied into `states`, so
        that from then on they compare by identity. That takes one step's copies, once:
        a checkpointer that hands out new copies every step is never copied from. Which
        objects came back is read from `ids`, a hint: a copied state equals the old one
        anyway, since the first `k` messages compared equal.
        """
        out = Tally(self.classify)
        ids = list(map(id, fields))
        again = _common_prefix(ids, self.ids, k)  # the objects of last time, unchanged
        start = min(self.synced, again)
        resynced = [tuple(f.values()) for f in fields[start:again]] if start < again else None
        new_classes = [self.classify(m) for m in messages[k:]]
        with lock:
            cols = self.columns
            if k != self.n or len(cols) != self.n:
                cols = cols.copy(k)
            if resynced is not None:  # equal values, so other readers see no change
                cols.states[start:again] = resynced
            cols.append(types[k:], fields[k:], counts, new_classes)
        out.columns = cols
        out.n = len(messages)
        out.ids = ids
        out.synced = out.n if again == k else again
        if k == self.n:
            out.top = list(self.top)
            out.last_of = dict(self.last_of)
            out.odd = list(self.odd)
        else:  # a shorter prefix: recompute what it summarizes
            classes = cols.classes
            out.top = heapq.nlargest(3, zip(cols.counts[:k], range(k), strict=True))
            for i in range(k - 1, -1, -1):
                for mark, bit in MARKS.items():
                    if mark not in out.last_of and classes[i] & bit:
                        out.last_of[mark] = i
            out.odd = [i for i in self.odd if i < k]
        if counts:
            out.top = heapq.nlargest(
                3, [*out.top, *zip(counts, range(k, k + len(counts)), strict=True)]
            )
        odd = MARKS["odd"]
        for i, c in enumerate(new_classes, k):
            for mark, bit in MARKS.items():
                if c & bit:
                    out.last_of[mark] = i
            if c & odd:
                out.odd.append(i)
        return out
