"""Tokens per component over the turns of a thread, as a matplotlib chart.

```python
from langgraph_ctx.browse import usage_series
from langgraph_ctx.cli.plot import save_usage_plot, usage_figure

series = usage_series(saver, "task-001", model="gpt-4o")
usage_figure(series, title="task-001")           # a Figure: shows inline in a notebook
save_usage_plot(series, "usage.png")             # a PNG, headless (Agg)
```

matplotlib is optional: ``pip install 'langgraph-ctx[plot]'``. It is imported only
when a chart is drawn, and figures are drawn on the Agg canvas, so no display or GUI
backend is ever needed.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langgraph_ctx.browse import TurnUsage
from langgraph_ctx.errors import PlotUnavailableError

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "PLOT_EXTRA",
    "PlotUnavailableError",
    "save_usage_plot",
    "usage_figure",
    "usage_headline",
]

PLOT_EXTRA = "plot"
"""The optional dependency group that installs matplotlib."""

# Stacked bottom to top, with the colours of `ContextUsage`'s notebook bar.
_SERIES: tuple[tuple[str, str, str], ...] = (
    ("system", "system", "#7c3aed"),
    ("tools", "tools", "#0891b2"),
    ("summary", "summary", "#d97706"),
    ("history", "history", "#2563eb"),
    ("current_input", "input", "#16a34a"),
)


def _matplotlib() -> Any:
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise PlotUnavailableError() from None
    return Figure, FigureCanvasAgg


def usage_figure(
    series: Sequence[TurnUsage],
    *,
    title: str | None = None,
    model: str | None = None,
) -> Figure:
    """A stacked bar chart: tokens per component (system, tools, summary, history,
    input) of the model's request in each turn; a line with what the model was actually
    sent when a `CompactionNode` compacted its view; the input capacity when it is in
    range; and a dashed line before each turn where a compaction happened.

    Raises:
        PlotUnavailableError: matplotlib is not installed.
        ValueError: ``series`` is empty.
    """
    if not series:
        raise ValueError("no turns to plot")
    figure_cls, canvas_cls = _matplotlib()
    fig: Figure = figure_cls(figsize=(11, 5.2), dpi=110, layout="constrained")
    canvas_cls(fig)  # the Agg canvas: rendering never needs a display
    ax = fig.add_subplot()
    turns = [t.turn for t in series]
    bottom = [0] * len(series)
    width = 0.8 if len(series) <= 60 else 1.0
    for key, label, color in _SERIES:
        heights = [t.breakdown.get(key, 0) for t in series]
        if not any(heights):
            continue
        ax.bar(turns, heights, width=width, bottom=bottom, label=label, color=color, linewidth=0)
        bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
    if any(t.view_used is not None and t.view_used != t.used for t in series):
        ax.plot(
            turns,
            [t.view_used for t in series],  # type: ignore[arg-type]  # None: a gap in the line
            color="#111827",
            marker="o",
            markersize=4,
            linewidth=1.6,
            label="sent to the model (compacted view)",
        )
    top = max([*bottom, *(t.view_used or 0 for t in series)]) or 1
    reserve = max((t.breakdown.get("output_reserve", 0) for t in series), default=0)
    capacity = series[-1].total - reserve
    if 0 < capacity <= top * 4:
        ax.axhline(capacity, color="#dc2626", linewidth=1.2, linestyle="-")
        ax.annotate(
            f"input capacity {capacity:,}",
            xy=(turns[-1] + 0.5, capacity),
            xytext=(0, 3),
            textcoords="offset points",
            ha="right",
            color="#dc2626",
            fontsize=8,
        )
    previous = 0
    marked = False
    for t in series:
        if t.compactions > previous:
            ax.axvline(
                t.turn - 0.5,
                color="#d97706",
                linestyle="--",
                linewidth=1,
                label=None if marked else "compaction",
            )
            marked = True
        previous = t.compactions
    ax.set_xlabel("turn")
    ax.set_ylabel("tokens in the request")
    ax.yaxis.set_major_formatter(_thousands())
    ax.yaxis.set_major_locator(_integer_ticks())  # tokens and turns come whole
    if len(turns) <= 30:
        ax.set_xticks(turns)
    else:
        ax.xaxis.set_major_locator(_integer_ticks())
    ax.set_xlim(turns[0] - 0.6, turns[-1] + 0.6)
    ax.margins(y=0.08)
    ax.grid(axis="y", color="#e5e7eb", linewidth=0.8)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    heading = title or "tokens per component by turn"
    sub = f"{model} · {usage_headline(series)}" if model else usage_headline(series)
    ax.set_title(f"{heading}\n{sub}", fontsize=11, loc="left")
    fig.legend(loc="outside right upper", fontsize=8, frameon=False)
    return fig


def usage_headline(series: Sequence[TurnUsage]) -> str:
    """The chart's headline: what the model was sent on the last turn, against the window.

    With a compacted view that is the view (``view_used``), not the history's size: a
    thread whose history holds 4,503 tokens may have sent the model 790.
    """
    last = series[-1]
    if last.view_used is not None and last.view_used != last.used:
        return (
            f"last turn: {last.view_used:,} of {last.total:,} tokens sent to the model "
            f"(compacted from {last.used:,})"
        )
    return (
        f"last turn: {last.used:,} of {last.total:,} tokens sent to the model "
        f"({last.percent:.1f}% with the output reserve)"
    )


def _integer_ticks() -> Any:
    from matplotlib.ticker import MaxNLocator

    return MaxNLocator(integer=True)


def _thousands() -> Any:
    from matplotlib.ticker import FuncFormatter

    return FuncFormatter(lambda value, _: f"{int(value):,}")


def save_usage_plot(
    series: Sequence[TurnUsage],
    path: str | Path,
    *,
    title: str | None = None,
    model: str | None = None,
) -> Path:
    """Draw `usage_figure` and save it as a PNG at ``path``; returns the path.

    Raises:
        PlotUnavailableError: matplotlib is not installed.
    """
    fig = usage_figure(series, title=title, model=model)
    out = Path(path)
    fig.savefig(out, format="png")
    return out
