"""Commands that change threads: ``fork``, ``revert``, ``prune`` (and its retention
mode, ``prune --older-than``, over `langgraph_ctx.saver.retention.sweep`)."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer

from langgraph_ctx.cli._app import (
    DirOpt,
    JsonOpt,
    ThreadArg,
    _checkpoint,
    _echo_json,
    _saver,
    _thread_errors,
    app,
)


def _head_json(saver: Any, thread_id: str, head: dict[str, Any]) -> dict[str, Any]:
    return {
        "thread_id": thread_id,
        "head": head["configurable"].get("checkpoint_id"),
        "path": saver.path(thread_id),
        "backups": saver.storage.backups(thread_id),
    }


@app.command()
def fork(
    ctx: typer.Context,
    source: Annotated[str, typer.Argument(metavar="SOURCE", help="Thread to copy.")],
    target: Annotated[str, typer.Argument(metavar="TARGET", help="New thread id.")],
    checkpoint: Annotated[
        str | None,
        typer.Option(
            "--checkpoint",
            "-c",
            help="Fork the thread as it was at this checkpoint (default: all).",
        ),
    ] = None,
    as_json: JsonOpt = False,
    directory: DirOpt = None,
) -> None:
    """Copy a thread to a new id, whole or as it was at a checkpoint."""
    saver, info = _checkpoint(ctx, source, checkpoint) if checkpoint else (_saver(ctx), None)
    at = info.checkpoint_id if info else None
    with _thread_errors(ctx):
        head = saver.fork(source, target, checkpoint_id=at)
    out = {**_head_json(saver, target, head), "source": source, "checkpoint_id": at}
    if as_json:
        _echo_json(out)
        return
    where = f" at {at}" if at else ""
    typer.echo(f"forked {source}{where} -> {target}")
    typer.echo(f"head: {out['head']}")
    typer.echo(f"file: {out['path']}")


@app.command()
def revert(
    ctx: typer.Context,
    thread: ThreadArg,
    checkpoint: Annotated[
        str,
        typer.Argument(
            metavar="CHECKPOINT", help="Checkpoint to roll back to (id, prefix, head~N)."
        ),
    ],
    as_json: JsonOpt = False,
    directory: DirOpt = None,
) -> None:
    """Roll a thread back to a checkpoint; the previous file is kept as <thread>.jsonl.1."""
    saver, info = _checkpoint(ctx, thread, checkpoint)
    at = info.checkpoint_id
    with _thread_errors(ctx):
        head = saver.revert(thread, at)
    out = _head_json(saver, thread, head)
    out["backup"] = out["backups"][0] if out["backups"] else None
    if as_json:
        _echo_json(out)
        return
    typer.echo(f"reverted {thread} to {at}")
    typer.echo(f"head: {out['head']}")
    typer.echo(f"backup: {out['backup']}")


class PruneStrategy(str, Enum):
    keep_latest = "keep_latest"
    delete = "delete"


@app.command()
def prune(
    ctx: typer.Context,
    thread: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="THREAD",  # typer adds the brackets and dots: [THREAD]...
            help="Threads to prune (default with --older-than: every thread).",
            show_default=False,
        ),
    ] = None,
    older_than: Annotated[
        str | None,
        typer.Option(
            "--older-than",
            help="Only threads idle this long (newest checkpoint): 30d, 12h, 2w, 90m, 45s.",
            show_default=False,
        ),
    ] = None,
    keep_latest: Annotated[
        bool,
        typer.Option(
            "--keep-latest",
            help="Keep each thread's latest checkpoint and its pending writes "
            "(the default for named threads; with --older-than the default is delete).",
        ),
    ] = False,
    strategy: Annotated[
        PruneStrategy | None,
        typer.Option(
            "--strategy",
            help="keep_latest: keep each namespace's latest checkpoint; delete: remove threads.",
            show_default=False,
        ),
    ] = None,
    archives: Annotated[
        bool,
        typer.Option(
            "--archives",
            help="With --older-than: also sweep context archives on their own age "
            "(they are always deleted with their thread).",
        ),
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show what would be done; change nothing.")
    ] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    as_json: JsonOpt = False,
    directory: DirOpt = None,
) -> None:
    """Drop old checkpoints or delete threads (no backup is kept); with --older-than,
    the threads idle that long (retention, like the server's thread TTL).

    A thread's context archives (<thread>.ctx.<id>) are deleted with it. --keep-latest
    keeps what a thread waiting at an interrupt needs to resume.
    """
    if keep_latest and strategy is PruneStrategy.delete:
        raise typer.BadParameter(
            "give --keep-latest or --strategy delete, not both", param_hint="--keep-latest"
        )
    if keep_latest:
        strategy = PruneStrategy.keep_latest
    if older_than is not None:
        _sweep(ctx, thread or None, older_than, strategy, archives, dry_run, yes, as_json)
        return
    if not thread:
        raise typer.BadParameter("name threads to prune, or pass --older-than", param_hint="THREAD")
    if archives:
        raise typer.BadParameter("--archives goes with --older-than", param_hint="--archives")
    _prune_threads(ctx, thread, strategy or PruneStrategy.keep_latest, dry_run, yes, as_json)


def _prune_threads(
    ctx: typer.Context,
    thread: list[str],
    strategy: PruneStrategy,
    dry_run: bool,
    yes: bool,
    as_json: bool,
) -> None:
    from langgraph_ctx import browse
    from langgraph_ctx.context.archive import archive_threads_of, delete_archives

    saver = _saver(ctx)
    before: dict[str, tuple[int, int]] = {}
    with _thread_errors(ctx):
        for tid in thread:
            infos = browse.require_thread(saver, tid)
            before[tid] = (len(infos), Path(saver.path(tid)).stat().st_size)
    every = list(saver.storage.thread_ids())
    going = {tid: archive_threads_of(tid, every) for tid in thread}
    if dry_run:
        plan: list[dict[str, Any]] = [
            {
                "thread_id": tid,
                "action": strategy.value,
                "checkpoints_before": before[tid][0],
                **({"archives": going[tid]} if strategy is PruneStrategy.delete else {}),
            }
            for tid in thread
        ]
        if as_json:
            _echo_json(plan)
            return
        for p in plan:
            verb = "would delete" if strategy is PruneStrategy.delete else "would prune"
            extra = f", {len(p['archives'])} context archive(s)" if p.get("archives") else ""
            typer.echo(f"{verb} {p['thread_id']} ({p['checkpoints_before']} checkpoints{extra})")
        return
    if not yes:
        what = (
            "delete"
            if strategy is PruneStrategy.delete
            else "drop all but the latest checkpoint of"
        )
        typer.confirm(f"{what} {', '.join(thread)}? This cannot be undone", abort=True)
    saver.prune(thread, strategy=strategy.value)
    results = []
    for tid in thread:
        count, size = before[tid]
        if strategy is PruneStrategy.delete:
            removed = delete_archives(saver, tid, thread_ids=every)
            result: dict[str, Any] = {
                "thread_id": tid,
                "deleted": True,
                "checkpoints_before": count,
            }
            if removed:
                result["archives"] = removed
            results.append(result)
            continue
        infos = saver.checkpoint_infos(tid)
        head = browse.head_info(infos)
        results.append(
            {
                "thread_id": tid,
                "deleted": False,
                "checkpoints_before": count,
                "checkpoints_after": len(infos),
                "bytes_before": size,
                "bytes_after": Path(saver.path(tid)).stat().st_size,
                "head": head.checkpoint_id if head else None,
                "path": saver.path(tid),
            }
        )
    if as_json:
        _echo_json(results)
        return
    from langgraph_ctx.cli.render import human_size

    for r in results:
        if r["deleted"]:
            extra = f", {len(r['archives'])} context archive(s)" if r.get("archives") else ""
            typer.echo(f"deleted {r['thread_id']} ({r['checkpoints_before']} checkpoints{extra})")
            continue
        typer.echo(
            f"pruned {r['thread_id']}: {r['checkpoints_before']} -> {r['checkpoints_after']} "
            f"checkpoints, {human_size(r['bytes_before'])} -> {human_size(r['bytes_after'])}"
        )
        typer.echo(f"head: {r['head']}")


def _sweep(
    ctx: typer.Context,
    thread: list[str] | None,
    older_than: str,
    strategy: PruneStrategy | None,
    archives: bool,
    dry_run: bool,
    yes: bool,
    as_json: bool,
) -> None:
    """``prune --older-than``: `retention.sweep`, planned first, confirmed, then done."""
    from langgraph_ctx import browse
    from langgraph_ctx.saver.retention import parse_age, sweep

    try:
        age = parse_age(older_than)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--older-than") from None
    saver = _saver(ctx)
    if thread:
        with _thread_errors(ctx):
            for tid in thread:
                browse.require_thread(saver, tid)
    options = {
        "older_than": age,
        "keep_latest": strategy is PruneStrategy.keep_latest,
        "include_archives": archives,
    }
    plan = sweep(saver, dry_run=True, threads=thread, **options)  # type: ignore[arg-type]
    if not dry_run and plan.actions and not yes:
        _print_sweep(plan, as_json=False, err=True)
        typer.confirm(f"{_sweep_summary(plan)}? This cannot be undone", abort=True, err=True)
    if not dry_run and plan.actions:
        chosen = [a.thread_id for a in plan.actions]  # only what was shown and confirmed
        plan = sweep(saver, threads=chosen, **options)  # type: ignore[arg-type]
    _print_sweep(plan, as_json=as_json)


def _sweep_summary(report: Any) -> str:
    parts = []
    if report.deleted:
        archives = sum(len(a.archives) for a in report.actions)
        extra = f" and {archives} context archive(s)" if archives else ""
        parts.append(f"delete {len(report.deleted)} thread(s){extra}")
    if report.pruned:
        parts.append(f"drop all but the latest checkpoints of {len(report.pruned)} thread(s)")
    return " and ".join(parts) or "nothing"


def _print_sweep(report: Any, *, as_json: bool, err: bool = False) -> None:
    from langgraph_ctx import browse

    if as_json:
        _echo_json(report.to_dict())
        return
    when = browse.format_ts(report.cutoff)
    if not report.actions:
        typer.echo(f"nothing to prune: no thread idle since before {when} UTC", err=err)
    for a in report.actions:
        verb = {"delete": "deleted", "keep_latest": "pruned"}[a.action]
        if report.dry_run or err:
            verb = {"delete": "would delete", "keep_latest": "would prune"}[a.action]
        change = (
            f"{a.checkpoints_before} checkpoints"
            if a.action == "delete"
            else f"{a.checkpoints_before} -> {a.checkpoints_after} checkpoints"
        )
        extra = f", {len(a.archives)} context archive(s)" if a.archives else ""
        typer.echo(
            f"{verb} {a.thread_id}: {change}{extra}, last active "
            f"{browse.format_ts(a.last_activity)} UTC",
            err=err,
        )
    for tid, why in report.errors.items():
        typer.echo(f"warning: skipped {tid}: {why}", err=True)
