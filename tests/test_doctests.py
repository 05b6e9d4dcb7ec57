"""Every docstring example of the package runs (`make test` runs this file).

Two kinds of examples:

* ``>>>`` doctests, run by `doctest` with the module's globals and their output checked;
* fenced ```` ```python ```` blocks in the docstrings of modules and of public classes,
  functions and methods: each block is executed as a script.

A fenced block runs with its module's globals (as a doctest does), in a fresh temporary
working directory (so ``JsonlSaver("./chats")`` never writes into the repository), and
may use the names of `PRELUDE`, the reader's assumed context: ``saver``, ``graph``,
``config``, ``cp_id``, ``llm``, ``messages``... and the usual LangChain / LangGraph / langgraph_ctx
imports (`_IMPORTS`). Each prelude name is built only when the block uses it, offline
(`langgraph_ctx.testing` fakes, a real `JsonlSaver`, a real graph); the files a block
reads (``./prompts``, ``checkpoints.db``, ``./chats``) are made by `_files`.
Top-level ``await`` is allowed. Examples that name a Redis server run against the test
suite's own: ``redis://<host>:<port>`` becomes the session's redis-server (database
`REDIS_DB`, emptied before each example) and ``redis+cluster://...`` its Redis Cluster;
in the Redis modules the prelude's ``saver`` is a `RedisLogSaver` there (``storage`` its
storage), holding the same thread. Examples that need a package that is not installed
are skipped with the reason; the ones that do not run yet are listed in `NOT_RUNNING`
with why (strict xfail: fixing one makes its entry fail until removed).
"""

from __future__ import annotations

import ast
import asyncio
import doctest
import importlib
import importlib.util
import inspect
import re
import textwrap
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "langgraph_ctx"
FENCE = re.compile(r"^[ \t]*```python\n(.*?)^[ \t]*```", re.S | re.M)


def _modules() -> list[str]:
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__main__":
            continue
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def _import(name: str) -> ModuleType:
    with warnings.catch_warnings():  # deprecated aliases warn on import
        warnings.simplefilter("ignore", DeprecationWarning)
        return importlib.import_module(name)


def _documented(module: ModuleType) -> Iterator[tuple[str, str]]:
    """(qualified name, docstring) of the module and its public classes, functions and
    methods (properties included) defined in it."""
    if module.__doc__:
        yield module.__name__, module.__doc__
    for name, obj in vars(module).items():
        if name.startswith("_") or getattr(obj, "__module__", None) != module.__name__:
            continue
        if not (inspect.isclass(obj) or inspect.isfunction(obj)):
            continue
        if obj.__doc__:
            yield f"{module.__name__}.{name}", obj.__doc__
        if inspect.isclass(obj):
            for attr, value in vars(obj).items():
                if attr.startswith("_"):
                    continue
                func = value.fget if isinstance(value, property) else value
                func = getattr(func, "__func__", func)
                if inspect.isfunction(func) and func.__doc__:
                    yield f"{module.__name__}.{name}.{attr}", func.__doc__


def _fenced_examples() -> list[Any]:
    params = []
    for name in _modules():
        try:
            module = _import(name)
        except ImportError as err:  # an optional extra is not installed
            params.append(pytest.param(name, "", marks=pytest.mark.skip(reason=str(err))))
            continue
        for where, doc in _documented(module):
            blocks = FENCE.findall(inspect.cleandoc(doc))
            for i, block in enumerate(blocks):
                example_id = where if len(blocks) == 1 else f"{where}[{i}]"
                marks = []
                if example_id in NOT_RUNNING:
                    marks.append(pytest.mark.xfail(reason=NOT_RUNNING[example_id], strict=True))
                elif example_id in SKIPPED:
                    marks.append(pytest.mark.skip(reason=SKIPPED[example_id]))
                params.append(pytest.param(name, block, id=example_id, marks=marks))
    return params


# -- the reader's assumed context -------------------------------------------------------


