"""pytest plugin: our savers as checkpointer choices in LangGraph's own test suite.

LangGraph's sdist ships its tests; their ``tests/conftest.py`` defines the
``sync_checkpointer`` and ``async_checkpointer`` fixtures, parametrised over
``memory``, ``sqlite``, ``postgres``... This plugin (loaded with
``-p lgctx_suite_plugin`` by ``run.py``) rewrites those two fixture definitions at
collection time, without copying any LangGraph code:

* their ``params`` become the savers named by ``--lgctx-savers`` (LangGraph's own
  names, such as ``sqlite`` / ``sqlite_aio``, and ours: ``jsonl`` / ``jsonl_aio``,
  ``redis`` / ``redis_aio``);
* their function is wrapped: our names build our saver, any other name goes to
  LangGraph's original fixture function.

With ``--lgctx-only-checkpointer`` only the tests using one of the two fixtures
are kept. ``--lgctx-inmemory`` goes further: the tests that build ``InMemorySaver()``
themselves get a `JsonlSaver` (compare with a run without it).
``--lgctx-report FILE`` writes every test's outcome (and, for failures, the crash
line and the full traceback) as JSON for ``run.py``.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import sys
import tempfile
import types
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

SYNC_FIXTURE = "sync_checkpointer"
ASYNC_FIXTURE = "async_checkpointer"
# Our choices, per fixture. The same saver class serves sync and async code;
# the ``_aio`` names only mirror LangGraph's (``sqlite_aio``) so ids pair up.
OURS_NAMES = ("jsonl", "jsonl_cold", "redis")
OURS = {
    SYNC_FIXTURE: {name: name for name in OURS_NAMES},
    ASYNC_FIXTURE: {f"{name}_aio": name for name in OURS_NAMES},
}
REPO = Path(__file__).resolve().parents[2]


def async_name(sync_name: str) -> str:
    """A choice's name in the async fixture (LangGraph's: ``sqlite_aio``, ``memory``)."""
    return sync_name if sync_name == "memory" else f"{sync_name}_aio"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("langgraph-ctx suite")
    group.addoption(
        "--lgctx-savers",
        default="sqlite,jsonl",
        help="sync checkpointer choices, comma separated (sqlite, memory, jsonl, "
        "jsonl_cold, redis); the async fixture gets their async counterparts",
    )
    group.addoption(
        "--lgctx-only-checkpointer",
        action="store_true",
        help="deselect tests that use neither sync_checkpointer nor async_checkpointer",
    )
    group.addoption("--lgctx-report", default=None, help="write outcomes as JSON here")
    group.addoption(
        "--lgctx-inmemory",
        action="store_true",
        help="tests that build InMemorySaver() themselves get a JsonlSaver in a temp dir",
    )
    group.addoption(
        "--lgctx-only-inmemory",
        action="store_true",
        help="deselect tests whose module does not use InMemorySaver directly",
    )


# ---------------------------------------------------------------- the savers


@contextlib.contextmanager
def _jsonl_saver() -> Iterator[Any]:
    from langgraph_ctx import JsonlSaver

    with tempfile.TemporaryDirectory(prefix="lgctx-suite-") as root:
        saver = JsonlSaver(root)
        try:
            yield saver
        finally:
            close = getattr(saver, "close", None)
            if close is not None:
                close()


@contextlib.contextmanager
def _jsonl_cold_saver() -> Iterator[Any]:
    """A `JsonlSaver` whose every read comes from a new instance over the same
    directory: what a process that reopens the threads sees (a "cold reopen")."""
    from langgraph_ctx import JsonlSaver

    class ColdReadJsonlSaver(JsonlSaver):
        def _cold(self) -> JsonlSaver:
            return JsonlSaver(self.root_dir, serde=self.serde)

        def get_tuple(self, config: Any) -> Any:
            return self._cold().get_tuple(config)

        def list(self, config: Any, **kwargs: Any) -> Iterator[Any]:
            return self._cold().list(config, **kwargs)

        async def aget_tuple(self, config: Any) -> Any:
            return await self._cold().aget_tuple(config)

        async def alist(self, config: Any, **kwargs: Any) -> AsyncIterator[Any]:
            async for item in self._cold().alist(config, **kwargs):
                yield item

    with tempfile.TemporaryDirectory(prefix="lgctx-suite-") as root:
        yield ColdReadJsonlSaver(root)


class _Redis:
    """One redis-server for the whole session; each test gets its own key prefix."""

    server: Any = None
    directory: tempfile.TemporaryDirectory[str] | None = None
    count = 0

    @classmethod
    def url(cls) -> str:
        if cls.server is None:
            # Our tests/redis_server.py: LangGraph's tests are the ``tests`` package in
            # this session, so ours are imported as a package of another name (the module
            # imports its neighbour `local_server` relatively).
            package = types.ModuleType("lgctx_tests")
            package.__path__ = [str(REPO / "tests")]
            sys.modules.setdefault("lgctx_tests", package)
            module = importlib.import_module("lgctx_tests.redis_server")
            cls.directory = tempfile.TemporaryDirectory(prefix="lgctx-suite-redis-")
            cls.server = module.RedisServer(cls.directory.name).start()
        return str(cls.server.url)

    @classmethod
    def stop(cls) -> None:
        if cls.server is not None:
            cls.server.stop()
            cls.server = None
        if cls.directory is not None:
            cls.directory.cleanup()
            cls.directory = None


@contextlib.contextmanager
def _redis_saver() -> Iterator[Any]:
    from langgraph_ctx import RedisLogSaver

    _Redis.count += 1
    saver = RedisLogSaver.from_url(_Redis.url(), prefix=f"suite{_Redis.count}")
    try:
        yield saver
    finally:
        saver.close()


FACTORIES = {"jsonl": _jsonl_saver, "jsonl_cold": _jsonl_cold_saver, "redis": _redis_saver}


def pytest_unconfigure(config: pytest.Config) -> None:
    _Redis.stop()
    for directory in _TEMP_DIRS:
        directory.cleanup()


# ------------------------------------------------- rewriting LangGraph's fixtures


def _wrap_sync(original: Any, ours: dict[str, str]) -> Any:
    def sync_checkpointer(request: pytest.FixtureRequest) -> Iterator[Any]:
        kind = ours.get(request.param)
        if kind is None:
            yield from original(request=request)
            return
        with FACTORIES[kind]() as saver:
            yield saver

    return sync_checkpointer


def _wrap_async(original: Any, ours: dict[str, str]) -> Any:
    async def async_checkpointer(request: pytest.FixtureRequest) -> AsyncIterator[Any]:
        kind = ours.get(request.param)
        if kind is None:
            async for saver in original(request=request):
                yield saver
            return
        with FACTORIES[kind]() as saver:
            yield saver

    return async_checkpointer


def _choices(config: pytest.Config, fixture: str) -> list[str]:
    names = [n.strip() for n in config.getoption("--lgctx-savers").split(",") if n.strip()]
    if fixture == ASYNC_FIXTURE:
        names = [async_name(n) for n in names]
    return names


@pytest.hookimpl(tryfirst=True)
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Patch the fixture definitions before pytest parametrises from them."""
    for fixture in (SYNC_FIXTURE, ASYNC_FIXTURE):
        if fixture not in metafunc.fixturenames:
            continue
        fixturedefs = metafunc._arg2fixturedefs.get(fixture)
        if not fixturedefs:
            continue
        fixturedef = fixturedefs[-1]
        if getattr(fixturedef, "_lgctx_patched", False):
            continue
        wrap = _wrap_sync if fixture == SYNC_FIXTURE else _wrap_async
        fixturedef.func = wrap(fixturedef.func, OURS[fixture])
        fixturedef.params = _choices(metafunc.config, fixture)
        fixturedef.ids = None
        fixturedef._lgctx_patched = True  # type: ignore[attr-defined]


