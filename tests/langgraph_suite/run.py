"""LangGraph's own test suite, with our savers next to ``SqliteSaver``: one command.

    python3 tests/langgraph_suite/run.py                    # sqlite vs jsonl, all tests
    python3 tests/langgraph_suite/run.py --savers sqlite,jsonl,jsonl_cold,redis -n 2
    python3 tests/langgraph_suite/run.py --quick            # the ~40 s subset
    python3 tests/langgraph_suite/run.py --inmemory         # tests building InMemorySaver()
    python3 tests/langgraph_suite/run.py -- -k time_travel  # anything after -- goes to pytest

What it does:

1. Finds the installed ``langgraph`` version, downloads that version's sdist from
   PyPI (it ships ``tests/``) and unpacks it into the cache directory
   (``$LANGGRAPH_CTX_SUITE_CACHE``, default ``~/.cache/langgraph-ctx/langgraph-suite``).
2. Needs LangGraph's test dependencies (syrupy, pytest-mock, psycopg for their
   conftest imports, pycryptodome, ...). When the Python running this script lacks
   them, it creates a virtualenv in the cache directory and installs this checkout's
   ``[dev]`` extra plus those packages there (``--python`` picks another interpreter).
3. Runs pytest in the sdist with ``lgctx_suite_plugin`` (next to this file), which adds
   ``jsonl`` / ``jsonl_aio`` (also ``jsonl_cold``: every read from a new instance, and
   ``redis``: `RedisLogSaver` on its own redis-server) as choices of LangGraph's
   ``sync_checkpointer`` / ``async_checkpointer`` fixtures, and keeps only the tests
   that use those fixtures. The ``langgraph_ctx`` under test is this checkout's.
4. Prints, per saver, how many tests pass, and every test that passes with the first
   saver (``sqlite``) but not with another, grouped by the line it failed on. The exit
   status is 1 when there is such a test.

No LangGraph code is copied into this repository.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import time
import venv
from collections import defaultdict
from pathlib import Path

PROGRESS = re.compile(r"^[.FEsxX]+\s+\[\s*\d+%\]$")
SUMMARY = re.compile(r"\d+ (passed|failed|error)|no tests ran|^ERROR|^ImportError")
HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
DEFAULT_CACHE = Path(
    os.environ.get("LANGGRAPH_CTX_SUITE_CACHE")
    or Path.home() / ".cache" / "langgraph-ctx" / "langgraph-suite"
)
# What LangGraph's tests/conftest*.py import, and what their tests use, minus the
# Postgres/Redis servers (NO_DOCKER=true keeps those out of the fixtures).
TEST_MODULES = {
    "pytest": "pytest",
    "syrupy": "syrupy",
    "pytest_mock": "pytest-mock",
    "xdist": "pytest-xdist",
    "httpx": "httpx",
    "langgraph.prebuilt": "langgraph-prebuilt",
    "langgraph_sdk": "langgraph-sdk",
    "langgraph.checkpoint.sqlite": "langgraph-checkpoint-sqlite",
    "langgraph.checkpoint.postgres": "langgraph-checkpoint-postgres",
    "psycopg": "psycopg[binary]",
    "psycopg_pool": "psycopg-pool",
    "Crypto": "pycryptodome",
    "redis": "redis",
    "aiosqlite": "aiosqlite",
}
# --quick: every file but the two largest (test_pregel*.py: 500 of the ~1300 tests
# and 70% of the test time, with no saver-specific failure so far).
QUICK_ARGS = ["tests", "--ignore=tests/test_pregel.py", "--ignore=tests/test_pregel_async.py"]


def say(*args: object) -> None:
    print(*args, flush=True)


def missing_modules(python: str) -> list[str]:
    code = (
        "import importlib.util, json, sys\n"
        "names = json.loads(sys.argv[1])\n"
        "def has(n):\n"
        "    try:\n"
        "        return importlib.util.find_spec(n) is not None\n"
        "    except ModuleNotFoundError:\n"
        "        return False\n"
        "print(json.dumps([n for n in names if not has(n)]))\n"
    )
    out = subprocess.run(
        [python, "-c", code, json.dumps(list(TEST_MODULES))],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return list(json.loads(out))


def installed_langgraph(python: str) -> str:
    return subprocess.run(
        [python, "-c", "import importlib.metadata as m; print(m.version('langgraph'))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def ensure_python(args: argparse.Namespace) -> str:
    """An interpreter with this checkout and LangGraph's test dependencies."""
    python = os.path.abspath(args.python or sys.executable)  # pytest runs in the sdist
    missing = missing_modules(python)
    if not missing:
        return str(python)
    if args.python:
        packages = " ".join(f"'{TEST_MODULES[m]}'" for m in missing)
        sys.exit(f"{python} lacks {', '.join(missing)}: pip install {packages}")
    env_dir = args.cache / "venv"
    env_python = env_dir / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    if not env_python.exists():
        say(f"creating {env_dir} (LangGraph's test dependencies are not installed here)")
        venv.EnvBuilder(with_pip=True).create(env_dir)
    if missing_modules(str(env_python)):
        say("installing this checkout [dev] and LangGraph's test dependencies into it")
        subprocess.run(
            [str(env_python), "-m", "pip", "install", "--quiet", "-e", f"{REPO}[dev]",
             *sorted(set(TEST_MODULES.values()))],
            check=True,
        )  # fmt: skip
    return str(env_python)


