"""Commands that move threads between stores: ``import`` (a `SqliteSaver` database,
`langgraph_ctx.migrate`) and ``copy`` (directories and Redis, `storage.transfer`)."""

from __future__ import annotations

import re
import signal
import sys
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

from langgraph_ctx.cli._app import (
    CliError,
    DirOpt,
    JsonOpt,
    _console,
    _echo_json,
    _state,
    app,
)
from langgraph_ctx.errors import (
    CorruptLineWarning,
    MissingExtraError,
    ThreadExistsError,
    ThreadNotFoundError,
)


@contextmanager
def _deferred_interrupt() -> Iterator[Callable[[], None]]:
    """Ctrl-C as a request to stop at the next safe point, not an exception anywhere.

    A ``KeyboardInterrupt`` raised inside a C extension's callback (ormsgpack's
    ``ext_hook`` while a checkpoint is decoded) comes out as ``ValueError: ext_hook
    failed``; so SIGINT only sets a flag, and the returned ``check`` raises
    ``KeyboardInterrupt`` where the caller calls it (between two checkpoints).
    """
    requested = False

    def _handler(signum: int, frame: Any) -> None:
        nonlocal requested
        requested = True

    def check() -> None:
        if requested:
            raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGINT, _handler)
    except ValueError:  # not the main thread: signals cannot be handled here
        yield check
        return
    try:
        yield check
    finally:
        signal.signal(signal.SIGINT, previous)


