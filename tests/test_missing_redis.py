"""Without the redis package, every door to Redis says what to install, once.

The package proper raises `MissingExtraError` (`test_storage_safety`); these are the
doors around it: the LangGraph server's factory (``LANGGRAPH_CTX_REDIS_URL`` set, and
the ``server`` extra does not bring redis) and the CLI's ``copy --to redis://``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

WORKTREE = Path(__file__).resolve().parents[1]

HIDE_REDIS = """
import sys

class HideRedis:  # as if the redis extra were not installed
    def find_spec(self, name, path=None, target=None):
        if name == "redis" or name.startswith("redis."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)

sys.meta_path.insert(0, HideRedis())
"""

INSTALL = "pip install 'langgraph-ctx[redis]'"


def _run(script: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", HIDE_REDIS + textwrap.dedent(script)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(WORKTREE)},
        timeout=120,
    )


def test_the_server_factory_names_the_redis_extra(tmp_path: Path) -> None:
    """It raised a bare ModuleNotFoundError('redis') from inside the factory."""
    proc = _run(
        """
        import asyncio, os
        from langgraph_ctx.errors import MissingExtraError
        from langgraph_ctx.server import create_checkpointer, redis_checkpointer

        async def enter(factory):
            async with factory() as saver:
                return saver

        os.environ["LANGGRAPH_CTX_REDIS_URL"] = "redis://127.0.0.1:1/0"
        for factory in (create_checkpointer, lambda: redis_checkpointer("redis://h:1/0")):
            try:
                asyncio.run(enter(factory))
            except MissingExtraError as exc:
                assert isinstance(exc, ImportError) and exc.name == "redis"
                print(exc)
        """,
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 2 and lines[0] == lines[1]
    assert lines[0] == (
        "redis_checkpointer (create_checkpointer's choice when LANGGRAPH_CTX_REDIS_URL is "
        f"set) needs the redis package, which is not installed: {INSTALL}"
    )


def test_the_cli_says_it_once(tmp_path: Path) -> None:
    """It said: ``error: Redis needs the redis package (RedisLogSaver needs the redis
    package, which is not installed: pip install ...): pip install ...``."""
    (tmp_path / "chats").mkdir()
    proc = _run(
        """
        from langgraph_ctx.cli.app import run
        run(["--dir", "chats", "copy", "--all", "--to", "redis://:secret@127.0.0.1:1/0"])
        """,
        tmp_path,
    )
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.strip() == (
        "error: copying to or from Redis needs the redis package, which is not installed: "
        f"{INSTALL}"
    )
    assert "secret" not in proc.stderr


def test_prune_usage_line_has_one_pair_of_brackets() -> None:
    """The metavar ``[THREAD]...`` was bracketed again by typer: ``[[THREAD]...]...``."""
    from typer.testing import CliRunner

    from langgraph_ctx.cli.app import app

    result = CliRunner().invoke(app, ["prune", "--help"])
    assert result.exit_code == 0, result.output
    usage = result.output.splitlines()[0]
    assert usage == "Usage: langgraph-ctx prune [OPTIONS] [THREAD]...", usage