def ensure_sdist(python: str, version: str, cache: Path) -> Path:
    """LangGraph's sdist (it ships tests/), unpacked once per version."""
    root = cache / f"langgraph-{version}"
    if (root / "tests" / "conftest.py").exists():
        return root
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        say(f"downloading the langgraph {version} sdist from PyPI")
        subprocess.run(
            [python, "-m", "pip", "download", "--quiet", "--no-binary", ":all:", "--no-deps",
             f"langgraph=={version}", "-d", tmp],
            check=True,
        )  # fmt: skip
        (archive,) = Path(tmp).glob("langgraph-*.tar.gz")
        with tarfile.open(archive) as tar:
            if sys.version_info >= (3, 12):
                tar.extractall(tmp, filter="data")
            else:
                for member in tar.getmembers():  # no links, nothing outside tmp
                    if not (member.isfile() or member.isdir()) or ".." in member.name:
                        raise SystemExit(f"unexpected member in the sdist: {member.name}")
                tar.extractall(tmp)
        os.replace(Path(tmp) / f"langgraph-{version}", root)
    return root


def python_path(cache: Path) -> str:
    """This checkout's langgraph_ctx and our plugin, without our ``tests`` package
    (LangGraph's tests are a package named ``tests`` too)."""
    link_dir = cache / "pythonpath"
    link_dir.mkdir(parents=True, exist_ok=True)
    link = link_dir / "langgraph_ctx"
    if link.is_symlink() and link.resolve() != (REPO / "langgraph_ctx").resolve():
        link.unlink()
    if not link.exists():
        link.symlink_to(REPO / "langgraph_ctx", target_is_directory=True)
    return os.pathsep.join([str(link_dir), str(HERE)])


