"""Arguments given by mistake get an error that names the argument and what it takes.

From a new-user trial: `count_tokens(..., model=None)` failed inside the tokenizer
('NoneType' object has no attribute 'strip'); `context_pipeline(model=None)` warned
about an unknown model named 'NoneType'; `trigger=80` (a percent) silently became a
trigger of 80 tokens, compacting at every step.
"""

from __future__ import annotations

import warnings

import pytest
from langchain_core.messages import HumanMessage

from langgraph_ctx import BudgetNode, CompactionNode, context_pipeline
from langgraph_ctx.context.tokens import count_message_tokens, count_tokens
from langgraph_ctx.errors import CompactionError
from langgraph_ctx.nodes.compaction import PERCENT_LIKE
from langgraph_ctx.testing import OfflineChatModel

# -- model=None --------------------------------------------------------------------


def test_counting_with_no_model_names_the_argument() -> None:
    with pytest.raises(TypeError, match=r"model must be a model name .*got None$"):
        count_tokens([HumanMessage("hi")], model=None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="got None"):
        count_message_tokens(("user", "hi"), model=None)  # type: ignore[arg-type]


def test_counting_with_a_chat_model_says_to_pass_its_name() -> None:
    with pytest.raises(TypeError, match=r"OfflineChatModel \(for a chat model, pass its name"):
        count_tokens([HumanMessage("hi")], model=OfflineChatModel())  # type: ignore[arg-type]


@pytest.mark.parametrize("build", [context_pipeline, BudgetNode])
def test_a_pipeline_with_no_model_is_refused_without_a_warning(build: object) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "unknown model 'NoneType'"
        with pytest.raises(TypeError, match=r"or a LangChain chat model, got None$"):
            build("fast", model=None)  # type: ignore[operator]
        with pytest.raises(TypeError, match=r"got 4 \(int\)"):
            build("fast", model=4)  # type: ignore[operator]


def test_names_and_chat_models_still_work() -> None:
    assert count_tokens([HumanMessage("hi")], model="gpt-4o") > 0
    assert context_pipeline("fast", model=OfflineChatModel()).budget.model
    assert BudgetNode("fast", model="gpt-4o-mini").model == "gpt-4o-mini"


# -- a percent typed as an int ---------------------------------------------------------


@pytest.mark.parametrize("value", [1, 50, 80, PERCENT_LIKE])
def test_a_percent_typed_as_an_int_is_refused(value: int) -> None:
    with pytest.raises(CompactionError) as err:
        context_pipeline("fast", trigger=value)
    text = str(err.value)
    assert f"trigger={value} is a count of tokens" in text
    assert f"write trigger={value / 100!r}" in text
    assert f"write trigger=('tokens', {value})" in text
    with pytest.raises(CompactionError, match=f"target={value} is a count of tokens"):
        CompactionNode(target=value)


def test_tokens_said_explicitly_and_sensible_values_pass() -> None:
    assert CompactionNode(trigger=("tokens", 80), target=("tokens", 40)).trigger.value == 80
    for trigger, target in [
        (0.8, 0.5),
        (PERCENT_LIKE + 1, ("tokens", 50)),
        (4_000, 2_500),
        (6_000, 0.5),
        (("messages", 4), 400),
        (("reserved", 50_000), 0.5),
        (0.75, 150),
    ]:
        node = CompactionNode(trigger=trigger, target=target)
        context_pipeline("fast", compaction=node)
    context_pipeline("fast", trigger=0.8, target=0.5)
