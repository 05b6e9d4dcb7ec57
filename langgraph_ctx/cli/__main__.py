"""``python -m langgraph_ctx.cli``: the same as the ``langgraph-ctx`` command."""

from langgraph_ctx.cli import main

main()