def _messages(ns: dict[str, Any]) -> list[Any]:
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    call = {"name": "search_flights", "args": {"to": "Lisbon"}, "id": "call-1"}
    return [
        SystemMessage("You are a travel assistant.", id="sys"),
        HumanMessage("I'm planning a trip to Lisbon in May.", id="u1"),
        AIMessage("Let me look up flights.", tool_calls=[call], id="a1"),
        ToolMessage(
            "TP1351 08:05 LHR-LIS 142 EUR; BA500 10:40 LHR-LIS 171 EUR",
            tool_call_id="call-1",
            name="search_flights",
            id="t1",
        ),
        AIMessage("TAP at 08:05 is the cheapest, 142 EUR.", id="a2"),
        HumanMessage("What should I pack?", id="u2"),
    ]


def _llm(ns: dict[str, Any]) -> Any:
    from langgraph_ctx.testing import OfflineChatModel

    return OfflineChatModel()


def _saver(ns: dict[str, Any]) -> Any:
    """A `JsonlSaver` in ``./chats`` holding thread ``task-001`` (two turns, see `_graph`)."""
    from langgraph_ctx import JsonlSaver

    ns["saver"] = JsonlSaver("./chats")
    _get(ns, "graph")
    return ns["saver"]


REDIS_DB = 9
"""The database of the session's redis-server the Redis examples use: the rest of the
suite keeps to database 0, so emptying this one before each example touches nothing else."""

_REDIS_URL = re.compile(r"redis://[\w.-]+:\d+")
_CLUSTER_URL = re.compile(r"redis\+cluster://[\w.:,-]+")


def _on_redis(module_name: str, block: str) -> bool:
    return module_name.endswith(".redis") or "redis://" in block or "redis+cluster://" in block


def _docs_db_url(server: Any) -> str:
    return f"redis://127.0.0.1:{server.port}/{REDIS_DB}"


def _redis_saver(ns: dict[str, Any], server: Any) -> Any:
    """A `RedisLogSaver` on the test server holding thread ``task-001`` (see `_graph`)."""
    from langgraph_ctx import RedisLogSaver

    ns["saver"] = RedisLogSaver.from_url(_docs_db_url(server))
    _get(ns, "graph")
    return ns["saver"]


def _point_at_test_servers(block: str, request: pytest.FixtureRequest) -> str:
    """`block` with its Redis URLs naming the session's servers (a path's database kept,
    ``/0`` made `REDIS_DB`)."""
    if _CLUSTER_URL.search(block):
        cluster = request.getfixturevalue("redis_cluster").url
        block = _CLUSTER_URL.sub(cluster, block)
    server = request.getfixturevalue("redis_server")
    block = _REDIS_URL.sub(f"redis://127.0.0.1:{server.port}", block)
    return block.replace(f"redis://127.0.0.1:{server.port}/0", _docs_db_url(server))


def _empty_redis_db(server: Any) -> None:
    import redis

    client = redis.Redis.from_url(_docs_db_url(server))
    try:
        client.flushdb()
    finally:
        client.close()


def _builder(ns: dict[str, Any]) -> Any:
    from langgraph.graph import StateGraph

    from langgraph_ctx import ContextState

    return StateGraph(ContextState)


def _graph(ns: dict[str, Any]) -> Any:
    """A chat graph on `saver`, with two turns already in thread ``task-001``."""
    from langgraph.graph import START, MessagesState, StateGraph

    model, saver = _get(ns, "llm"), _get(ns, "saver")

    def chatbot(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("chatbot", chatbot)
    builder.add_edge(START, "chatbot")
    graph = builder.compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "task-001"}}
    for text in ("I'm planning a trip to Lisbon.", "What should I pack?"):
        graph.invoke({"messages": [("user", text)]}, config)
    return graph


def _config(ns: dict[str, Any]) -> Any:
    _get(ns, "graph")
    return {"configurable": {"thread_id": "task-001"}}


def _cp_id(ns: dict[str, Any]) -> str:
    """The checkpoint after the first turn of ``task-001``."""
    history = list(_get(ns, "graph").get_state_history(_get(ns, "config")))  # newest first
    after_first_turn = [s for s in history if len(s.values.get("messages", [])) == 2]
    return str(after_first_turn[0].config["configurable"]["checkpoint_id"])


