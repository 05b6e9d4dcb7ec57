"""The package's shape (docs/ARCHITECTURE.md): no import cycle, long modules say why they
are one module, every exception and warning class lives in `langgraph_ctx.errors`.

The import graph is read from the source with `ast` (nothing is imported to build it): an
edge per `import` / `from ... import` of a `langgraph_ctx` module executed when the module
is imported, that is at module level and outside `if TYPE_CHECKING:`. Imports inside
functions run later, when the package is loaded, and are the documented way to reach an
optional or a higher layer; they are not edges.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "langgraph_ctx"
MAX_LINES = 600


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES: dict[str, Path] = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_time_nodes(body: list[ast.stmt]) -> list[ast.Import | ast.ImportFrom]:
    """Import statements run when the module is imported (module level, any `try`/`if`
    except `if TYPE_CHECKING:`), not those in functions or classes."""
    found: list[ast.Import | ast.ImportFrom] = []
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        elif isinstance(node, ast.If):
            if not _is_type_checking(node.test):
                found += _import_time_nodes(node.body)
            found += _import_time_nodes(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody):
                found += _import_time_nodes(block)
            for handler in node.handlers:
                found += _import_time_nodes(handler.body)
    return found


def _resolve(module: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    package = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
    for _ in range(node.level - 1):
        package = package.rpartition(".")[0]
    return f"{package}.{node.module}" if node.module else package


def import_graph() -> dict[str, set[str]]:
    """module -> the langgraph_ctx modules it imports when it is imported."""
    graph: dict[str, set[str]] = {}
    for module, path in MODULES.items():
        targets: set[str] = set()
        for node in _import_time_nodes(ast.parse(path.read_text()).body):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                base = _resolve(module, node)
                # `from pkg import sub` imports the submodule `pkg.sub` when there is one
                names = [
                    f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base
                    for a in node.names
                ]
            targets |= {n for n in names if n in MODULES and n != module}
        graph[module] = targets
    return graph


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected component with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return cycles


def test_find_cycles_reports_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycles(graph) == [["a", "b", "c"]]
    assert find_cycles({"a": {"b"}, "b": set()}) == []


def test_import_graph_sees_the_layers() -> None:
    graph = import_graph()
    assert "langgraph_ctx.codec.lines" in graph["langgraph_ctx.saver._index"]
    assert "langgraph_ctx.storage.base" in graph["langgraph_ctx.storage.jsonl"]
    # TYPE_CHECKING imports are not edges: the lazy top-level package imports nothing
    assert graph["langgraph_ctx"] == set()


def test_no_import_cycle() -> None:
    cycles = find_cycles(import_graph())
    assert cycles == [], "import cycles between modules of langgraph_ctx:\n" + "\n".join(
        " <-> ".join(c) for c in cycles
    )


def test_codec_imports_no_io_layer() -> None:
    # the log codec is pure: it knows neither storage nor the saver
    graph = import_graph()
    for module, targets in graph.items():
        if module.startswith("langgraph_ctx.codec"):
            io = ("langgraph_ctx.storage", "langgraph_ctx.saver")
            bad = {t for t in targets if t.startswith(io)}
            assert not bad, f"{module} imports {sorted(bad)}"


_REASON = re.compile(r"\bone module\b", re.IGNORECASE)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_long_modules_say_why_they_are_one_module(module: str) -> None:
    path = MODULES[module]
    lines = len(path.read_text().splitlines())
    if lines <= MAX_LINES:
        return
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    assert _REASON.search(doc), (
        f"{path.relative_to(PACKAGE.parent)} has {lines} lines (over {MAX_LINES}): its "
        "module docstring must say why it is one module (a paragraph with 'one module')"
    )


_FIRST_IMPORTS = """
import importlib, json, sys, warnings
warnings.simplefilter("ignore")
cycles = {}
for name in json.loads(sys.argv[1]):
    for loaded in [m for m in sys.modules if m.split(".")[0] == "langgraph_ctx"]:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except ImportError as err:  # an optional extra missing is not a cycle
        if "partially initialized" in str(err) or "circular import" in str(err):
            cycles[name] = str(err)
