"""Rich renderables for what `langgraph_ctx.browse` computes.

Used by the command line; they render in a notebook too (``rich.print(...)``). Every
piece of user text goes through `rich.text.Text`, never through markup, so brackets
in a message cannot be taken for styles.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import rich.text
from rich.cells import cell_len
from rich.console import Group, RenderableType
from rich.padding import Padding
from rich.table import Table

from langgraph_ctx.browse import StateDiff, ThreadSummary, Transcript, format_ts
from langgraph_ctx.cli.printable import printable
from langgraph_ctx.cli.verify import VerifyReport
from langgraph_ctx.context.budget import ContextUsage


class Text(rich.text.Text):
    """`rich.text.Text` whose text has its control characters written out (`printable`)
    before rich measures it: a thread's text never drives the terminal, and lines are laid
    out as wide as they print (an escape written out after the layout overflowed it)."""

    def __init__(self, text: str = "", *args: Any, **kwargs: Any) -> None:
        super().__init__(printable(text), *args, **kwargs)

    def append(self, text: str | rich.text.Text, style: Any = None) -> Text:
        super().append(printable(text) if isinstance(text, str) else text, style)
        return self

__all__ = [
    "diff_view",
    "history_table",
    "human_size",
    "threads_table",
    "transcript_view",
    "usage_view",
    "verify_view",
]

ROLE_STYLES: Mapping[str, str] = {
    "user": "bold green",
    "assistant": "bold cyan",
    "system": "bold magenta",
    "tool": "bold yellow",
    "function": "bold yellow",
}


def human_size(size: int) -> str:
    """``1.2 MB``-style sizes."""
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"  # pragma: no cover


def _short(value: Any, limit: int = 300) -> str:
    """One line, at most ``limit`` characters: strings as they are unless they hold line
    breaks, everything else as JSON."""
    if isinstance(value, str) and "\n" not in value and "\r" not in value:
        text = value
    else:
        text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _args(args: Any) -> str:
    return json.dumps(args, ensure_ascii=False, separators=(", ", ": "), default=str)


# ----------------------------------------------------------------------- tables


def _id_column(table: Table, header: str, values: Sequence[str], **kw: Any) -> None:
    """A column of ids: never cut, never wrapped (three ids that differ only at the end
    must not all show as ``context-switch…``); the other columns give way."""
    widest = max([len(header), *(cell_len(printable(v)) for v in values)])
    table.add_column(header, no_wrap=True, overflow="ignore", min_width=widest, **kw)


def _row(table: Table, *cells: Any) -> None:
    """``table.add_row``, a plain string cell as `Text` (not rich markup, which data must
    never be read as: ``[link=...]``), its control characters written out."""
    table.add_row(*(Text(c) if isinstance(c, str) else c for c in cells))


def _thread_notes(s: ThreadSummary) -> str:
    notes = []
    if s.forked_from:
        origin = s.forked_from.get("thread_id")
        at = s.forked_from.get("checkpoint_id")
        notes.append(f"fork of {origin}" + (f" at {at[:13]}…" if at else ""))
    if s.backups:
        notes.append(f"{s.backups} backup{'s' if s.backups > 1 else ''}")
    if s.archives:
        notes.append(f"{s.archives} context archive{'s' if s.archives > 1 else ''}")
    if s.archive_of:
        notes.append(f"context archive of {s.archive_of}")
    if s.error:
        notes.append("unreadable: run verify")
    return ", ".join(notes)


def threads_table(summaries: Sequence[ThreadSummary], *, width: int | None = None) -> Group:
    """Threads with message counts, checkpoints, size, last activity and origin.

    Thread ids are never cut or wrapped. On a narrow terminal (``width``) the other
    columns give way: shorter headers, then the time without seconds and year, then
    the notes move under the table, one line per thread.
    """
    notes = [_thread_notes(s) for s in summaries]
    id_width = max([6, *(cell_len(printable(s.thread_id)) for s in summaries)])
    widest_note = max([5, *(cell_len(printable(n)) for n in notes)])
    limit = width if width is not None else 10**9
    # (long headers, full time, notes column): the first layout that fits, else the last
    layouts = [(True, True, True), (False, True, True), (False, False, True), (False, False, False)]

    def needed(long_headers: bool, full_time: bool, note_column: bool) -> int:
        numbers = (8 + 11 + 8) if long_headers else (5 + 6 + 8)
        total = id_width + numbers + (19 if full_time else 11) + 8
        return total + (min(widest_note, 24) + 2 if note_column and any(notes) else 0)

    long_headers, full_time, note_column = next(
        (layout for layout in layouts if needed(*layout) <= limit), layouts[-1]
    )
    note_column = note_column and any(notes)  # no notes: no column (its header would wrap)
    table = Table(box=None, pad_edge=False, header_style="bold")
    _id_column(table, "thread", [s.thread_id for s in summaries])
    table.add_column("messages" if long_headers else "msgs", justify="right", no_wrap=True)
    table.add_column("checkpoints" if long_headers else "ckpts", justify="right", no_wrap=True)
    table.add_column("size", justify="right", no_wrap=True)
    table.add_column("last activity (UTC)" if full_time else "last (UTC)", no_wrap=True)
    if note_column:
        table.add_column("notes", style="dim", overflow="fold")
    below: list[RenderableType] = []
    for s, note in zip(summaries, notes, strict=True):
        when = format_ts(s.last_activity) if s.last_activity else "-"
        cells: list[Any] = [
            Text(s.thread_id, style="bold red" if s.error else "bold"),
            "-" if s.error or s.messages is None else f"{s.messages:,}",
            "-" if s.error else f"{s.checkpoints:,}",
            human_size(s.size),
            when if full_time or when == "-" else when[5:16],
        ]
        if note_column:
            cells.append(Text(note))
        elif note:
            below.append(Text(f"{s.thread_id}: {note}", style="dim"))
        _row(table, *cells)
    return Group(table, *below)


def history_table(
    rows: Sequence[Mapping[str, Any]], *, namespaces: bool = False, width: int | None = None
) -> Table:
    """Checkpoints as a table: id, step, source, node, changed channels, time.

    Checkpoint ids and node names are never cut or wrapped. On a narrow terminal
    (``width``) the other columns give way, in this order: the changed channels are
    left out, then the source, then the time loses its date (``10:40:01``; the JSON
    output keeps it whole).
    """
    # As they print (`printable`, in terminal cells): their widths decide the layout.
    node_text = [printable(", ".join(row["nodes"]) or "-") for row in rows]
    ids = [printable(row["checkpoint_id"]) for row in rows]
    spaces = [printable(row["checkpoint_ns"] or "(root)") for row in rows] if namespaces else []
    sources = [printable(str(row["source"] or "-")) for row in rows]
    fixed = max([10, *map(cell_len, ids)]) + max([4, *map(cell_len, node_text)]) + 4 + 4
    fixed += max([9, *map(cell_len, spaces)]) + 2 if namespaces else 0  # (and step, head)
    source_width = max([6, *map(cell_len, sources)]) + 2
    limit = width if width is not None else 10**9
    # (source shown, time with its date): the first layout that fits, else the last
    layouts = [(True, True), (True, False), (False, False)]
    show_source, long_time = next(
        (
            (src, date)
            for src, date in layouts
            if fixed + 10 + (source_width if src else 0) + (19 if date else 8) <= limit
        ),
        layouts[-1],
    )
    short_time = not long_time
    changed = width is None or (width >= 105 and long_time and show_source)
    table = Table(box=None, pad_edge=False, header_style="bold")
    _id_column(table, "checkpoint", ids)
    if namespaces:
        _id_column(table, "namespace", spaces, style="dim")
    table.add_column("step", justify="right", no_wrap=True)
    if show_source:
        table.add_column("source", no_wrap=True)
    _id_column(table, "node", node_text)
    if changed:
        table.add_column("changed", style="dim", overflow="fold")
    table.add_column("time (UTC)", no_wrap=True)
    table.add_column("", no_wrap=True)
    for row, nodes, ns in zip(rows, node_text, spaces or [""] * len(rows), strict=True):
        cells: list[Any] = [Text(row["checkpoint_id"], style="bold" if row.get("head") else "")]
        if namespaces:
            cells.append(Text(ns))
        cells.append(str(row["step"]) if row["step"] is not None else "-")
        if show_source:
            source = str(row["source"] or "-")
            cells.append(Text(source, style="yellow" if source == "update" else ""))
        cells.append(Text(nodes))
        if changed:
            cells.append(Text(", ".join(row["changed"]) or "-"))
        time = str(row["time"])
        cells += [
            time.split(" ")[-1] if short_time else time,
            Text("head", style="bold green") if row.get("head") else "",
        ]
        _row(table, *cells)
    return table


# -------------------------------------------------------------------- transcript


def _message_lines(entry: Mapping[str, Any]) -> list[RenderableType]:
    role = str(entry["role"])
    header = Text(f"[{entry['index']}] ", style="dim")
    header.append(role, style=ROLE_STYLES.get(role, "bold"))
    if entry.get("name"):
        header.append(f" · {entry['name']}", style="dim")
    if entry.get("tool_call_id"):
        header.append(f" · {entry['tool_call_id']}", style="dim")
    if entry.get("status"):
        header.append(f" · {entry['status']}", style="bold red")
    if entry.get("summary"):
        header.append("  summary", style="bold yellow")
    if entry.get("compacted"):
        header.append("  compacted out of the model's view", style="italic dim")
    if entry.get("outside_context"):
        header.append("  before the active context", style="italic dim")
    hidden = entry.get("compacted") or entry.get("outside_context")
    body: list[Text] = []
    if entry.get("content"):
        body.append(Text(str(entry["content"]), style="dim" if hidden else ""))
    for call in entry.get("tool_calls", []):
        line = Text("→ ", style="yellow")
        line.append(str(call.get("name")), style="bold yellow")
        line.append(f"({_args(call.get('args'))})")
        if call.get("id"):
            line.append(f"  {call['id']}", style="dim")
        body.append(line)
    for bad in entry.get("invalid_tool_calls", []):
        body.append(Text(f"✗ invalid tool call: {_short(bad)}", style="red"))
    if not body:
        body.append(Text("(empty)", style="dim italic"))
    return [header, *(_indent(b) for b in body)]


def _indent(renderable: RenderableType) -> Padding:
    """Indented by four columns, wrapped lines included."""
    return Padding(renderable, (0, 0, 0, 4), expand=False)


def _compactions_table(records: Sequence[Mapping[str, Any]]) -> Table:
    table = Table(box=None, pad_edge=False, header_style="bold", title_justify="left")
    for name, justify in (
        ("#", "right"),
        ("time (UTC)", "left"),
        ("strategy", "left"),
        ("tokens", "right"),
        ("messages", "right"),
        ("dropped", "right"),
        ("summarized", "right"),
        ("offloaded", "right"),
        ("reason", "left"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for i, r in enumerate(records, 1):
        if "raw" in r:
            _row(table, str(i), "", Text(_short(r["raw"], 80)), "", "", "", "", "", "")
            continue
        note = r.get("reason", "")
        if r.get("error"):
            note += f" (error: {r['error']}"
            note += f"; fell back to {r['fallback']})" if r.get("fallback") else ")"
        _row(
            table,
            str(i),
            format_ts(r.get("created_at", "")),
            Text(str(r.get("strategy", ""))),
            f"{r.get('tokens_before', 0):,} → {r.get('tokens_after', 0):,}",
            f"{r.get('messages_before', 0)} → {r.get('messages_after', 0)}",
            str(len(r.get("dropped", []))),
            str(len(r.get("summarized", []))),
            str(len(r.get("offloaded", []))),
            Text(note),
        )
    return table


def _summary_lines(summary: Mapping[str, Any]) -> list[Text]:
    if "raw" in summary:
        return [Text("    " + _short(summary["raw"], 2000))]
    lines = []
    if summary.get("user_intent"):
        lines.append(Text("    intent: ", style="bold").append(summary["user_intent"], style=""))
    for key, value in (summary.get("key_entities") or {}).items():
        lines.append(Text(f"    {key}: ", style="bold").append(str(value), style=""))
    for label, key in (("decided", "decisions_made"), ("open", "pending_questions")):
        for item in summary.get(key) or []:
            lines.append(Text(f"    {label}: ", style="bold").append(str(item), style=""))
    if summary.get("text"):
        for raw in str(summary["text"]).splitlines():
            lines.append(Text("    " + raw))
    covered = summary.get("covered_messages", 0)
    lines.append(
        Text(
            f"    covers {covered} message{'s' if covered != 1 else ''}, "
            f"updated {summary.get('updates', 0)} time(s)",
            style="dim",
        )
    )
    return lines


def transcript_view(t: Transcript, *, title: str | None = None) -> RenderableType:
    """The transcript: messages with tool calls and results, then compactions, the running
    summary, the recorded context usage and any interrupt waiting for an answer."""
    parts: list[RenderableType] = []
    if title:
        parts.append(Text(title, style="bold"))
    if not t.messages:
        parts.append(Text("(no messages)", style="dim italic"))
    for entry in t.messages:
        parts.extend(_message_lines(entry))
    if t.state:
        parts.append(Text(""))
        parts.append(Text("state", style="bold"))
        for key, value in t.state.items():
            parts.append(_indent(Text(f"{key}: ", style="bold").append(_short(value), style="")))
    if t.interrupts:
        parts.append(Text(""))
        parts.append(Text("waiting for input (interrupt):", style="bold red"))
        for value in t.interrupts:
            parts.append(Text("    " + _short(value, 2000)))
    if t.compactions:
        parts.append(Text(""))
        parts.append(Text(f"compactions ({len(t.compactions)})", style="bold"))
        parts.append(_compactions_table(t.compactions))
    if t.running_summary:
        parts.append(Text(""))
        parts.append(Text("running summary", style="bold"))
        parts.extend(_summary_lines(t.running_summary))
    if t.context_usage:
        parts.append(Text(""))
        parts.append(Text("context usage (recorded by BudgetNode)", style="bold"))
        try:
            parts.append(Text("    " + str(ContextUsage.model_validate(t.context_usage))))
        except ValueError:
            parts.append(Text("    " + _short(t.context_usage)))
    return Group(*parts)


# ------------------------------------------------------------------------- diff


def _checkpoint_label(row: Mapping[str, Any]) -> Text:
    text = Text(row["checkpoint_id"], style="bold")
    ns = f", namespace {row['checkpoint_ns']}" if row.get("checkpoint_ns") else ""
    text.append(f" (step {row.get('step')}, {row.get('source')}{ns}, {row.get('time')})")
    return text


def _dict_changes(
    before: Mapping[str, Any], after: Mapping[str, Any], prefix: str = "", depth: int = 0
) -> list[tuple[str, str, str]]:
    """``(dotted key, old, new)`` for the keys that differ, nested dicts followed twice."""
    out: list[tuple[str, str, str]] = []
    for key in sorted(set(before) | set(after), key=str):
        old, new = before.get(key), after.get(key)
        if key in before and key in after and old == new:
            continue
        name = f"{prefix}{key}"
        if isinstance(old, dict) and isinstance(new, dict) and depth < 2:
            out.extend(_dict_changes(old, new, f"{name}.", depth + 1))
            continue
        out.append(
            (
                name,
                _short(old, 120) if key in before else "(none)",
                _short(new, 120) if key in after else "(none)",
            )
        )
    return out


def diff_view(d: StateDiff) -> RenderableType:
    """A unified-diff-like view: ``+`` added, ``-`` removed, ``~`` changed."""
    parts: list[RenderableType] = [
        Text("A ").append_text(_checkpoint_label(d.a)),
        Text("B ").append_text(_checkpoint_label(d.b)),
        Text(d.relation, style="dim"),
        Text(""),
    ]
    counts = {k: sum(1 for c in d.messages if c.kind == k) for k in ("added", "removed", "changed")}
    parts.append(
        Text(
            f"messages: {counts['added']} added, {counts['removed']} removed, "
            f"{counts['changed']} changed, {d.unchanged_messages} unchanged",
            style="bold",
        )
    )
    marks = {"added": ("+", "green"), "removed": ("-", "red"), "changed": ("~", "yellow")}
    for change in d.messages:
        mark, style = marks[change.kind]
        entry = change.after if change.after is not None else change.before
        assert entry is not None
        head = Text(f"{mark} [{entry['index']}] {change.role}", style=f"bold {style}")
        if change.kind == "changed":
            head.append(f" ({', '.join(change.fields)})", style=style)
        parts.append(head)
        if change.kind == "changed" and change.before and change.after:
            for key in ("content", "tool_calls"):
                if change.before.get(key) != change.after.get(key):
                    parts.append(Text(f"    - {_short(change.before.get(key))}", style="red"))
                    parts.append(Text(f"    + {_short(change.after.get(key))}", style="green"))
            continue
        body = entry.get("content") or ""
        calls = entry.get("tool_calls") or []
        if body:
            parts.append(Text("    " + _short(body), style=style))
        for call in calls:
            parts.append(Text(f"    → {call.get('name')}({_args(call.get('args'))})", style=style))
    parts.append(Text(""))
    parts.append(Text(f"other channels: {len(d.channels)} changed", style="bold"))
    for ch in d.channels:
        mark, style = marks[ch.kind]
        line = Text(f"{mark} {ch.channel}", style=f"bold {style}")
        if ch.kind == "added":
            line.append(f": {_short(ch.after)}", style=style)
        elif ch.kind == "removed":
            line.append(f": {_short(ch.before)}", style=style)
        else:
            before, after = ch.before, ch.after
            if isinstance(before, list) and isinstance(after, list):
                line.append(f": {len(before)} → {len(after)} items", style=style)
                if after[: len(before)] == before:  # appended to: show the new items only
                    parts.append(line)
                    for item in after[len(before) :]:
                        parts.append(_indent(Text(f"+ {_short(item)}", style="green")))
                    continue
            parts.append(line)
            if isinstance(before, dict) and isinstance(after, dict):  # the keys that changed
                for key, old_value, new_value in _dict_changes(before, after):
                    parts.append(
                        _indent(
                            Text(f"{key}: ", style="bold").append(
                                f"{old_value} → {new_value}", style=style
                            )
                        )
                    )
                continue
            parts.append(_indent(Text(f"- {_short(before)}", style="red")))
            parts.append(_indent(Text(f"+ {_short(after)}", style="green")))
            continue
        parts.append(line)
    return Group(*parts)


# ------------------------------------------------------------------------ usage


def usage_view(
    usage: ContextUsage, recorded: ContextUsage | None = None, *, sent: ContextUsage | None = None
) -> RenderableType:
    """The one-line bar, then tokens per component with their share and budget.

    With ``sent`` (the compacted view a `CompactionNode` gave the model), what the
    model was sent follows the table, before what the `BudgetNode` recorded.
    """
    parts: list[RenderableType] = [Text(str(usage))]
    table = Table(box=None, pad_edge=False, header_style="bold")
    table.add_column("component")
    table.add_column("tokens", justify="right")
    table.add_column("share", justify="right")
    table.add_column("budget", justify="right")
    scale = max(usage.total, 1)
    for key, tokens in usage.breakdown.items():
        limit = usage.allocation.get(key, 0)
        over = key in usage.over_allocation
        _row(
            table,
            key,
            f"{tokens:,}",
            f"{100 * tokens / scale:.1f}%",
            Text(f"{limit:,}" if limit else "-", style="bold red" if over else ""),
        )
    parts.append(table)
    parts.append(
        Text(
            f"used {usage.used:,} + reserved {usage.reserved_output:,} of {usage.total:,} · "
            f"remaining {usage.remaining:,} · level {usage.level} ({usage.action}) · "
            f"{'exact' if usage.exact else 'approximate'}"
            f"{' · calibrated by usage_metadata' if usage.calibrated else ''}",
            style="dim",
        )
    )
    for note in usage.notes:
        parts.append(Text(f"note: {note}", style="yellow"))
    if sent is not None and sent.used != usage.used:
        parts.append(Text(""))
        parts.append(
            Text(
                f"sent to the model: {sent.used:,} of {sent.total:,} tokens "
                f"(compacted from {usage.used:,}):",
                style="bold",
            )
        )
        parts.append(Text(str(sent)))
    if recorded is not None:
        parts.append(Text(""))
        parts.append(Text("recorded by BudgetNode at this checkpoint:", style="bold"))
        parts.append(Text(str(recorded)))
    return Group(*parts)


# ----------------------------------------------------------------------- verify


def verify_view(report: VerifyReport) -> RenderableType:
    """One line per file (ok, or its problems as ``path:line: kind: message``), a total."""
    parts: list[RenderableType] = []
    for f in report.files:
        decoded = f"{f.decoded} decoded" if f.decoded is not None else "not decoded"
        stats = (
            f"{f.lines:,} lines: {f.messages:,} msg, {f.checkpoints:,} ckpt, {f.writes:,} writes"
            f" · {decoded}"
        )
        if f.unchecked:
            spans = ", ".join(
                str(first) if first == last else f"{first}-{last}" for first, last in f.unchecked
            )
            stats += (
                f" · {f.unchecked_count:,} line{'s' if f.unchecked_count != 1 else ''} without "
                f"a checksum (format 1): {spans}"
            )
        if f.ok:
            parts.append(
                Text("ok    ", style="bold green").append(f.path).append(f"  {stats}", style="dim")
            )
            continue
        worst = "error" if any(p.severity == "error" for p in f.problems) else "warning"
        label = Text(
            "FAIL  " if worst == "error" else "WARN  ",
            style=f"bold {'red' if worst == 'error' else 'yellow'}",
        )
        parts.append(label.append(f.path).append(f"  {stats}", style="dim"))
        for p in f.problems:
            parts.append(Text("  " + str(p), style="red" if p.severity == "error" else "yellow"))
    errors = len(report.errors)
    warnings = len(report.problems) - errors
    summary = (
        f"{len(report.files)} file{'s' if len(report.files) != 1 else ''} checked: "
        f"{errors} error{'s' if errors != 1 else ''}, "
        f"{warnings} warning{'s' if warnings != 1 else ''}"
    )
    style = "bold red" if errors else "bold yellow" if warnings else "bold green"
    parts.append(Text(summary, style=style))
    return Group(*parts)
