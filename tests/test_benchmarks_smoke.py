"""Smoke tests of the benchmark scripts: each runs with ``--quick`` and prints its tables.

The three scripts start together (one subprocess each, `sys.executable`) and each test
checks its script's output: exit code 0, the tables and their columns, and that the
numbers are sane (counts add up, ratios positive). No result is hard-coded: the scripts
must print today's numbers and tomorrow's alike.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.redis_server import redis_server_binary

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ("storage", "reliability", "pipeline")


@pytest.fixture(scope="module")
def outputs() -> dict[str, subprocess.CompletedProcess[str]]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    running = {
        name: subprocess.Popen(
            [sys.executable, str(ROOT / "benchmarks" / f"{name}.py"), "--quick"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in SCRIPTS
    }
    done = {}
    for name, child in running.items():
        try:
            out, err = child.communicate(timeout=180)
        except subprocess.TimeoutExpired:
            for other in running.values():
                other.kill()
            raise
        done[name] = subprocess.CompletedProcess(child.args, child.returncode, out, err)
    return done


def table(output: str, header_start: str) -> list[dict[str, str]]:
    """The rows of the Markdown table whose header starts with `header_start`."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    header = [c.strip() for c in lines[start].strip("|").split("|")]
    assert set(lines[start + 1]) <= set("|-: "), lines[start + 1]
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert len(cells) == len(header), line
        rows.append(dict(zip(header, cells, strict=True)))
    assert rows, f"table {header_start!r} is empty"
    return rows


def number(cell: str) -> float:
    match = re.fullmatch(r"(-?[\d,]*\.?\d+)x?", cell)
    assert match, f"not a number: {cell!r}"
    return float(match.group(1).replace(",", ""))


