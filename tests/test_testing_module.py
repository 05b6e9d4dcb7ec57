"""The docstring examples of `langgraph_ctx.testing` run and show what they say."""

from __future__ import annotations

import doctest

import langgraph_ctx.testing


def test_the_fake_models_docstring_examples_run() -> None:
    result = doctest.testmod(langgraph_ctx.testing, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 10
    assert result.failed == 0


def test_the_old_compaction_testing_path_warns_and_still_works() -> None:
    import importlib
    import sys

    import pytest

    sys.modules.pop("langgraph_ctx.context.compaction.testing", None)
    with pytest.warns(DeprecationWarning, match="moved to langgraph_ctx.testing"):
        old = importlib.import_module("langgraph_ctx.context.compaction.testing")
    assert old.ScriptedChatModel is langgraph_ctx.testing.ScriptedChatModel
    assert old.ordering_problems is langgraph_ctx.testing.ordering_problems
