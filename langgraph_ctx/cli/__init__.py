"""The ``langgraph-ctx`` command line and the functions behind it.

Installed as the ``langgraph-ctx`` console script (``langgraph_ctx.cli:main``); also
``python -m langgraph_ctx.cli``. This package is the typer/rich layer; the logic lives
in plain modules a notebook can use without the command line:

* `langgraph_ctx.browse`: thread summaries, history, transcripts, diffs, exports,
  token usage per turn (on any `LogSaver`, Redis included);
* `langgraph_ctx.cli.verify`: line-by-line checks of thread files;
* `langgraph_ctx.migrate`: `SqliteSaver` databases into JSONL threads;
* `langgraph_ctx.cli.plot`: the usage chart (needs the ``plot`` extra: matplotlib).

Importing this package loads neither typer nor rich; `main` does.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of the ``langgraph-ctx`` console script."""
    from langgraph_ctx.cli.app import run

    run(argv)
