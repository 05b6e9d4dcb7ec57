"""The ``langgraph-ctx`` command line: a thin layer over `browse`, `verify`, `migrate`.

Why one module of ~860 lines: it is the whole command line, read the way ``--help`` lists
it; each command is a short typer function (options, one library call, a renderer from
`render`), and they share the ``--dir`` state, the error handling and the JSON output
defined at the top. The logic is in `langgraph_ctx.browse`, `langgraph_ctx.migrate`,
`cli.verify` and `storage.transfer`; the rich output is in `render` and `plot`.

Every command works on a `JsonlSaver` directory: ``--dir``, else ``$LANGGRAPH_CTX_DIR``,
else ``./chats``. Read commands take ``--json`` for scripts. Colours are on only when
stdout is a terminal and ``NO_COLOR`` is not set.

Exit codes: 0 success; 1 the command failed (missing directory, unknown thread or
checkpoint, unreadable log...) or ``verify`` found errors; 2 bad usage (unknown option,
missing argument); 3 ``verify`` found only warnings (torn last lines, empty files).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from typer.core import TyperGroup

from langgraph_ctx import browse
from langgraph_ctx.errors import LangGraphCtxError, ThreadExistsError, ThreadNotFoundError

DIR_ENV = "LANGGRAPH_CTX_DIR"
DEFAULT_DIR = "chats"
DEBUG_ENV = "LANGGRAPH_CTX_DEBUG"
_PIPE_WIDTH = 100_000  # piped output is not wrapped


class CliError(Exception):
    """A failure to report as one line on stderr, with exit code 1."""


# ---------------------------------------------------------------------- plumbing


def _console(stderr: bool = False) -> Console:
    """Rich output: colours and wrapping on a terminal (unless ``NO_COLOR``); neither
    when piped, so lines stay whole for ``grep``."""
    stream = sys.stderr if stderr else sys.stdout
    # NO_COLOR (https://no-color.org): no escape codes at all, bold and dim included.
    colors = None if os.environ.get("NO_COLOR") else "auto"
    console = Console(file=stream, highlight=False, color_system=colors)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console = Console(file=stream, highlight=False, color_system=colors, width=_PIPE_WIDTH)
    return console


def _print(renderable: Any) -> None:
    console = _console()
    if console.is_terminal:
        console.print(renderable)
        return
    with console.capture() as captured:
        console.print(renderable)
    typer.echo("\n".join(line.rstrip() for line in captured.get().splitlines()))


def _echo_json(data: Any) -> None:
    typer.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))


def _fail(message: str, code: int = 1) -> NoReturn:
    first = message.strip().splitlines()[0] if message.strip() else "failed"
    typer.echo(f"error: {first}", err=True)
    sys.exit(code)


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: Any = None,
    line: str | None = None,
) -> None:
    text = str(message).strip().splitlines()
    typer.echo(f"warning: {text[0] if text else category.__name__}", err=True)


class _Group(TyperGroup):
    """Errors as one line on stderr (``error: ...``) instead of tracebacks or boxes."""

    def main(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        original = warnings.showwarning
        warnings.showwarning = _show_warning
        if not logging.getLogger().handlers:  # library log records as one-line warnings
            logging.basicConfig(level=logging.WARNING, format="warning: %(message)s")
        try:
            rv = super().main(
                args=args,
                prog_name=prog_name or "langgraph-ctx",
                complete_var=complete_var,
                standalone_mode=False,
                windows_expand_args=windows_expand_args,
                **extra,
            )
        except typer.TyperException as exc:  # click's usage errors
            if not standalone_mode:
                raise
            ctx = getattr(exc, "ctx", None)
            hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
            typer.echo(f"error: {exc.format_message()}{hint}", err=True)
            sys.exit(getattr(exc, "exit_code", 2))
        except typer.Abort:
            if not standalone_mode:
                raise
            _fail("aborted")
        except KeyboardInterrupt:
            if not standalone_mode:
                raise
            typer.echo("interrupted", err=True)
            sys.exit(130)
        except (CliError, LangGraphCtxError, OSError, ValueError) as exc:
            if not standalone_mode or os.environ.get(DEBUG_ENV):
                raise
            _fail(str(exc) or type(exc).__name__)
        finally:
            warnings.showwarning = original
        if not standalone_mode:
            return rv
        sys.exit(rv if isinstance(rv, int) else 0)


app = typer.Typer(
    name="langgraph-ctx",
    cls=_Group,
    help="Inspect, repair and move LangGraph conversations saved by JsonlSaver.",
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


class _State:
    def __init__(self, root: Path) -> None:
        self.root = root

    def saver(self) -> Any:
        """A `JsonlSaver` on the directory, which must exist."""
        from langgraph_ctx.saver.jsonl import JsonlSaver

        if not self.root.exists():
            raise CliError(f"no such directory: {self.root} (set --dir or ${DIR_ENV})")
        if not self.root.is_dir():
            raise CliError(f"not a directory: {self.root}")
        return JsonlSaver(self.root)


def _state(ctx: typer.Context) -> _State:
    return ctx.find_object(_State) or _State(Path(os.environ.get(DIR_ENV) or DEFAULT_DIR))


@contextmanager
def _thread_errors(state: _State) -> Iterator[None]:
    """Name the directory when a thread is unknown (the usual cause: the wrong --dir)."""
    try:
        yield
    except ThreadNotFoundError as exc:
        raise CliError(
            f"{exc} in {state.root} ('langgraph-ctx threads' lists the threads)"
        ) from None


@app.callback(invoke_without_command=True)
def _root(
    ctx: typer.Context,
    directory: Annotated[
        Path | None,
        typer.Option(
            "--dir",
            "-d",
            help=f"The JsonlSaver directory (default: ${DIR_ENV}, else ./{DEFAULT_DIR}).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Inspect, repair and move LangGraph conversations saved by JsonlSaver."""
    root = directory or Path(os.environ.get(DIR_ENV) or DEFAULT_DIR)
    ctx.obj = _State(root)
    if ctx.invoked_subcommand is None:
        typer.echo(ctx.get_help())
        raise typer.Exit(0)


JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]
CheckpointOpt = Annotated[
    str | None,
    typer.Option(
        "--checkpoint",
        "-c",
        help="A checkpoint id, a unique prefix of one, head, or head~N (default: head).",
    ),
]
MessagesKeyOpt = Annotated[
    str, typer.Option("--messages-key", help="The state key holding the conversation.")
]


# ------------------------------------------------------------------- read commands


@app.command()
def threads(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """List threads: message counts, checkpoints, size, last activity."""
    from langgraph_ctx.cli.render import threads_table

    saver = _state(ctx).saver()
    with saver.storage.listing():  # one directory scan for every thread's backups
        summaries = browse.thread_summaries(saver)
    if as_json:
        _echo_json([s.to_dict() for s in summaries])
        return
    if not summaries:
        typer.echo(f"no threads in {_state(ctx).root}")
        return
    _print(threads_table(summaries))


@app.command()
def history(
    ctx: typer.Context,
    thread: Annotated[str, typer.Argument(metavar="THREAD", help="Thread id.", show_default=False)],
    all_ns: Annotated[
        bool, typer.Option("--all-ns", help="Include subgraph checkpoints (namespaces).")
    ] = False,
    limit: Annotated[
        int | None, typer.Option("--limit", "-n", min=1, help="Only the newest N checkpoints.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Checkpoints of a thread, oldest first: id, step, source, node, time."""
    from langgraph_ctx.cli.render import history_table

    state = _state(ctx)
    with _thread_errors(state):
        rows = browse.history(state.saver(), thread, all_namespaces=all_ns, limit=limit)
    if as_json:
        _echo_json(rows)
        return
    _print(history_table(rows, namespaces=all_ns, width=_console().width))


@app.command()
def show(
    ctx: typer.Context,
    thread: Annotated[str, typer.Argument(metavar="THREAD", help="Thread id.", show_default=False)],
    checkpoint: CheckpointOpt = None,
    messages_key: MessagesKeyOpt = browse.MESSAGES_KEY,
    as_json: JsonOpt = False,
) -> None:
    """The transcript: roles, tool calls and results, compactions, running summary."""
    from langgraph_ctx.cli.render import transcript_view

    state = _state(ctx)
    saver = state.saver()
    with _thread_errors(state):
        info = browse.resolve_checkpoint(saver, thread, checkpoint)
    values, pending_writes = browse.checkpoint_state(saver, info)
    t = browse.transcript(values, messages_key=messages_key, pending_writes=pending_writes)
    if as_json:
        _echo_json(
            {
                "thread_id": thread,
                "checkpoint_id": info.checkpoint_id,
                "checkpoint_ns": info.checkpoint_ns,
                "step": info.metadata.get("step"),
                "ts": info.ts,
                **t.to_dict(),
            }
        )
        return
    title = (
        f"{thread} @ {info.checkpoint_id} (step {info.metadata.get('step')}, "
        f"{browse.format_ts(info.ts)} UTC, {len(t.messages)} messages)"
    )
    _print(transcript_view(t, title=title))


@app.command()
def diff(
    ctx: typer.Context,
    thread: Annotated[str, typer.Argument(metavar="THREAD", help="Thread id.", show_default=False)],
    a: Annotated[
        str, typer.Argument(metavar="A", help="From this checkpoint (id, prefix, head, head~N).")
    ],
    b: Annotated[str, typer.Argument(metavar="B", help="To this checkpoint.")],
    all_channels: Annotated[
        bool, typer.Option("--all-channels", help="Include LangGraph's internal channels.")
    ] = False,
    messages_key: MessagesKeyOpt = browse.MESSAGES_KEY,
    as_json: JsonOpt = False,
) -> None:
    """What changed between two checkpoints: messages, then other channels."""
    from langgraph_ctx.cli.render import diff_view

    state = _state(ctx)
    with _thread_errors(state):
        d = browse.diff_checkpoints(
            state.saver(),
            thread,
            a,
            b,
            messages_key=messages_key,
            include_internal=all_channels,
        )
    if as_json:
        _echo_json(d.to_dict())
        return
    _print(diff_view(d))


def _usage_budget(model: str, budget: str | None, window: int | None, reserved: int) -> Any:
    from langgraph_ctx.context.budget import ContextBudget

    if budget is not None and window is not None:
        raise typer.BadParameter("give --budget or --window, not both", param_hint="--budget")
    if budget is not None:
        try:
            return ContextBudget.preset(budget)
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--budget") from None
    try:
        return ContextBudget.for_model(model, context_window=window, reserved_output=reserved)
    except ValueError as exc:
        if window is None and "not known" in str(exc):
            raise CliError(
                f"the context window of {model!r} is not known; pass --window <tokens> "
                "or --budget fast|personalized|planning"
            ) from None
        raise typer.BadParameter(str(exc), param_hint="--window") from None


@app.command()
def usage(
    ctx: typer.Context,
    thread: Annotated[str, typer.Argument(metavar="THREAD", help="Thread id.", show_default=False)],
    model: Annotated[
        str, typer.Option("--model", "-m", help="Model whose tokenizer counts (gpt-4o, ...).")
    ],
    checkpoint: CheckpointOpt = None,
    budget: Annotated[
        str | None,
        typer.Option("--budget", help="A budget preset: fast, personalized or planning."),
    ] = None,
    window: Annotated[
        int | None,
        typer.Option("--window", min=1, help="Context window in tokens (for unknown models)."),
    ] = None,
    reserved_output: Annotated[
        int, typer.Option("--reserved-output", min=0, help="Tokens kept free for the reply.")
    ] = 4096,
    system_prompt: Annotated[
        str | None,
        typer.Option(
            "--system-prompt",
            help="Count this system prompt too (a 'system_prompt' state key wins).",
        ),
    ] = None,
    messages_key: MessagesKeyOpt = browse.MESSAGES_KEY,
    plot: Annotated[
        Path | None,
        typer.Option(
            "--plot",
            help="Also save a PNG of tokens per component over the thread's turns.",
            dir_okay=False,
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """The token breakdown of a state against a budget (the BudgetNode bar)."""
    from langgraph_ctx.context.budget import ContextUsage

    state = _state(ctx)
    saver = state.saver()
    chosen = _usage_budget(model, budget, window, reserved_output)
    with _thread_errors(state):
        info = browse.resolve_checkpoint(saver, thread, checkpoint)
    values = browse.state_values(saver, info)
    result = browse.usage_at(
        values,
        model=model,
        budget=chosen,
        messages_key=messages_key,
        system_prompt=system_prompt,
    )
    recorded = values.get("context_usage")
    if isinstance(recorded, dict):
        try:
            recorded = ContextUsage.model_validate(recorded)
        except ValueError:
            recorded = None
    if not isinstance(recorded, ContextUsage):
        recorded = None
    series = None
    if plot is not None:
        from langgraph_ctx.cli.plot import save_usage_plot

        with _thread_errors(state):
            series = browse.usage_series(
                saver,
                thread,
                model=model,
                budget=chosen,
                messages_key=messages_key,
                system_prompt=system_prompt,
            )
        if not series:
            raise CliError(f"thread {thread!r} has no turns to plot")
        save_usage_plot(series, plot, title=f"{thread}: tokens per component by turn", model=model)
    if as_json:
        out: dict[str, Any] = {
            "thread_id": thread,
            "checkpoint_id": info.checkpoint_id,
            "usage": result.model_dump(mode="json"),
            "bar": str(result),
            "recorded": recorded.model_dump(mode="json") if recorded else None,
        }
        if series is not None:
            out["plot"] = str(plot)
            out["turns"] = [t.to_dict() for t in series]
        _echo_json(out)
        return
    from langgraph_ctx.cli.render import usage_view

    _print(usage_view(result, recorded))
    if series is not None:
        typer.echo(f"wrote {plot} ({len(series)} turn{'s' if len(series) != 1 else ''})")


class ExportFormat(str, Enum):
    openai = "openai"
    jsonl = "jsonl"


@app.command()
def export(
    ctx: typer.Context,
    thread: Annotated[str, typer.Argument(metavar="THREAD", help="Thread id.", show_default=False)],
    fmt: Annotated[
        ExportFormat,
        typer.Option(
            "--format",
            "-f",
            help="openai: one JSON list of messages; jsonl: one message per line.",
        ),
    ] = ExportFormat.openai,
    checkpoint: CheckpointOpt = None,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output", "-o", help="Write to this file (default: stdout).", dir_okay=False
        ),
    ] = None,
    messages_key: MessagesKeyOpt = browse.MESSAGES_KEY,
) -> None:
    """Messages in OpenAI's chat format (role, content, tool_calls, ...), for evals."""
    state = _state(ctx)
    saver = state.saver()
    with _thread_errors(state):
        info = browse.resolve_checkpoint(saver, thread, checkpoint)
    messages = browse.find_messages(browse.state_values(saver, info), messages_key)
    text = browse.export_messages(messages, fmt.value)  # type: ignore[arg-type]
    if output is None:
        typer.echo(text, nl=False)
        return
    output.write_text(text, encoding="utf-8")
    typer.echo(f"wrote {len(messages)} messages to {output}", err=True)


@app.command()
def verify(
    ctx: typer.Context,
    thread: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="THREAD",
            help="Threads to check (default: every thread).",
            show_default=False,
        ),
    ] = None,
    backups: Annotated[
        bool, typer.Option("--backups", help="Also check revert backups (.jsonl.1, ...).")
    ] = False,
    decode: Annotated[
        bool,
        typer.Option(
            "--decode/--no-decode", help="Decode every checkpoint (slower on long threads)."
        ),
    ] = True,
    as_json: JsonOpt = False,
) -> None:
    """Check every file: each line parses, references resolve, checkpoints decode.

    Exit code 0: all is well; 1: errors; 3: only torn last lines or empty files.
    """
    from langgraph_ctx.cli.render import verify_view
    from langgraph_ctx.cli.verify import verify_directory

    state = _state(ctx)
    if not state.root.is_dir():
        raise CliError(f"no such directory: {state.root} (set --dir or ${DIR_ENV})")
    console = _console(stderr=True)
    with (
        _thread_errors(state),
        Progress(
            TextColumn("verifying"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("lines"),
            TimeElapsedColumn(),
            console=console,
            transient=True,
            disable=as_json or not console.is_terminal,
        ) as bar,
    ):

        def lines_total(total: int) -> Callable[[int], None]:
            task = bar.add_task("verify", total=total)
            return lambda n: bar.advance(task, n)

        report = verify_directory(
            state.root,
            threads=thread or None,
            backups=backups,
            decode=decode,
            progress=lines_total,
        )
    if as_json:
        _echo_json(report.to_dict())
    else:
        _print(verify_view(report))
    raise typer.Exit(report.exit_code)


# ------------------------------------------------------------------ write commands


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
) -> None:
    """Copy a thread to a new id, whole or as it was at a checkpoint."""
    state = _state(ctx)
    saver = state.saver()
    with _thread_errors(state):
        at = (
            browse.resolve_checkpoint(saver, source, checkpoint).checkpoint_id
            if checkpoint
            else None
        )
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
    thread: Annotated[str, typer.Argument(metavar="THREAD", help="Thread id.", show_default=False)],
    checkpoint: Annotated[
        str,
        typer.Argument(
            metavar="CHECKPOINT", help="Checkpoint to roll back to (id, prefix, head~N)."
        ),
    ],
    as_json: JsonOpt = False,
) -> None:
    """Roll a thread back to a checkpoint; the previous file is kept as <thread>.jsonl.1."""
    state = _state(ctx)
    saver = state.saver()
    with _thread_errors(state):
        at = browse.resolve_checkpoint(saver, thread, checkpoint).checkpoint_id
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
    thread: Annotated[list[str], typer.Argument(metavar="THREAD", help="Threads to prune.")],
    strategy: Annotated[
        PruneStrategy,
        typer.Option(
            "--strategy",
            help="keep_latest: keep each namespace's latest checkpoint; delete: remove threads.",
        ),
    ] = PruneStrategy.keep_latest,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Drop old checkpoints (no backup is kept), or delete threads."""
    state = _state(ctx)
    saver = state.saver()
    before: dict[str, tuple[int, int]] = {}
    with _thread_errors(state):
        for tid in thread:
            infos = browse.require_thread(saver, tid)
            before[tid] = (len(infos), Path(saver.path(tid)).stat().st_size)
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
            results.append({"thread_id": tid, "deleted": True, "checkpoints_before": count})
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
            typer.echo(f"deleted {r['thread_id']} ({r['checkpoints_before']} checkpoints)")
            continue
        typer.echo(
            f"pruned {r['thread_id']}: {r['checkpoints_before']} -> {r['checkpoints_after']} "
            f"checkpoints, {human_size(r['bytes_before'])} -> {human_size(r['bytes_after'])}"
        )
        typer.echo(f"head: {r['head']}")


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
    check: Annotated[
        bool,
        typer.Option("--check", help="Compare every imported checkpoint with the database."),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Migrate a SqliteSaver database into JSONL threads (same state and history)."""
    from langgraph_ctx.migrate import (
        compare_with_sqlite,
        count_checkpoints,
        import_sqlite,
        sqlite_path,
        sqlite_thread_ids,
    )

    state = _state(ctx)
    if state.root.exists() and not state.root.is_dir():
        raise CliError(f"not a directory: {state.root}")
    wanted = only or sqlite_thread_ids(source)
    if not force and state.root.is_dir():
        existing = [t for t in wanted if Path(state.saver().path(t)).exists()]
        if existing:
            shown = ", ".join(existing[:5]) + (" ..." if len(existing) > 5 else "")
            raise CliError(
                f"{len(existing)} thread(s) already exist in {state.root}: {shown}; "
                "pass --force to replace them (the old files are kept as .jsonl.1)"
            )
    total = count_checkpoints(source, wanted)
    console = _console(stderr=True)
    with Progress(
        TextColumn("importing"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("checkpoints"),
        TimeElapsedColumn(),
        console=console,
        disable=as_json or not console.is_terminal,
    ) as progress:
        task = progress.add_task("import", total=total)
        try:
            report = import_sqlite(
                source,
                state.root,
                threads=only or None,
                force=force,
                progress=lambda n: progress.advance(task, n),
            )
        except ThreadExistsError as exc:
            raise CliError(f"{exc} (pass --force to replace it)") from None
    problems: list[str] = []
    if check:
        for t in report.threads:
            problems += compare_with_sqlite(source, state.root, t.thread_id)
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


@app.command()
def copy(
    ctx: typer.Context,
    thread: Annotated[
        list[str] | None,
        typer.Argument(metavar="THREAD", help="Threads to copy.", show_default=False),
    ] = None,
    to: Annotated[
        str | None,
        typer.Option("--to", help="Copy from --dir to this store: redis://... or a directory."),
    ] = None,
    from_: Annotated[
        str | None,
        typer.Option("--from", help="Copy from this store into --dir: redis://... or a directory."),
    ] = None,
    new_id: Annotated[
        str | None, typer.Option("--as", help="Thread id in the target (one thread only).")
    ] = None,
    prefix: Annotated[
        str | None, typer.Option("--prefix", help="Redis key prefix (default: langgraph).")
    ] = None,
    all_threads: Annotated[bool, typer.Option("--all", help="Copy every thread.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Copy threads between --dir and Redis or another directory, line for line."""
    from langgraph_ctx.storage.transfer import copy_thread_between

    state = _state(ctx)
    if (to is None) == (from_ is None):
        raise typer.BadParameter("give exactly one of --to and --from", param_hint="--to")
    if new_id is not None and (all_threads or len(thread or []) != 1):
        raise typer.BadParameter("--as needs exactly one thread", param_hint="--as")
    if bool(thread) == all_threads:
        raise typer.BadParameter("name threads to copy, or pass --all", param_hint="THREAD")
    local = state.saver().storage if from_ is None else _local_storage(state.root)
    remote = _open_store(to or from_ or "", prefix)
    source, target = (local, remote) if to is not None else (remote, local)
    try:
        ids = list(thread or []) if not all_threads else sorted(source.thread_ids())
        copied = []
        for tid in ids:
            try:
                lines = copy_thread_between(source, tid, target, new_id)
            except ThreadNotFoundError as exc:
                where = from_ if from_ is not None else state.root
                raise CliError(f"{exc} in {where}") from None
            except ThreadExistsError as exc:
                where = to if to is not None else state.root
                raise CliError(f"{exc} (in {where})") from None
            copied.append(
                {
                    "thread_id": tid,
                    "target_id": new_id or tid,
                    "lines": lines,
                    "target": target.describe(new_id or tid),
                }
            )
    finally:
        close = getattr(getattr(remote, "client", None), "close", None)
        if callable(close):
            close()
    if as_json:
        _echo_json(copied)
        return
    for c in copied:
        typer.echo(f"copied {c['thread_id']} -> {c['target']} ({c['lines']} lines)")


def _local_storage(root: Path) -> Any:
    from langgraph_ctx.storage.jsonl import JsonlStorage

    if root.exists() and not root.is_dir():
        raise CliError(f"not a directory: {root}")
    return JsonlStorage(root)


def _open_store(where: str, prefix: str | None) -> Any:
    if where.startswith(("redis://", "rediss://", "unix://")):
        try:
            from langgraph_ctx.storage.redis import RedisStorage
        except ImportError as exc:
            raise CliError(
                f"Redis needs the redis package ({exc}): pip install 'langgraph-ctx[redis]'"
            ) from None
        kwargs = {"prefix": prefix} if prefix else {}
        return RedisStorage.from_url(where, **kwargs)
    if prefix:
        raise typer.BadParameter("--prefix applies to Redis only", param_hint="--prefix")
    path = Path(where)
    if not path.is_dir():
        raise CliError(f"no such directory: {path}")
    return _local_storage(path)


def run(argv: Sequence[str] | None = None) -> None:
    """Run the command line (``argv`` defaults to ``sys.argv[1:]``)."""
    app(args=list(argv) if argv is not None else None, prog_name="langgraph-ctx")