@app.command("import")
def import_(
    ctx: typer.Context,
    source: Annotated[
        str, typer.Argument(metavar="SOURCE", help="sqlite:///path/to/checkpoints.db (or a path).")
    ],
    only: Annotated[
        list[str] | None,
        typer.Option("--thread", "-t", help="Import only this thread (repeatable)."),
    ] = None,
    force: Annotated[
        bool,
        typer.Option(
            "--force", help="Replace threads that exist (the old file becomes <thread>.jsonl.1)."
        ),
    ] = False,
    skip_existing: Annotated[
        bool,
        typer.Option(
            "--skip-existing",
            help="Leave threads that already exist as they are (resume an interrupted import).",
        ),
    ] = False,
    check: Annotated[
        bool,
        typer.Option("--check", help="Compare every imported checkpoint with the database."),
    ] = False,
    modules: Annotated[
        list[str] | None,
        typer.Option(
            "--module",
            help="An application module to import first, for the classes of its state "
            "(repeatable; run where it imports).",
        ),
    ] = None,
    plain_data: Annotated[
        bool,
        typer.Option(
            "--plain-data",
            help="Import values whose classes cannot be made here as their plain fields "
            "(for good; without it such an import stops).",
        ),
    ] = False,
    as_json: JsonOpt = False,
    directory: DirOpt = None,
) -> None:
    """Migrate a SqliteSaver database into JSONL threads (same state and history).

    Ctrl-C stops between two checkpoints: the threads already imported stay, complete,
    and ``--skip-existing`` imports the rest.
    """
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    from langgraph_ctx.migrate import (
        count_checkpoints,
        import_sqlite,
        sqlite_path,
        sqlite_thread_ids,
    )

    if force and skip_existing:
        raise typer.BadParameter("give --force or --skip-existing, not both", param_hint="--force")
    state = _state(ctx)
    if state.root.exists() and not state.root.is_dir():
        raise CliError(f"not a directory: {state.root}")
    wanted = only or sqlite_thread_ids(source)
    existing = (
        [t for t in wanted if Path(state.saver().path(t)).exists()] if state.root.is_dir() else []
    )
    if existing and not (force or skip_existing):
        shown = ", ".join(existing[:5]) + (" ..." if len(existing) > 5 else "")
        raise CliError(
            f"{len(existing)} thread(s) already exist in {state.root}: {shown}; "
            "pass --skip-existing to import only the others, or --force to replace them "
            "(the old files are kept as .jsonl.1)"
        )
    todo = [t for t in wanted if t not in set(existing)] if skip_existing else wanted
    total = count_checkpoints(source, todo)
    console = _console(stderr=True)
    with (
        _deferred_interrupt() as stop_requested,
        Progress(
            TextColumn("importing"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("checkpoints"),
            TimeElapsedColumn(),
            console=console,
            disable=as_json or not console.is_terminal,
        ) as progress,
    ):
        task = progress.add_task("import", total=total)

        def advance(n: int) -> None:
            progress.advance(task, n)
            stop_requested()

        try:
            report = import_sqlite(
                source,
                state.root,
                threads=only or None,
                force=force,
                skip_existing=skip_existing,
                progress=advance,
                plain_data=plain_data,
                check=check,
                modules=modules or (),
            )
        except ThreadExistsError as exc:
            raise CliError(f"{exc} (pass --skip-existing or --force)") from None
        except ThreadNotFoundError as exc:
            raise CliError(f"{exc} in the database {source}") from None
        except KeyboardInterrupt:
            progress.stop()
            done = [t for t in todo if t not in existing and Path(state.saver().path(t)).exists()]
            typer.echo(
                f"interrupted: {len(done)} of {len(todo)} thread(s) imported, complete; "
                "run the same command with --skip-existing to import the rest",
                err=True,
            )
            sys.exit(130)
    problems = report.problems  # (with --check: against what the import read)
    if as_json:
        out = report.to_dict()
        if check:
            out["check"] = {"ok": not problems, "problems": problems}
        _echo_json(out)
    else:
        for t in report.threads:
            replaced = " (replaced; old file kept as backup)" if t.replaced else ""
            typer.echo(
                f"{t.thread_id}: {t.checkpoints} checkpoints, {t.writes} writes -> {t.path}"
                f"{replaced}"
            )
        if report.skipped:
            typer.echo(f"skipped {len(report.skipped)} existing thread(s)")
        typer.echo(
            f"imported {len(report.threads)} thread(s), {report.checkpoints} checkpoints "
            f"from {sqlite_path(source)}"
        )
        if check:
            typer.echo("check: every checkpoint matches the database" if not problems else "")
            for p in problems:
                typer.echo(f"check: {p}", err=True)
    if problems:
        raise typer.Exit(1)


_STORES = "redis://..., redis+cluster://host:port,... (a Redis Cluster) or a directory"


@app.command()
def copy(
    ctx: typer.Context,
    thread: Annotated[
        list[str] | None,
        typer.Argument(metavar="THREAD", help="Threads to copy.", show_default=False),
    ] = None,
    to: Annotated[
        str | None,
        typer.Option("--to", help=f"Copy from --dir to this store: {_STORES}."),
    ] = None,
    from_: Annotated[
        str | None,
        typer.Option("--from", help=f"Copy from this store into --dir: {_STORES}."),
    ] = None,
    new_id: Annotated[
        str | None, typer.Option("--as", help="Thread id in the target (one thread only).")
    ] = None,
    prefix: Annotated[
        str | None, typer.Option("--prefix", help="Redis key prefix (default: langgraph).")
    ] = None,
    all_threads: Annotated[bool, typer.Option("--all", help="Copy every thread.")] = False,
    as_json: JsonOpt = False,
    directory: DirOpt = None,
) -> None:
    """Copy threads between --dir and Redis or another directory, line for line."""
    from langgraph_ctx.context.archive.copies import copy_archives
    from langgraph_ctx.storage.transfer import copy_thread_between

    state = _state(ctx)
    if (to is None) == (from_ is None):
        raise typer.BadParameter("give exactly one of --to and --from", param_hint="--to")
    if new_id is not None and (all_threads or len(thread or []) != 1):
        raise typer.BadParameter("--as needs exactly one thread", param_hint="--as")
    if bool(thread) == all_threads:
        raise typer.BadParameter("name threads to copy, or pass --all", param_hint="THREAD")
    local = state.saver().storage if from_ is None else _local_storage(state.root)
    remote = _open_store(to or from_ or "", prefix, target=to is not None)
    source, target = (local, remote) if to is not None else (remote, local)
    try:
        with warnings.catch_warnings(record=True) as listing:  # shown below, and counted
            warnings.simplefilter("always")
            every = sorted(source.thread_ids())
        left_out = [w for w in listing if issubclass(w.category, CorruptLineWarning)]
        for w in listing:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        # A thread goes with its context archives (as `delete` takes them), so an archive
        # is copied on its own only when its thread is not copied.
        ids = _owners(list(thread or []) if not all_threads else every)
        copied = []
        for tid in ids:
            as_id = new_id or tid
            try:
                with copy_archives(source, tid, target, as_id, thread_ids=every) as archives:
                    lines = copy_thread_between(source, tid, target, as_id)
            except ThreadNotFoundError as exc:
                raise CliError(f"{exc} in {_shown(source)}") from None
            except ThreadExistsError as exc:
                raise CliError(f"{exc} (in {_shown(target)})") from None
            for from_id, copy_id, n in [(tid, as_id, lines), *archives.copied]:
                copied.append(
                    {
                        "thread_id": from_id,
                        "target_id": copy_id,
                        "lines": n,
                        "target": target.describe(copy_id),
                    }
                )
            for kept in archives.kept:
                typer.echo(f"kept {target.describe(kept)}: it was there already", err=True)
    finally:
        close = getattr(getattr(remote, "client", None), "close", None)
        if callable(close):
            close()
    if as_json:
        _echo_json(copied)
    else:
        for c in copied:
            typer.echo(f"copied {c['thread_id']} -> {c['target']} ({c['lines']} lines)")
        if not copied and not left_out:  # --all on an empty store (a wrong database?)
            typer.echo(f"no threads to copy in {_shown(source)}")
    if all_threads and left_out:  # a backup missing a thread must not look complete
        raise CliError(
            f"{len(left_out)} log(s) not copied: the header does not read or names another "
            "thread (see above)"
        )


def _shown(store: Any) -> str:
    """A store for messages: a directory's path, a Redis server without its password."""
    return str(getattr(store, "server", None) or getattr(store, "root", None) or store)


def _owners(thread_ids: list[str]) -> list[str]:
    """The threads to copy, without the archives of another of them (copied with it)."""
    from langgraph_ctx.context.archive.forks import archive_owner

    wanted = set(thread_ids)
    out = []
    for tid in dict.fromkeys(thread_ids):
        owner = archive_owner(tid)
        while owner is not None and owner not in wanted:
            owner = archive_owner(owner)
        if owner is None:
            out.append(tid)
    return out


def _local_storage(root: Path) -> Any:
    from langgraph_ctx.storage.jsonl import JsonlStorage

    if root.exists() and not root.is_dir():
        raise CliError(f"not a directory: {root}")
    return JsonlStorage(root)


_LIKE_A_URL = re.compile(r"[A-Za-z][\w+.-]+:|[^/]*//|\[|[^/]*@|[\w.-]+:\d+(/|$)")
"""A store URL mistyped, not a new directory: a scheme and a colon before any slash
(``redis:/host``, ``redis:host``, ``user:pw@host``), ``//`` without one, a bracketed host
(``[::1]:6379``), a user before ``@``, or ``host:port``; ``backups/08:30`` is a directory."""

_REDIS_URLS = ("redis://", "rediss://", "unix://", "redis+cluster://", "rediss+cluster://")


def _open_store(where: str, prefix: str | None, *, target: bool = False) -> Any:
    """The store of ``--to`` / ``--from``; a ``target`` directory is made by the first
    copy into it (as ``--dir`` is by ``--from``), a source must exist."""
    if where.startswith(_REDIS_URLS):
        try:
            from langgraph_ctx.storage.redis import RedisStorage
        except MissingExtraError as exc:  # (not the URL: it may hold a password)
            missing = MissingExtraError("copying to or from Redis", exc.extra, exc.package)
            raise CliError(str(missing)) from None
        kwargs = {"prefix": prefix} if prefix else {}
        return RedisStorage.from_url(where, **kwargs)
    if "://" in where:
        scheme = where.split("://", 1)[0]
        raise CliError(
            f"unsupported store {scheme}:// in {where!r}: use redis://, rediss://, "
            "unix://, redis+cluster:// (a Redis Cluster) or a directory path"
        )
    if prefix:
        raise typer.BadParameter("--prefix applies to Redis only", param_hint="--prefix")
    path = Path(where)
    if path.exists() and not path.is_dir():
        raise CliError(f"not a directory: {path}")
    if not path.exists() and not target:
        raise CliError(f"no such directory: {path}")
    if not path.exists() and _LIKE_A_URL.match(where):  # not made from a mistyped store URL
        raise CliError(
            f"no such directory: {path}, and not a store URL: {_STORES}"
        )
    return _local_storage(path)