def _state(ns: dict[str, Any]) -> Any:
    return dict(_get(ns, "graph").get_state(_get(ns, "config")).values)


PRELUDE: dict[str, Callable[[dict[str, Any]], Any]] = {
    "messages": _messages,
    "history": _messages,
    "llm": _llm,
    "model": _llm,
    "tools": lambda ns: [],
    "saver": _saver,
    "builder": _builder,
    "graph": _graph,
    "config": _config,
    "cp_id": _cp_id,
    "state": _state,
    "storage": lambda ns: _get(ns, "saver").storage,
    "inputs": lambda ns: {"messages": [("user", "What should I pack for Lisbon?")]},
    "prompt": lambda ns: "You are a travel assistant.",
    "parts": lambda ns: _import("langgraph_ctx").PromptParts(persona="You are Ada."),
    "summary_llm": lambda ns: _import("langgraph_ctx.testing").ExtractiveSummaryModel(),
    "my_tools": lambda ns: [],
    "search": lambda ns: _search_tool(),
    "chat_model": lambda ns: _import("langgraph_ctx.testing").ExtractiveSummaryModel(),
    "call_model": lambda ns: _call_model(ns),
    "AppState": lambda ns: _app_state(),
    "entries": lambda ns: _archived(ns),
    "entry": lambda ns: _archived(ns)[0],
    "call": lambda ns: {"name": "book_flight", "args": {"flight": "LH123"}, "id": "c1"},
    "pipeline": lambda ns: _import("langgraph_ctx").context_pipeline("fast"),
}
"""Names an example may use without defining them (built on first use)."""


_IMPORTS: dict[str, str] = {
    **{
        n: "langchain_core.messages"
        for n in ("AIMessage", "HumanMessage", "SystemMessage", "ToolMessage", "RemoveMessage")
    },
    **{n: "langgraph.graph" for n in ("START", "END", "StateGraph", "MessagesState")},
    "ToolNode": "langgraph.prebuilt",
    "tools_condition": "langgraph.prebuilt",
    "create_react_agent": "langgraph.prebuilt",
    "InMemorySaver": "langgraph.checkpoint.memory",
    "create_agent": "langchain.agents",
}
"""The usual LangChain / LangGraph names, imported when an example uses them; with the
names of ``from langgraph_ctx import *`` and ``from langgraph_ctx.testing import *``."""


def _assumed_import(name: str) -> Callable[[dict[str, Any]], Any]:
    def load(ns: dict[str, Any]) -> Any:
        if name in _IMPORTS:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                return getattr(importlib.import_module(_IMPORTS[name]), name)
        for module in ("langgraph_ctx", "langgraph_ctx.testing"):
            if name in getattr(_import(module), "__all__", ()):
                return getattr(_import(module), name)
        raise NameError(name)

    return load


def _call_model(ns: dict[str, Any]) -> Callable[[Any], dict[str, Any]]:
    """A model node: `llm` on the state's messages."""
    model = _get(ns, "llm")

    def call_model(state: Any) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    return call_model


def _app_state() -> type:
    """The host's own state: messages and a `mode` key of its own."""
    from langgraph.graph import MessagesState

    class AppState(MessagesState):
        mode: str

    return AppState


def _archived(ns: dict[str, Any]) -> list[Any]:
    """Thread ``task-001`` with its first turn archived as a context (newest first)."""
    from langgraph_ctx.context.archive import ContextArchive

    saver, graph, config = _get(ns, "saver"), _get(ns, "graph"), _get(ns, "config")
    archive = ContextArchive(saver)
    if not archive.entries("task-001"):
        messages = graph.get_state(config).values["messages"]
        outcome = archive.archive("task-001", messages, None, title="Lisbon trip")
        assert outcome.entry is not None, outcome
    return archive.entries("task-001")


