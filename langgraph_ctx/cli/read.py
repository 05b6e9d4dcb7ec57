"""Reading commands: ``threads``, ``history``, ``show``, ``diff``, ``usage``, ``export``,
``verify``. Each is options, one `langgraph_ctx.browse` (or `cli.verify`) call and a
renderer from `cli.render`; ``--json`` prints the library's data instead."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer

from langgraph_ctx.cli._app import (
    CheckpointOpt,
    CliError,
    DirOpt,
    JsonOpt,
    MessagesKeyOpt,
    ThreadArg,
    _checkpoint,
    _console,
    _echo_json,
    _print,
    _saver,
    _state,
    _thread_errors,
    app,
)
from langgraph_ctx.cli.printable import json_printable, printable


def _messages_key(values: Any, key: str | None) -> str:
    """The state key holding the conversation: ``--messages-key`` when given, which the
    state must hold (a typo would read as an empty conversation), else ``messages``."""
    from langgraph_ctx import browse

    if key is None or key == browse.MESSAGES_KEY:
        return browse.MESSAGES_KEY
    if not isinstance(values, Mapping):
        return key
    if key not in values and browse.find_messages(values):  # default: any message list
        # Messages under another key, none under this one: a typo, not a checkpoint from
        # before the key was first written (the input's, say), which has no messages.
        keys = sorted(map(str, values))
        shown = ", ".join(printable(k) for k in keys[:12]) + (", ..." if len(keys) > 12 else "")
        raise CliError(f"the state has no key {printable(key)!r} (its keys: {shown or 'none'})")
    return key


@app.command()
def threads(
    ctx: typer.Context,
    archives: Annotated[
        bool,
        typer.Option("--archives", help="Also list context archives (<thread>.ctx.<id> threads)."),
    ] = False,
    directory: DirOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """List threads: message counts, checkpoints, size, last activity.

    Context archives (the forks chat_context_new makes) are counted in their thread's
    notes and listed with --archives.
    """
    from langgraph_ctx import browse
    from langgraph_ctx.cli.render import threads_table

    saver = _saver(ctx)
    with saver.storage.listing():  # one directory scan for every thread's backups
        summaries = browse.thread_summaries(saver, include_archives=archives)
    if as_json:
        _echo_json([s.to_dict() for s in summaries])
        return
    if not summaries:
        typer.echo(f"no threads in {_state(ctx).root}")
        return
    _print(threads_table(summaries, width=_console().width))


@app.command()
def history(
    ctx: typer.Context,
    thread: ThreadArg,
    all_ns: Annotated[
        bool, typer.Option("--all-ns", help="Include subgraph checkpoints (namespaces).")
    ] = False,
    limit: Annotated[
        int | None, typer.Option("--limit", "-n", min=1, help="Only the newest N checkpoints.")
    ] = None,
    as_json: JsonOpt = False,
    directory: DirOpt = None,
) -> None:
    """Checkpoints of a thread, oldest first: id, step, source, node, time."""
    from langgraph_ctx import browse
    from langgraph_ctx.cli.render import history_table

    with _thread_errors(ctx):
        rows = browse.history(_saver(ctx), thread, all_namespaces=all_ns, limit=limit)
    if as_json:
        _echo_json(rows)
        return
    _print(history_table(rows, namespaces=all_ns, width=_console().width))


@app.command()
def show(
    ctx: typer.Context,
    thread: ThreadArg,
    checkpoint: CheckpointOpt = None,
    messages_key: MessagesKeyOpt = None,
    as_json: JsonOpt = False,
    directory: DirOpt = None,
) -> None:
    """The transcript: roles, tool calls and results, compactions, running summary."""
    from langgraph_ctx import browse
    from langgraph_ctx.cli.render import transcript_view

    saver, info = _checkpoint(ctx, thread, checkpoint)
    values, pending_writes = browse.checkpoint_state(saver, info)
    t = browse.transcript(
        values, messages_key=_messages_key(values, messages_key), pending_writes=pending_writes
    )
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
    thread: ThreadArg,
    a: Annotated[
        str, typer.Argument(metavar="A", help="From this checkpoint (id, prefix, head, head~N).")
    ],
    b: Annotated[str, typer.Argument(metavar="B", help="To this checkpoint.")],
    all_channels: Annotated[
        bool, typer.Option("--all-channels", help="Include LangGraph's internal channels.")
    ] = False,
    messages_key: MessagesKeyOpt = None,
    as_json: JsonOpt = False,
    directory: DirOpt = None,
) -> None:
    """What changed between two checkpoints: messages, then other channels."""
    from langgraph_ctx import browse
    from langgraph_ctx.cli.render import diff_view

    with _thread_errors(ctx):
        d = browse.diff_checkpoints(
            _saver(ctx),
            thread,
            a,
            b,
            messages_key=messages_key or browse.MESSAGES_KEY,
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
    thread: ThreadArg,
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
    messages_key: MessagesKeyOpt = None,
    plot: Annotated[
        Path | None,
        typer.Option(
            "--plot",
            help="Also save a PNG of tokens per component over the thread's turns.",
            dir_okay=False,
        ),
    ] = None,
    as_json: JsonOpt = False,
    directory: DirOpt = None,
) -> None:
    """The token breakdown of a state against a budget (the BudgetNode bar)."""
    from langgraph_ctx import browse
    from langgraph_ctx.context.budget import ContextUsage

    chosen = _usage_budget(model, budget, window, reserved_output)
    saver, info = _checkpoint(ctx, thread, checkpoint)
    values = browse.state_values(saver, info)
    messages_key = _messages_key(values, messages_key)
    viewed = messages_key == browse.MESSAGES_KEY and bool(
        browse.find_messages(values, browse.VIEW_KEY)
    )
    result = browse.usage_at(
        values,
        model=model,
        budget=chosen,
        messages_key=messages_key or browse.MESSAGES_KEY,
        system_prompt=system_prompt,
        # The provider's usage_metadata measured the compacted request, not the history:
        # calibrating the history by it made it look smaller than it is, and "exact".
        calibrate=not viewed,
    )
    sent = None  # what a CompactionNode's view sent the model, when it made one
    if viewed:
        sent = browse.usage_at(
            values,
            model=model,
            budget=chosen,
            messages_key=browse.VIEW_KEY,
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

        with _thread_errors(ctx):
            series = browse.usage_series(
                saver,
                thread,
                model=model,
                budget=chosen,
                messages_key=messages_key or browse.MESSAGES_KEY,
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
            "sent": sent.model_dump(mode="json") if sent else None,
        }
        if series is not None:
            out["plot"] = str(plot)
            out["turns"] = [t.to_dict() for t in series]
        _echo_json(out)
        return
    from langgraph_ctx.cli.render import usage_view

    _print(usage_view(result, recorded, sent=sent))
    if series is not None:
        typer.echo(f"wrote {plot} ({len(series)} turn{'s' if len(series) != 1 else ''})")


class ExportFormat(str, Enum):
    openai = "openai"
    jsonl = "jsonl"


@app.command()
def export(
    ctx: typer.Context,
    thread: ThreadArg,
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
    messages_key: MessagesKeyOpt = None,
    directory: DirOpt = None,
) -> None:
    """Messages in OpenAI's chat format (role, content, tool_calls, ...), for evals."""
    from langgraph_ctx import browse

    saver, info = _checkpoint(ctx, thread, checkpoint)
    values = browse.state_values(saver, info)
    messages = browse.find_messages(values, _messages_key(values, messages_key))
    # The same JSON, safe to print and to encode (a lone surrogate, as `\udcff`).
    text = json_printable(browse.export_messages(messages, fmt.value))
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
    directory: DirOpt = None,
) -> None:
    """Check every file: each line parses, references resolve, checkpoints decode.

    Exit code 0: all is well; 1: errors; 3: only torn last lines or empty files.
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from langgraph_ctx.cli.render import verify_view
    from langgraph_ctx.cli.verify import verify_directory

    state = _state(ctx)
    state.saver()  # the directory must exist and be one: the same errors as every command
    console = _console(stderr=True)
    with (
        _thread_errors(ctx),
        Progress(  # on a terminal only: never with --json or when piped
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
