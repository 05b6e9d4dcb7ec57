"""What a thread's index keeps in memory: bounded caches (issue #16, item 2: RSS)."""

from __future__ import annotations

import gc
import threading
from pathlib import Path

from langgraph_ctx import JsonlSaver
from langgraph_ctx.saver import _index
from langgraph_ctx.saver._index import _LRU, _collector_paused
from tests.test_cold_open import chat


def test_a_weighted_lru_bounds_what_it_holds_in_all() -> None:
    lru = _LRU(100, len)
    for i in range(10):
        lru.put(i, list(range(30)))
    assert lru.weight == sum(len(v) for v in lru.values()) <= 100
    assert list(lru) == [7, 8, 9]  # the least recently used went first
    lru.put(99, list(range(500)))  # one entry over the bound alone stays, by itself
    assert list(lru) == [99] and lru.weight == 500
    assert lru.pop(99) is not None and lru.weight == 0
    lru.put(1, [1, 2], trim=False)
    lru.put(2, list(range(200)), trim=False)  # held until the next trim
    assert len(lru) == 2
    lru.trim()
    assert list(lru) == [2]


def test_the_collector_is_paused_only_inside_the_block() -> None:
    assert gc.isenabled()
    with _collector_paused():
        assert not gc.isenabled()
        with _collector_paused():  # re-entrant
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()  # an application that turned it off keeps it off
    try:
        with _collector_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_overlapping_pauses_in_two_threads_end_with_the_collector_on() -> None:
    inside = threading.Barrier(2)
    leave = threading.Event()

    def hold() -> None:
        with _collector_paused():
            inside.wait()
            leave.wait()

    other = threading.Thread(target=hold)
    other.start()
    with _collector_paused():
        inside.wait()
    assert not gc.isenabled()  # the other thread's block is still open
    leave.set()
    other.join()
    assert gc.isenabled()


def test_a_long_thread_keeps_bounded_caches(tmp_path: Path) -> None:
    """After a 150-turn chat (over 1,000 lines) the writer's index holds at most
    `PARSED_LINES` parsed lines and `REF_ORDINALS` memoized ordinals, and a fresh
    process reading the head keeps no parsed message line at all."""
    saver = JsonlSaver(tmp_path)
    chat(saver, "t", 150)
    index = saver._indexes["t"]
    assert index.lines > 1000
    assert len(index.parsed) <= _index.PARSED_LINES
    assert index.refs.weight <= _index.REF_ORDINALS
    cold = JsonlSaver(tmp_path)
    tup = cold.get_tuple({"configurable": {"thread_id": "t"}})
    assert len(tup.checkpoint["channel_values"]["messages"]) == 300
    cold_index = cold._indexes["t"]
    message_lines = set(cold_index.msg_lines.values())
    assert not message_lines & set(cold_index.parsed)