print(json.dumps(cycles))
"""


def test_every_module_imports_before_any_other_of_the_package() -> None:
    """A module imported first, in a process that imported nothing of the package yet,
    loads: a circular import shows only then. (``from langgraph_ctx.context.llm_error
    import is_recoverable_error``, as docs/pipeline.md shows it, raised ImportError when
    it came first: the error module reached the compaction package, which imports it.)"""
    names = [m for m in MODULES if not m.endswith("__main__")]
    done = subprocess.run(
        [sys.executable, "-c", _FIRST_IMPORTS, json.dumps(names)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=PACKAGE.parent,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.splitlines()[-1]) == {}


def test_every_exception_and_warning_class_lives_in_errors() -> None:
    outside = []
    for module in MODULES:
        if module.endswith("__main__"):
            continue
        try:
            with warnings.catch_warnings():  # deprecated aliases warn on import
                warnings.simplefilter("ignore", DeprecationWarning)
                loaded = importlib.import_module(module)
        except ImportError as err:  # an optional extra (redis, matplotlib) is not installed
            pytest.skip(f"{module}: {err}")
        for name, obj in vars(loaded).items():
            if (
                inspect.isclass(obj)
                and issubclass(obj, BaseException)
                and obj.__module__ == module
                and module != "langgraph_ctx.errors"
                and not name.startswith("_")  # a module's private control-flow signal
            ):
                outside.append(f"{module}.{name}")
    assert outside == [], f"exception/warning classes outside langgraph_ctx.errors: {outside}"


_DOTTED = re.compile(
    r"`((?:langgraph_ctx\.)?(?:codec|storage|saver|context|nodes|tools|browse|cli|testing"
    r"|migrate|server|errors)(?:\.\w+)+)`"
)


def _resolve_dotted(dotted: str) -> object:
    parts = dotted.removeprefix("langgraph_ctx.").split(".")
    obj: object = None
    for i in range(len(parts), 0, -1):  # the longest importable module prefix
        try:
            obj = importlib.import_module("langgraph_ctx." + ".".join(parts[:i]))
        except ModuleNotFoundError:
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr)
        return obj
    raise ModuleNotFoundError(dotted)


def test_architecture_doc_names_code_that_exists() -> None:
    doc = (PACKAGE.parent / "docs" / "ARCHITECTURE.md").read_text()
    names = sorted(set(_DOTTED.findall(doc)))
    assert len(names) > 40  # the two paths and the package paragraphs
    missing = []
    for name in names:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                _resolve_dotted(name)
        except (ImportError, AttributeError) as err:
            missing.append(f"{name} ({err})")
    assert missing == [], "docs/ARCHITECTURE.md names code that does not exist:\n" + "\n".join(
        missing
    )


def test_the_packages_exports_are_a_literal_all_type_checkers_read() -> None:
    """`from langgraph_ctx import JsonlSaver` passes `mypy --strict`: its names are
    exported by a literal `__all__` (a computed one is not read, and every import then
    failed with "does not explicitly export attribute"), the same as the lazy table."""
    import langgraph_ctx

    tree = ast.parse((PACKAGE / "__init__.py").read_text())
    literal = next(
        node.value
        for node in tree.body
        if isinstance(node, ast.Assign) and [t.id for t in node.targets] == ["__all__"]  # type: ignore[attr-defined]
    )
    assert isinstance(literal, ast.List)
    names = [ast.literal_eval(item) for item in literal.elts]
    assert names == sorted(langgraph_ctx._EXPORTS) == langgraph_ctx.__all__
    # The exceptions and warnings the README names are among them.
    for name in ("CorruptLineWarning", "TornLineWarning", "SymlinkRefusedError",
                 "NotARegularFileError", "CorruptLogError"):  # fmt: skip
        assert getattr(langgraph_ctx, name).__module__ == "langgraph_ctx.errors"


def test_the_pipeline_keys_are_optional_in_an_input_state() -> None:
    """`graph.invoke({"messages": [...], "mode": "agent"})` on a `ContextState` graph
    type-checks: every key of the pipeline is `NotRequired` (three with reducers were
    required, so mypy rejected the README's own input)."""
    from typing import get_origin, get_type_hints

    from typing_extensions import NotRequired

    from langgraph_ctx import ContextAgentState, ContextKeys, ContextState
    from langgraph_ctx.nodes.state import CompactionAgentState, CompactionState

    ours = set(get_type_hints(ContextKeys))
    for state in (ContextKeys, ContextState, ContextAgentState, CompactionState,
                  CompactionAgentState):  # fmt: skip
        hints = get_type_hints(state, include_extras=True)  # what mypy reads, evaluated
        required = {k for k in ours & set(hints) if get_origin(hints[k]) is not NotRequired}
        assert required == set(), f"{state.__name__} requires {sorted(required)}"