def run_pytest(
    python: str, sdist: Path, cache: Path, options: list[str], name: str = "last"
) -> tuple[dict[str, dict[str, object]], float]:
    report = cache / f"{name}-report.json"
    report.unlink(missing_ok=True)
    env = dict(os.environ, NO_DOCKER="true", PYTHONPATH=python_path(cache))
    cmd = [
        python, "-m", "pytest", "-p", "lgctx_suite_plugin", "-p", "no:cacheprovider",
        "-p", "no:asyncio",  # LangGraph's async tests run on anyio
        "-o", "addopts=", "--strict-markers", "-q", "--tb=short", "-rN",
        f"--lgctx-report={report}", *options,
    ]  # fmt: skip
    log = cache / f"{name}-run.log"
    say("$ " + " ".join(cmd))
    say(f"(pytest's full output: {log})")
    start = time.monotonic()
    with log.open("w") as out:
        proc = subprocess.Popen(
            cmd, cwd=sdist, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        assert proc.stdout is not None
        for line in proc.stdout:
            out.write(line)
            if PROGRESS.match(line) or SUMMARY.search(line):  # the rest is in the log
                print(line, end="", flush=True)
        proc.wait()
    wall = time.monotonic() - start
    if not report.exists():
        sys.exit("pytest wrote no report (see its output above)")
    return json.loads(report.read_text()), wall


def split_id(nodeid: str, savers: list[str]) -> tuple[str, str] | None:
    """(saver, id with the saver's token replaced) for a parametrised test id."""
    m = re.fullmatch(r"(.*)\[(.*)\]", nodeid)
    if not m:
        return None
    tokens = m.group(2).split("-")
    for i, tok in enumerate(tokens):
        for saver in savers:
            if tok in (saver, f"{saver}_aio"):
                key = [*tokens[:i], "<saver>" if tok == saver else "<saver_aio>", *tokens[i + 1 :]]
                return saver, f"{m.group(1)}[{'-'.join(key)}]"
    return None


def summarize(outcomes: dict[str, dict[str, object]], savers: list[str], wall: float) -> int:
    by_key: dict[str, dict[str, dict[str, object]]] = defaultdict(dict)
    counts: dict[str, dict[str, int]] = {s: defaultdict(int) for s in savers}
    for nodeid, entry in outcomes.items():
        split = split_id(nodeid, savers)
        if split is None:
            continue
        saver, key = split
        by_key[key][saver] = entry
        counts[saver][str(entry["outcome"])] += 1
    base = savers[0]
    say(f"\nLangGraph tests using a checkpointer fixture, per saver (wall time {wall:.0f} s):")
    for saver in savers:
        c = counts[saver]
        say(
            f"  {saver:10} passed {c['passed']:5}  failed {c['failed']:4}  "
            f"skipped {c['skipped']:3}  xfailed {c['xfailed']:3}  (of {sum(c.values())})"
        )
    regressions = 0
    for saver in savers[1:]:
        lost = sorted(
            key
            for key, row in by_key.items()
            if row.get(base, {}).get("outcome") == "passed"
            and row.get(saver, {}).get("outcome") not in (None, "passed")
        )
        regressions += len(lost)
        print_lost(lost, {k: by_key[k][saver] for k in lost}, f"with {base} but not with {saver}")
    return 1 if regressions else 0


def print_lost(lost: list[str], outcomes: dict[str, dict[str, object]], what: str) -> None:
    say(f"\n{len(lost)} tests pass {what}:")
    groups: dict[str, list[str]] = defaultdict(list)
    for key in lost:
        groups[str(outcomes[key].get("crash", "?"))].append(key)
    for crash, keys in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        say(f"\n  [{len(keys)}] {crash}")
        for key in keys:
            say(f"      {key}")


def inmemory(python: str, sdist: Path, cache: Path, files: list[str], extra: list[str]) -> int:
    """Tests that build ``InMemorySaver()`` themselves, as written and with a JsonlSaver."""
    options = ["--lgctx-only-inmemory", "--lgctx-savers=memory", *files, *extra]
    base, wall_base = run_pytest(python, sdist, cache, options, "inmemory-base")
    swap, wall_swap = run_pytest(python, sdist, cache, ["--lgctx-inmemory", *options],
                                 "inmemory-jsonl")  # fmt: skip
    say(f"\nTests building InMemorySaver() (wall time {wall_base + wall_swap:.0f} s):")
    for label, outcomes in (("InMemorySaver", base), ("JsonlSaver", swap)):
        passed = sum(1 for e in outcomes.values() if e["outcome"] == "passed")
        say(f"  {label:14} passed {passed:5} (of {len(outcomes)})")
    lost = sorted(
        k for k, e in swap.items()
        if e["outcome"] != "passed" and base.get(k, {}).get("outcome") == "passed"
    )  # fmt: skip
    print_lost(lost, swap, "with InMemorySaver but not with a JsonlSaver in its place")
    say("(a test reading InMemorySaver internals, such as saver.blobs, fails for that alone)")
    return 1 if lost else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--savers", default="sqlite,jsonl",
                        help="first one is the baseline: sqlite, memory, jsonl, redis")  # fmt: skip
    parser.add_argument("--quick", action="store_true", help="the ~2 minute subset of files")
    parser.add_argument("--inmemory", action="store_true",
                        help="instead: tests that build InMemorySaver() themselves, as written "
                        "and with a JsonlSaver in its place")  # fmt: skip
    parser.add_argument("--python", help="interpreter with the test dependencies")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    parser.add_argument("-n", "--workers", default=None,
                        help="pytest-xdist workers (default: none)")  # fmt: skip
    parser.add_argument("pytest_args", nargs="*", help="after --: passed to pytest")
    args = parser.parse_args()
    args.cache = args.cache.expanduser().resolve()
    savers = [s.strip() for s in args.savers.split(",") if s.strip()]
    python = ensure_python(args)
    sdist = ensure_sdist(python, installed_langgraph(python), args.cache)
    files = QUICK_ARGS if args.quick else ["tests"]
    extra = list(args.pytest_args)
    if args.workers:
        extra += ["-n", str(args.workers)]
    if args.inmemory:
        return inmemory(python, sdist, args.cache, files, extra)
    options = ["--lgctx-only-checkpointer", f"--lgctx-savers={','.join(savers)}", *files, *extra]
    outcomes, wall = run_pytest(python, sdist, args.cache, options)
    say(f"(every outcome, with tracebacks: {args.cache / 'last-report.json'})")
    return summarize(outcomes, savers, wall)


if __name__ == "__main__":
    sys.exit(main())
