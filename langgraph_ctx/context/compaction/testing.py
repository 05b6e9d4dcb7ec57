"""Deprecated: the offline chat models moved to `langgraph_ctx.testing`.

``from langgraph_ctx.context.compaction.testing import ...`` keeps working (the docs
named this module) and warns; import from `langgraph_ctx.testing` instead.
"""

from __future__ import annotations

import warnings

from langgraph_ctx.testing import ExtractiveSummaryModel, ScriptedChatModel, ordering_problems

__all__ = ["ExtractiveSummaryModel", "ScriptedChatModel", "ordering_problems"]

warnings.warn(
    "langgraph_ctx.context.compaction.testing moved to langgraph_ctx.testing",
    DeprecationWarning,
    stacklevel=2,
)
