"""What a cold open leaves the garbage collector: on, its own objects old, nothing else.

`_collector_paused` turns cyclic collection off while a cold open builds its index and
messages, then moves what was built to the oldest generation (`_promoted`), so that no
young-generation collection walks thousands of long-lived objects right after. An
application that froze objects itself (``gc.freeze``, before forking workers) keeps them
frozen: then nothing is moved.
"""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

from langgraph_ctx import JsonlSaver
from tests.test_cold_open import chat

CONFIG = {"configurable": {"thread_id": "t"}}


def _cold_messages(root: Path) -> list:
    tup = JsonlSaver(root).get_tuple(CONFIG)
    assert tup is not None
    return tup.checkpoint["channel_values"]["messages"]


def test_a_cold_open_leaves_its_objects_old_and_the_collector_on(tmp_path: Path) -> None:
    chat(JsonlSaver(tmp_path), "t", 40)
    gc.collect()
    assert gc.isenabled()
    messages = _cold_messages(tmp_path)
    assert len(messages) == 80 and gc.isenabled()
    young = {id(o) for o in gc.get_objects(generation=0)} | {
        id(o) for o in gc.get_objects(generation=1)
    }
    assert not any(id(m) in young for m in messages)
    old = {id(o) for o in gc.get_objects(generation=2)}
    assert all(id(m) in old for m in messages)

    class Node:
        pass

    # The collector still collects: a cycle made now is freed by the next collection.
    a, b = Node(), Node()
    a.other, b.other = b, a  # type: ignore[attr-defined]
    gone = weakref.ref(a)
    del a, b
    gc.collect()
    assert gone() is None


def test_an_applications_frozen_objects_stay_frozen(tmp_path: Path) -> None:
    chat(JsonlSaver(tmp_path), "t", 40)
    gc.collect()
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        assert frozen > 0
        assert len(_cold_messages(tmp_path)) == 80
        assert gc.get_freeze_count() == frozen and gc.isenabled()
    finally:
        gc.unfreeze()
