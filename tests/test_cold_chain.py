"""Long snapshot chains: a cold open builds the newest snapshot's message lists once
from the parts the chain holds (`_fold_chain`), exactly as folding each snapshot onto
the one before it did, with the same checks (issue #16, item 2)."""

from __future__ import annotations

import itertools
import random
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage
from langgraph.graph import MessagesState

from langgraph_ctx import JsonlSaver
from langgraph_ctx.codec.lines import (
    GAPS,
    Snapshot,
    _gaps,
    _ungaps,
    dumps_line,
    loads_line,
    parse_snapshot_line,
    snapshot_line,
)
from langgraph_ctx.errors import CodecError, CorruptLineWarning
from langgraph_ctx.saver import _batch, _index
from tests.graphs import single_node
from tests.test_cold_open import snap_lines, tuple_view


def folded(chain: list[Snapshot]) -> list[tuple[int, str, list[int]]]:
    """The lists as folding snapshot by snapshot gives them (the reference)."""
    index = _index._Index(where="t", reader=None, serde=None)  # type: ignore[arg-type]
    lists = None
    for snap in reversed(chain):
        index._fold_snapshot(snap, lists)
        lists = index.snap_lists
    return index.snap_lists


def snap(line: int, lists: list[tuple[int, str, int, int, list[int]]]) -> Snapshot:
    return Snapshot(line, None, 0, [], [], lists)


def random_chain(rng: random.Random, length: int) -> list[Snapshot]:
    """Snapshots whose lists keep a random start of a random list of the one before
    (or none), newest first, as `_fold_chain` takes them."""
    chain: list[Snapshot] = []
    sizes: list[int] = []
    for level in range(length):
        lists = []
        for i in range(rng.randint(1, 4)):
            refs = [rng.randrange(1000) for _ in range(rng.randint(0, 6))]
            if sizes and rng.random() < 0.8:
                base = rng.randrange(len(sizes))
                keep = rng.randint(0, sizes[base])
            else:
                base, keep = -1, rng.randint(0, 3)  # keep means nothing without a base
            lists.append((10 * level + i + 1, f"ch{i}", base, keep, refs))
        sizes = [(k if b >= 0 else 0) + len(r) for _, _, b, k, r in lists]
        chain.insert(0, snap(10 * level + 9, lists))
    return chain


@pytest.mark.parametrize("seed", range(40))
def test_fold_chain_equals_folding_each_snapshot(seed: int) -> None:
    chain = random_chain(random.Random(seed), random.Random(seed).randint(1, 30))
    got = _index._fold_chain(chain)
    assert got == folded(chain)
    # Lists of their own: nothing shared with the snapshots' parts or with each other.
    parts = {id(refs) for s in chain for *_, refs in s.lists}
    assert not parts & {id(refs) for *_, refs in got}
    assert len({id(refs) for *_, refs in got}) == len(got)


@pytest.mark.parametrize(
    ("older", "newer", "message"),
    [
        ([(1, "m", 0, 0, [1])], [(2, "m", 0, 1, [2])], "list 0 of the previous"),  # oldest
        ([(1, "m", -1, 0, [1, 2])], [(2, "m", 1, 1, [3])], "list 1 of the previous"),
        ([(1, "m", -1, 0, [1, 2])], [(2, "m", 0, 3, [3])], "'keep' is longer"),
    ],
)
def test_fold_chain_refuses_what_folding_refuses(
    older: list[Any], newer: list[Any], message: str
) -> None:
    chain = [snap(20, newer), snap(10, older)]
    with pytest.raises(CodecError, match=message):
        _index._fold_chain(chain)
    with pytest.raises(CodecError, match=message):
        folded(chain)


def test_an_unreached_list_deep_in_the_chain_is_still_checked() -> None:
    """A list the newest snapshot does not build on is checked all the same."""
    oldest = snap(10, [(1, "m", -1, 0, [1, 2])])
    middle = snap(20, [(2, "m", 0, 2, [3]), (3, "x", 0, 5, [])])  # keep 5 of 2
    newest = snap(30, [(4, "m", 0, 3, [4])])
    with pytest.raises(CodecError, match="'keep' is longer"):
        _index._fold_chain([newest, middle, oldest])


