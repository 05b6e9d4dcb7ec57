"""A throwaway PostgreSQL cluster on 127.0.0.1, for the benchmarks that compare PostgresSaver.

    with PostgresServer() as pg:                 # initdb + start; stopped and removed after
        url = pg.create_database("chat400")      # a fresh database per run
        saver = PostgresSaver(psycopg.connect(url, **CONNECT_KWARGS))

    reason = postgres_unavailable()              # None, or why the cluster cannot start

Not a benchmark itself (``perf.py`` and ``storage.py`` use it). It runs Debian's
PostgreSQL binaries (``/usr/lib/postgresql/<version>/bin``, newest first;
``$PG_BIN`` overrides) with the server's default settings (``fsync`` and
``synchronous_commit`` on, as a real deployment), listening on a free loopback
port, its data and socket in a temporary directory. ``initdb`` refuses to run as
root, so when the benchmark runs as root the cluster is created and run as an
unprivileged user (``postgres`` if it exists, else ``nobody``) through ``runuser``
or ``setpriv``, with the temporary directory handed to that user.
"""

from __future__ import annotations

import atexit
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from typing_extensions import Self

# `python benchmarks/x.py` puts benchmarks/ on the path, not the repository root that
# holds tests/ (as benchmarks/redis.py and perf.py do for tests.redis_server).
ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.local_server import LocalServer, free_port  # noqa: E402

PG_ROOT = Path("/usr/lib/postgresql")

CONNECT_KWARGS: dict[str, Any] = {"autocommit": True, "prepare_threshold": 0}
"""What LangGraph's PostgresSaver expects of a connection (plus ``row_factory=dict_row``,
added by `connect_kwargs` so that importing this module does not import psycopg)."""


def connect_kwargs() -> dict[str, Any]:
    """Keyword arguments for ``psycopg.connect`` / a pool's ``kwargs``, as PostgresSaver needs."""
    from psycopg.rows import dict_row

    return {**CONNECT_KWARGS, "row_factory": dict_row}


def pg_bin() -> Path | None:
    """The directory of ``initdb`` / ``pg_ctl``: ``$PG_BIN``, else Debian's newest version."""
    if os.environ.get("PG_BIN"):
        return Path(os.environ["PG_BIN"])
    versions = sorted(
        (p for p in PG_ROOT.glob("*/bin") if (p / "initdb").exists()),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
        reverse=True,
    )
    return versions[0] if versions else None


def _run_as() -> tuple[list[str], pwd.struct_passwd | None] | str:
    """The command prefix that drops root (and the user), or why it cannot be done."""
    if os.geteuid() != 0:
        return [], None
    for name in ("postgres", "nobody"):
        try:
            user = pwd.getpwnam(name)
        except KeyError:
            continue
        if shutil.which("runuser"):
            return ["runuser", "-u", name, "--"], user
        if shutil.which("setpriv"):
            prefix = ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}"]
            return [*prefix, "--clear-groups"], user
        return "running as root and neither runuser nor setpriv is installed"
    return "running as root and there is no unprivileged user (postgres, nobody) to run it"


def postgres_unavailable() -> str | None:
    """Why a local cluster cannot be started (binaries, packages, root), or None."""
    binaries = pg_bin()
    if binaries is None or not (binaries / "initdb").exists():
        return (
            f"no PostgreSQL binaries under {PG_ROOT}/*/bin (Debian/Ubuntu: apt-get install "
            "postgresql; or set $PG_BIN)"
        )
    try:
        import langgraph.checkpoint.postgres  # noqa: F401
        import psycopg  # noqa: F401
    except ImportError as exc:
        return f"{exc.name} is not installed (pip install -e '.[bench]')"
    prefix = _run_as()
    return prefix if isinstance(prefix, str) else None


class PostgresServer(LocalServer):
    """One PostgreSQL cluster in a temporary directory, bound to 127.0.0.1 on a free port.

    `start` runs ``initdb`` and ``pg_ctl start`` (about a second); `stop` stops the
    server and removes the directory. Also a context manager (`LocalServer`). A started
    server is stopped at interpreter exit if the caller forgot.
    """

    def __init__(self) -> None:
        self.port = free_port()
        self.directory: Path | None = None
        self.started = False

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def _cmd(self, *args: str) -> list[str]:
        prefix = _run_as()
        assert not isinstance(prefix, str), prefix
        binaries = pg_bin()
        assert binaries is not None
        return [*prefix[0], str(binaries / args[0]), *args[1:]]

    def start(self) -> Self:
        reason = postgres_unavailable()
        if reason is not None:
            raise RuntimeError(f"PostgreSQL cannot be started: {reason}")
        self.directory = Path(tempfile.mkdtemp(prefix="langgraph-ctx-pg-"))
        prefix = _run_as()
        assert not isinstance(prefix, str)
        user = prefix[1]
        if user is not None:
            os.chown(self.directory, user.pw_uid, user.pw_gid)
        data, log = self.directory / "data", self.directory / "server.log"
        steps = [
            self._cmd(
                "initdb", "-D", str(data), "-U", "postgres", "-A", "trust", "-E", "UTF8",
                "--no-sync",  # the cluster is thrown away: no need to flush its creation
            ),
            self._cmd(
                "pg_ctl", "-D", str(data), "-l", str(log), "-w", "-t", "60", "-o",
                f"-p {self.port} -k {self.directory} -c listen_addresses=127.0.0.1",
                "start",
            ),
        ]  # fmt: skip
        for command in steps:
            done = subprocess.run(command, capture_output=True, text=True, cwd=self.directory)
            if done.returncode != 0:
                detail = (done.stderr or done.stdout)[-1500:]
                if log.exists():
                    detail += "\n" + log.read_text(errors="replace")[-1500:]
                self.stop()
                raise RuntimeError(f"{Path(command[-1]).name} failed: {detail}")
            self.started = command[-1] == "start"
        atexit.register(self.stop)
        return self

    def create_database(self, name: str) -> str:
        """A new, empty database (dropped first if it exists); returns its URL."""
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def database_bytes(self, name: str) -> int:
        """``pg_database_size`` of `name`: what the database takes on disk."""
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            row = conn.execute("SELECT pg_database_size(%s)", (name,)).fetchone()
        assert row is not None
        return int(row[0])

    def stop(self) -> None:
        """Stop the server (fast shutdown) and remove its directory."""
        if self.directory is None:
            return
        if self.started:
            subprocess.run(
                self._cmd("pg_ctl", "-D", str(self.directory / "data"), "-m", "fast", "-w", "stop"),
                capture_output=True,
            )
            self.started = False
        shutil.rmtree(self.directory, ignore_errors=True)
        self.directory = None