def _files(block: str, ns: dict[str, Any]) -> None:
    """The files an example reads: ``./prompts``, ``checkpoints.db``, ``./chats``."""
    if "prompts" in block:
        from langgraph_ctx.context.prompt import PROMPT_FILES

        root = Path("prompts")
        root.mkdir()
        (root / PROMPT_FILES["persona"]).write_text("You are Ada, a careful travel planner.\n")
        (root / PROMPT_FILES["tool_policy"]).write_text("TOOL POLICY\n- Search first.\n")
    if "checkpoints.db" in block:
        import sqlite3

        from langgraph.checkpoint.sqlite import SqliteSaver

        with sqlite3.connect("checkpoints.db", check_same_thread=False) as conn:
            ns_sqlite: dict[str, Any] = {"saver": SqliteSaver(conn), "llm": _get(ns, "llm")}
            _graph(ns_sqlite)
    elif "./chats" in block and "JsonlSaver(" not in block:  # a directory to read
        _get(ns, "saver")
    if "ContextArchive(" in block:  # a thread with an archived context
        _archived(ns)


def _search_tool() -> Any:
    from langchain_core.tools import tool

    @tool
    def search(query: str) -> str:
        """Search the travel notes."""
        return f"3 notes match {query!r}: Lisbon in May, 22 degrees, light rain jacket."

    return search


def _get(ns: dict[str, Any], name: str) -> Any:
    if name not in ns:
        ns[name] = PRELUDE[name](ns)
    return ns[name]


def _names_used(tree: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}


SKIPPED: dict[str, str] = {}
"""Examples that cannot run here, by id, with the reason."""

NOT_RUNNING: dict[str, str] = {
    # id: what the example lacks today (a name it assumes, a file it expects, a wrong call)
}
"""Examples that do not run yet, by id, with the error they raise (to fix: make the
example self-contained or correct, then remove its entry)."""


@pytest.mark.parametrize(("module_name", "block"), _fenced_examples())
def test_docstring_example_runs(
    module_name: str,
    block: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    module = _import(module_name)
    if "langchain_openai" in block and importlib.util.find_spec("langchain_openai") is None:
        pytest.skip("needs langchain-openai (and an OpenAI key), not installed")
    monkeypatch.chdir(tmp_path)
    redis_server = None
    if _on_redis(module_name, block):
        block = _point_at_test_servers(block, request)
        redis_server = request.getfixturevalue("redis_server")
        _empty_redis_db(redis_server)
    source = textwrap.dedent(block)
    tree = ast.parse(source)
    ns: dict[str, Any] = dict(vars(module))
    ns["__name__"] = "__docstring_example__"
    for name in sorted(_names_used(tree) & PRELUDE.keys()):
        ns.pop(name, None)  # the prelude's `saver` wins over the module's `saver` package
    on_the_saver = {"saver", "storage", "graph", "config", "cp_id", "state"}
    if redis_server and module_name.endswith(".redis") and _names_used(tree) & on_the_saver:
        _redis_saver(ns, redis_server)  # before `_files`, which would make a JSONL saver
    _files(block, ns)
    for name in sorted(_names_used(tree) & PRELUDE.keys()):
        _get(ns, name)
    public = set(_IMPORTS) | set(_import("langgraph_ctx").__all__)
    public |= set(_import("langgraph_ctx.testing").__all__)
    for name in sorted((_names_used(tree) & public) - ns.keys()):
        ns[name] = _assumed_import(name)(ns)
    # dont_inherit: the block runs as a reader pastes it, without this file's
    # `from __future__ import annotations` (a TypedDict state needs its hints evaluated)
    code = compile(
        source,
        f"<{module_name} example>",
        "exec",
        flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT,
        dont_inherit=True,
    )
    result = eval(code, ns)
    if inspect.iscoroutine(result):
        asyncio.run(result)


def _doctests() -> list[Any]:
    finder = doctest.DocTestFinder(exclude_empty=True)
    params = []
    for name in _modules():
        try:
            module = _import(name)
        except ImportError:
            continue
        for test in finder.find(module):
            if test.examples:
                params.append(pytest.param(test, id=test.name))
    return params


@pytest.mark.parametrize("test", _doctests())
def test_doctest(test: doctest.DocTest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    out: list[str] = []
    result = runner.run(test, out=out.append, clear_globs=False)
    assert result.failed == 0, "".join(out)
