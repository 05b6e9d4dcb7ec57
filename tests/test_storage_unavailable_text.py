"""`StorageUnavailableError` says what was being done, and only what may have happened.

It said "a write may or may not have been applied" for every failure, also for reads,
listings and the server's start-up ping, which write nothing. No server listens on the
port these tests use: the client's first connection is refused.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable

import pytest

from langgraph_ctx.errors import StorageUnavailableError
from langgraph_ctx.saver.redis import RedisLogSaver
from langgraph_ctx.server import redis_checkpointer

from .redis_server import free_port

MAYBE = "may or may not have been applied"
NOTHING = "Nothing was written"


@pytest.fixture
def down() -> RedisLogSaver:
    return RedisLogSaver.from_url(f"redis://127.0.0.1:{free_port()}/0")


def test_a_read_says_nothing_was_written(down: RedisLogSaver) -> None:
    for read in (
        lambda: down.get_tuple({"configurable": {"thread_id": "t"}}),
        lambda: list(down.list_threads()),
        lambda: down.storage.exists("t"),
    ):
        with pytest.raises(StorageUnavailableError) as err:
            read()
        assert err.value.write is False
        assert NOTHING in str(err.value) and MAYBE not in str(err.value), str(err.value)
    assert "while reading ctx:langgraph:thread:{t}. Nothing was written; retry" in str(
        _raised(lambda: down.get_tuple({"configurable": {"thread_id": "t"}}))
    )


def test_a_write_still_says_it_may_have_been_applied(down: RedisLogSaver) -> None:
    err = _raised(lambda: down.storage.append("t", [b'{"t":"x"}']))
    assert err.write is True
    assert "while appending to ctx:langgraph:thread:{t}." in str(err)
    assert MAYBE in str(err) and NOTHING not in str(err)


async def test_the_server_start_up_ping_says_nothing_was_written() -> None:
    with pytest.raises(StorageUnavailableError) as err:
        async with redis_checkpointer(f"redis://127.0.0.1:{free_port()}/0"):
            pass
    assert err.value.write is False
    assert "while starting the LangGraph server's checkpointer. Nothing was written" in str(
        err.value
    )


def test_the_kind_survives_pickling() -> None:
    for write in (True, False):
        err = StorageUnavailableError("redis://h:1/0", "reading x", "refused", write=write)
        again = pickle.loads(pickle.dumps(err))
        assert type(again) is StorageUnavailableError
        assert (again.write, str(again)) == (write, str(err))


def _raised(call: Callable[[], object]) -> StorageUnavailableError:
    with pytest.raises(StorageUnavailableError) as err:
        call()
    return err.value
