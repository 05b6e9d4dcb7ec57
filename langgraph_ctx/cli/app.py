"""The ``langgraph-ctx`` command line: the typer app, its shared options and plumbing.

The commands live in three modules, in the order ``--help`` lists them, each a thin
layer over the library: `cli.read` (threads, history, show, diff, usage, export,
verify over `langgraph_ctx.browse` and `cli.verify`), `cli.change` (fork, revert,
prune and retention over the saver and `saver.retention`) and `cli.move` (import,
copy over `langgraph_ctx.migrate` and `storage.transfer`). They share what is defined
here: the ``--dir`` state, the one-line error handling and the JSON output; the rich
output is in `render` and `plot`. Nothing heavy is imported at module level (LangGraph,
tokenizers, matplotlib, rich's renderers), so ``--help`` answers at once.

Every command works on a `JsonlSaver` directory: ``--dir`` (before or after the
command), else ``$LANGGRAPH_CTX_DIR``, else ``./chats``. Read commands take ``--json``
for scripts. Colours are on only when stdout is a terminal and ``NO_COLOR`` is not set.

Exit codes: 0 success; 1 the command failed (missing directory, unknown thread or
checkpoint, unreadable log...) or ``verify`` found errors; 2 bad usage (unknown option,
missing argument, invalid value); 3 ``verify`` found only warnings (torn last lines,
empty files); 130 interrupted (Ctrl-C).
"""

from __future__ import annotations

from langgraph_ctx.cli import change, move, read  # register their commands on `app`
from langgraph_ctx.cli._app import CliError, app, run

__all__ = ["CliError", "app", "change", "move", "read", "run"]