def trimming_graph(saver: Any) -> Any:
    """A chat whose node now and then removes early messages: lists that keep only a
    start of the previous snapshot's list, not all of it."""
    rng = random.Random(5)

    def chatbot(state: MessagesState) -> dict:
        out: list[Any] = [AIMessage(f"reply {len(state['messages'])} " + "w " * rng.randint(1, 9))]
        if len(state["messages"]) > 12 and rng.random() < 0.3:
            out.append(RemoveMessage(id=str(state["messages"][-3].id)))
        return {"messages": out}

    return single_node(saver, chatbot)


CONFIG: Any = {"configurable": {"thread_id": "t"}}


def chatted(tmp_path: Path, turns: int) -> tuple[JsonlSaver, Path, list[bytes]]:
    """``turns`` turns of `trimming_graph` on a saver of ``tmp_path``: the saver, the
    thread's file and its lines."""
    writer = JsonlSaver(tmp_path)
    graph = trimming_graph(writer)
    for i in range(turns):
        graph.invoke({"messages": [HumanMessage(f"turn {i}")]}, CONFIG)
    path = Path(writer.path("t"))
    return writer, path, path.read_bytes().split(b"\n")[:-1]


def opened_at_snapshot(tmp_path: Path, snap: int) -> tuple[JsonlSaver, Any]:
    """A fresh saver on ``tmp_path`` and its first `get_tuple`, read from the snapshot on
    line ``snap`` without a warning."""
    cold = JsonlSaver(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CorruptLineWarning)
        got = cold.get_tuple(CONFIG)
    index = cold._indexes["t"]
    assert index.partial and index.snap_line == snap
    return cold, got


def rewritten(path: Path, lines: list[bytes], n: int, change: Callable[[Any], Any]) -> None:
    """Line ``n`` parsed, changed in place by ``change``, sealed again, and the file
    written with it."""
    obj = loads_line(lines[n - 1])
    change(obj)
    lines[n - 1] = dumps_line(obj)[:-1]
    path.write_bytes(b"".join(raw + b"\n" for raw in lines))


def test_a_long_chain_reads_as_the_warm_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Snapshots every few lines: a chain of dozens, lists trimmed and forked. A fresh
    saver opens from the last snapshot, its lists equal a full scan's, and every read
    equals the writer's."""
    monkeypatch.setattr(_batch, "SNAPSHOT_EVERY", 7)
    writer, _, lines = chatted(tmp_path, 60)
    snaps = snap_lines(lines)
    assert len(snaps) >= 30
    # The chain really is one chain of them all.
    assert loads_line(lines[snaps[-1] - 1])["prev"] == snaps[-2]

    cold, got = opened_at_snapshot(tmp_path, snaps[-1])
    index = cold._indexes["t"]
    full = _index._Index(where="t", reader=None, serde=writer.serde)
    full.feed(1, lines, skip_corrupt=False, snapshots=False)
    assert index.snap_lists == full.snap_lists
    trimmed, sizes = 0, list[int]()
    for n in snaps:  # lists that keep only a start of their base: the trims were written
        lists = parse_snapshot_line(loads_line(lines[n - 1]), n).lists
        trimmed += sum(base >= 0 and keep < sizes[base] for _, _, base, keep, _ in lists)
        sizes = [(keep if base >= 0 else 0) + len(refs) for _, _, base, keep, refs in lists]
    assert trimmed
    assert tuple_view(got) == tuple_view(writer.get_tuple(CONFIG))
    assert [tuple_view(t) for t in cold.list(CONFIG)] == [
        tuple_view(t) for t in writer.list(CONFIG)
    ]