def run_script(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``benchmarks/<name> args`` in a fresh interpreter, from the project's root."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    return subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / name), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )


def check_ran(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def test_storage_quick(outputs: dict[str, subprocess.CompletedProcess[str]]) -> None:
    out = check_ran(outputs["storage"])
    chat = table(out, "| saver | stored bytes |")
    assert [r["saver"] for r in chat][:3] == ["InMemorySaver", "SqliteSaver", "JsonlSaver"]
    for r in chat:
        assert number(r["stored bytes"]) > 0 and number(r["per raw byte"]) > 0
    agent = table(out, "| host | saver | raw message bytes |")
    pairs = {(r["host"], r["saver"]) for r in agent}
    assert pairs == {
        (host, saver)
        for host in ("create_react_agent", "create_agent")
        for saver in ("JsonlSaver", "SqliteSaver")
    }
    for r in agent:
        raw, stored = number(r["raw message bytes"]), number(r["stored bytes"])
        assert raw > 12 * 6000  # 12 quick turns, one ~6 KB tool result each
        assert stored > 0
        assert number(r["stored / raw"]) == pytest.approx(stored / raw, abs=0.01)
        assert number(r["vs SqliteSaver"]) > 0
        assert r["goal <= 3x"] in (("met", "MISSED") if r["saver"] == "JsonlSaver" else ("-",))
    # both hosts get the same conversation
    assert len({r["raw message bytes"] for r in agent}) == 1


def test_reliability_quick(outputs: dict[str, subprocess.CompletedProcess[str]]) -> None:
    out = check_ran(outputs["reliability"])
    (kill,) = table(out, "| trials |")
    assert number(kill["trials"]) == 10
    assert number(kill["acknowledged turns"]) >= 10  # each trial waits for one ack
    assert 0 <= number(kill["acknowledged turns lost"]) <= number(kill["acknowledged turns"])

    (flips,) = table(out, "| tried | detected |")
    tried = number(flips["tried"])
    assert tried == 100
    parts = ("detected", "crashed, other exception", "harmless", "SILENT")
    assert sum(number(flips[p]) for p in parts) == tried
    assert number(flips["detected"]) == number(flips["of which named error"]) + number(
        flips["of which warning"]
    )
    assert 0 <= number(flips["verify flagged"]) <= tried

    tamper = {r["saver"]: r for r in table(out, "| saver | payloads tried |")}
    assert set(tamper) == {"JsonlSaver", "SqliteSaver"}
    for r in tamper.values():
        tried = number(r["payloads tried"])
        assert tried > 10
        effects = ("objects constructed", "code executed", "errors raised", "read without effect")
        assert all(number(r[e]) >= 0 for e in effects)
        assert number(r["read without effect"]) <= tried

    verify = table(out, "| checkpoints | file bytes |")
    assert [number(r["checkpoints"]) for r in verify] == [200, 800]
    for r in verify:
        assert number(r["file bytes"]) > 0
        if r["verify s"] != "timeout":
            assert number(r["verify s"]) >= 0 and number(r["s per 1k checkpoints"]) >= 0


def test_pipeline_quick(outputs: dict[str, subprocess.CompletedProcess[str]]) -> None:
    out = check_ran(outputs["pipeline"])
    rows = {r["variant"]: r for r in table(out, "| variant | calls | tokens sent mean |")}
    assert list(rows) == ["pipeline", "SummarizationMiddleware", "trim_messages"]
    for r in rows.values():
        calls = number(r["calls"])
        assert calls == 60
        assert 0 < number(r["tokens sent mean"]) <= number(r["p95"]) <= number(r["max"])
        for column in ("calls over budget", "protocol-invalid", "missing latest user msg"):
            assert 0 <= number(r[column]) <= calls
        assert 0 <= number(r["hook ms median"]) <= number(r["hook ms p95"])
    ratios = {r["variant"]: r for r in table(out, "| variant | tokens sent mean | max |")}
    assert number(ratios["pipeline"]["tokens sent mean"]) == 1
    for r in ratios.values():
        assert number(r["tokens sent mean"]) > 0 and number(r["max"]) > 0
        assert number(r["hook ms median"]) >= 0 and number(r["hook ms p95"]) >= 0
    assert re.search(r"Issue 13 goal for the pipeline .*: (met|MISSED)", out)


def test_perf_quick(tmp_path: Path) -> None:
    """``perf.py --quick``: every section of issue 16's list runs and reports its goals.

    PostgreSQL is left out (``--quick`` skips it, and says so) to keep this fast.
    """
    results_path = tmp_path / "perf.json"
    out = check_ran(run_script("perf.py", "--quick", "--markdown", "--json", str(results_path)))
    assert "PostgreSQL columns skipped: --quick" in out
    results = json.loads(results_path.read_text())
    sections = results["sections"]
    assert set(sections) == {"chat400", "agent", "concurrency", "memory", "budget", "fsync"}
    # RedisLogSaver runs where redis-server is installed (its own column otherwise says why not)
    with_redis = {"RedisLogSaver"} if redis_server_binary() else set()
    for name in ("chat400", "agent"):
        savers = sections[name]["savers"]
        assert set(savers) == {"JsonlSaver", "SqliteSaver", "InMemorySaver"} | with_redis
        for saver, figures in savers.items():
            assert figures["ms_turn"] > 0 and figures["history"] > 0
            assert figures["states"] >= sections[name]["turns"]
            assert (figures["cold"] is None) == (saver == "InMemorySaver")
            if figures["cold"] is not None:
                assert figures["cold"] > 0
        rows = table(out, "| metric | JsonlSaver | SqliteSaver | PostgresSaver |")
        assert [r["PostgresSaver"] for r in rows[:4]] == ["skipped"] * 4
        assert rows[4]["metric"] == "cold get_state, Redis / SQLite"
        assert (rows[4]["JSONL / SQLite"] != "n/a") == bool(with_redis)
    rates = sections["concurrency"]["turns_per_s"]
    assert {"InMemorySaver", "JsonlSaver", "AsyncSqliteSaver"} <= set(rates)
    assert all(rate > 0 for rate in rates.values())
    assert sections["memory"]["kb_per_thread"]["JsonlSaver"] > 0
    budget = sections["budget"]
    assert budget["node_ms"] > 0 and budget["approx_ms"] > 0
    assert budget["messages"][0] >= 2000
    fsync = sections["fsync"]
    assert fsync["fsyncs"] >= 1 / 3  # at least one flush per turn's three checkpoints
    assert fsync["ms_on"] > 0 and fsync["ms_off"] > 0
    goals = {r["goal"]: r for r in table(out, "| goal | measured | target | result |")}
    assert len(goals) == len(results["goals"]) >= 14
    for goal in results["goals"]:
        row = goals[goal["goal"]]
        assert row["result"] == {True: "PASS", False: "FAIL", None: "n/a"}[goal["pass"]]
        if goal["value"] is not None:
            assert number(row["measured"]) == pytest.approx(goal["value"], abs=0.006)


def test_perf_breakdown_quick() -> None:
    """``perf_breakdown.py --quick``: a cold open by stage for both savers, each saver's
    CPU a turn by call, and the message bodies from lines and from one binary record."""
    out = check_ran(run_script("perf_breakdown.py", "--quick"))
    stages = table(out, "| stage | JsonlSaver | SqliteSaver |")  # the agent's, first
    by_stage = {r["stage"].replace("&nbsp;", ""): r for r in stages}
    jsonl = {s: number(r["JsonlSaver"]) for s, r in by_stage.items() if r["JsonlSaver"]}
    sqlite = {s: number(r["SqliteSaver"]) for s, r in by_stage.items() if r["SqliteSaver"]}
    assert {"open the saver", "get_tuple", "storage sync (read the log)"} <= set(jsonl)
    assert {"open the saver", "get_tuple (SQLite)", "loads_typed (SQLite)"} <= set(sqlite)
    assert all(ms > 0 for ms in [*jsonl.values(), *sqlite.values()])
    # Nested stages are parts of the ones above them, and the state is read after the open.
    assert jsonl["decode the head's messages"] <= jsonl["build the tuple"] <= jsonl["get_tuple"]
    assert jsonl["whole get_state"] > jsonl["get_tuple"] + jsonl["open the saver"] * 0.99
    assert sqlite["loads_typed (SQLite)"] <= sqlite["get_tuple (SQLite)"]
    for collector in ("off", "on"):
        header = "| | InMemorySaver | JsonlSaver | JSONL - InMemory |"
        start = out.index(f"garbage collector {collector}")
        rows = {r[""]: r for r in table(out[start:], header)}
        for saver in ("InMemorySaver", "JsonlSaver"):
            calls = [number(rows[c][saver]) for c in ("aget_tuple", "aput", "aput_writes")]
            assert all(ms > 0 for ms in calls)
            saver_ms = number(rows["the saver's calls"][saver])
            assert saver_ms == pytest.approx(sum(calls), abs=0.003)
            whole = number(rows["the whole turn"][saver])
            assert whole > saver_ms
            assert number(rows["the rest of the turn"][saver]) == pytest.approx(
                whole - saver_ms, abs=0.003
            )
    bodies = {r["from"]: r for r in table(out, "| from | ms | bytes |")}
    assert len(bodies) == 2 and all(number(r["ms"]) > 0 for r in bodies.values())
    assert re.search(r"The agent's [1-9]\d* message bodies", out)