def _uses_fixture(item: pytest.Item) -> bool:
    names = getattr(item, "fixturenames", ())
    return SYNC_FIXTURE in names or ASYNC_FIXTURE in names


def _uses_inmemory(item: pytest.Item) -> bool:
    from langgraph.checkpoint.memory import InMemorySaver

    module = getattr(item, "module", None)
    return module is not None and getattr(module, "InMemorySaver", None) is InMemorySaver


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    keep_if = None
    if config.getoption("--lgctx-only-checkpointer"):
        keep_if = _uses_fixture
    elif config.getoption("--lgctx-only-inmemory"):
        keep_if = _uses_inmemory
    if keep_if is not None:
        keep, drop = [], []
        for item in items:
            (keep if keep_if(item) else drop).append(item)
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = keep
    if config.getoption("--lgctx-inmemory"):
        _swap_inmemory(items)


_TEMP_DIRS: list[tempfile.TemporaryDirectory[str]] = []


def _swap_inmemory(items: list[pytest.Item]) -> None:
    """``InMemorySaver()`` in LangGraph's test modules builds a `JsonlSaver` instead.

    Tests that read InMemorySaver internals (``saver.blobs``...) fail for that
    reason alone; ``run.py --inmemory`` prints them with the rest.
    """
    from langgraph.checkpoint.memory import InMemorySaver

    from langgraph_ctx import JsonlSaver

    class JsonlInMemorySaver(JsonlSaver):
        def __init__(self, *, serde: Any = None, **_: Any) -> None:
            directory = tempfile.TemporaryDirectory(prefix="lgctx-suite-")
            _TEMP_DIRS.append(directory)
            super().__init__(directory.name, serde=serde)

    for module in {getattr(item, "module", None) for item in items}:
        if module is not None and getattr(module, "InMemorySaver", None) is InMemorySaver:
            module.InMemorySaver = JsonlInMemorySaver


# ------------------------------------------------------------------ the report

_OUTCOMES: dict[str, dict[str, Any]] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    entry = _OUTCOMES.setdefault(report.nodeid, {"outcome": "passed"})
    if report.when == "call" and report.passed:
        entry.setdefault("duration", report.duration)
    if report.skipped and entry["outcome"] == "passed":
        entry["outcome"] = "skipped"
        entry["crash"] = _crash(report)
    elif report.failed:
        xfail = hasattr(report, "wasxfail")
        if entry["outcome"] != "failed":
            entry["outcome"] = "failed" if not xfail else "xfailed"
            entry["when"] = report.when
            entry["crash"] = _crash(report)
            entry["longrepr"] = report.longreprtext[-12000:]
    elif report.when == "call" and hasattr(report, "wasxfail"):
        entry["outcome"] = "xpassed" if report.passed else "xfailed"


def _crash(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    crash = getattr(longrepr, "reprcrash", None)
    if crash is not None:
        where = "/".join(Path(crash.path).parts[-3:])
        return f"{where}:{crash.lineno}: {crash.message.splitlines()[0][:300]}"
    if isinstance(longrepr, tuple):  # a skip: (path, lineno, reason)
        return str(longrepr[2])[:300]
    return str(longrepr).splitlines()[-1][:300] if longrepr else ""


def pytest_sessionfinish(session: pytest.Session) -> None:
    path = session.config.getoption("--lgctx-report")
    if path and not hasattr(session.config, "workerinput"):  # xdist: the controller writes
        tmp = f"{path}.tmp{os.getpid()}"
        Path(tmp).write_text(json.dumps(_OUTCOMES, indent=1))
        os.replace(tmp, path)