def test_a_bad_snapshot_deep_in_a_long_chain_is_passed_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A snapshot in the middle of the chain whose list keeps more than its base holds:
    the last snapshot is passed over with a warning, the whole log is read instead."""
    monkeypatch.setattr(_batch, "SNAPSHOT_EVERY", 7)
    writer, path, lines = chatted(tmp_path, 30)
    expected = tuple_view(writer.get_tuple(CONFIG))
    snaps = snap_lines(lines)
    middle = snaps[len(snaps) // 2]
    # keeps more than any list holds
    rewritten(path, lines, middle, lambda obj: obj["lists"][0].__setitem__(3, 10**6))
    cold = JsonlSaver(tmp_path)
    with pytest.warns(CorruptLineWarning, match=f":{snaps[-1]}: snapshot: 'keep'"):
        got = cold.get_tuple(CONFIG)
    assert not cold._indexes["t"].partial
    assert tuple_view(got) == expected


# ------------------------------------------------- snapshots written before the gaps


def test_gaps_round_trip() -> None:
    for values in ([], [5], [16006, 16009, 16011], [388, 387, 390], [None], [7, None, 9, None]):
        assert _ungaps(_gaps(values)) == values
    assert snapshot_line(3, 0, [5, None, 9], [], [(4, "m", -1, 0, [2, 1])])["msgs"] == [
        0, GAPS, [5, None, 4]
    ]


def written_plain(obj: dict) -> dict:
    """A ``snap`` line as snapshots were written before the gaps: the numbers."""
    msgs = obj["msgs"]
    obj["msgs"] = [msgs[0], _ungaps(msgs[2])]
    obj["lists"] = [[*x[:4], _ungaps(x[5])] for x in obj["lists"]]
    return obj


@pytest.mark.parametrize("which", ["all", "older", "newest"])
def test_snapshots_written_as_numbers_still_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, which: str
) -> None:
    """A log whose snapshots (all of them, or some of the chain) hold the numbers, as
    logs written before the gaps do: a cold open reads from the last one without a
    warning, as the writer reads, `verify` finds them exact, and writing goes on
    (the next snapshot, as gaps, builds on them)."""
    from langgraph_ctx.cli.verify import verify_file

    monkeypatch.setattr(_batch, "SNAPSHOT_EVERY", 9)
    monkeypatch.setattr(_index, "SNAPSHOT_EVERY", 9)  # a log this short opens from one
    writer, path, lines = chatted(tmp_path, 25)
    expected = tuple_view(writer.get_tuple(CONFIG))  # the writer is not used after
    snaps = snap_lines(lines)
    assert len(snaps) >= 6
    rewrite = {"all": snaps, "older": snaps[:-1], "newest": snaps[-1:]}[which]
    for n in rewrite:
        plain = written_plain(loads_line(lines[n - 1]))
        assert all(type(m) is int for m in plain["msgs"][1])
        lines[n - 1] = dumps_line(plain)[:-1]
    path.write_bytes(b"".join(raw + b"\n" for raw in lines))
    assert verify_file(path).problems == []

    cold, got = opened_at_snapshot(tmp_path, snaps[-1])
    assert tuple_view(got) == expected
    with warnings.catch_warnings():
        warnings.simplefilter("error", CorruptLineWarning)
        more = trimming_graph(cold)
        for i in range(25, 40):
            more.invoke({"messages": [HumanMessage(f"turn {i}")]}, CONFIG)
        again = JsonlSaver(tmp_path).get_tuple(CONFIG)
    assert tuple_view(again) == tuple_view(cold.get_tuple(CONFIG))
    assert len(snap_lines(path.read_bytes().split(b"\n")[:-1])) > len(snaps)
    assert verify_file(path).problems == []


@pytest.mark.parametrize(
    "change",
    [
        lambda obj: obj["msgs"].__setitem__(2, "3,4"),
        lambda obj: obj["msgs"][2].__setitem__(0, 1.5),
        lambda obj: obj["msgs"][2].__setitem__(0, -10**6),  # a line before the first
        lambda obj: obj["lists"][0].__setitem__(5, [1, "x"]),
        lambda obj: obj["lists"][0].__setitem__(5, [-10**6]),  # a negative ordinal
    ],
    ids=["msgs-not-a-list", "msgs-float", "msgs-below-1", "list-str", "list-negative"],
)
def test_malformed_gaps_pass_the_snapshot_over(tmp_path: Path, change: Any) -> None:
    writer, path, lines = chatted(tmp_path, 60)
    expected = tuple_view(writer.get_tuple(CONFIG))
    n = snap_lines(lines)[-1]
    rewritten(path, lines, n, change)
    cold = JsonlSaver(tmp_path)
    with pytest.warns(CorruptLineWarning, match=f":{n}: snapshot"):
        got = cold.get_tuple(CONFIG)
    assert tuple_view(got) == expected
    assert not cold._indexes["t"].partial


def test_snapshots_come_half_as_often_in_a_long_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every ``SNAPSHOT_EVERY`` lines, every twice that once the log is 32 times as long:
    the chain a cold open parses grows half as fast there (`snapshot_due`)."""
    monkeypatch.setattr(_batch, "SNAPSHOT_EVERY", 5)
    snaps = snap_lines(chatted(tmp_path, 70)[2])
    spacing = [(b, b - a) for a, b in itertools.pairwise(snaps)]
    short = [gap for line, gap in spacing if line <= 160]
    long = [gap for line, gap in spacing if line - gap > 161]
    assert short and long
    assert min(short) >= 5 and sorted(short)[len(short) // 2] < 10
    assert min(long) >= 10
