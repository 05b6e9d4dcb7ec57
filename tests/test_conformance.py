"""LangGraph's checkpointer conformance suite, base and extended capabilities."""

from __future__ import annotations

import tempfile

from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import (
    BASE_CAPABILITIES,
    EXTENDED_CAPABILITIES,
)
from langgraph.checkpoint.memory import InMemorySaver

from langgraph_ctx import JsonlSaver


@checkpointer_test(name="JsonlSaver")
async def jsonl_saver():
    with tempfile.TemporaryDirectory() as root:
        yield JsonlSaver(root)


@checkpointer_test(name="JsonlSaver(fsync)")
async def jsonl_saver_fsync():
    with tempfile.TemporaryDirectory() as root:
        yield JsonlSaver(root, fsync=True)


@checkpointer_test(name="InMemorySaver")
async def memory_saver():
    yield InMemorySaver()


def _counts(report) -> tuple[int, int, int]:
    passed = sum(r.tests_passed for r in report.results.values())
    failed = sum(r.tests_failed for r in report.results.values())
    detected = sum(1 for r in report.results.values() if r.detected)
    return passed, failed, detected


async def test_jsonl_saver_passes_all_81_conformance_tests():
    report = await validate(jsonl_saver)
    failures = [f for r in report.results.values() for f in r.failures]
    assert failures == []
    assert _counts(report) == (81, 0, 8)
    assert report.passed_all_base()
    for cap in BASE_CAPABILITIES | EXTENDED_CAPABILITIES:
        assert report.results[cap.value].passed is True, cap


async def test_fsync_mode_passes_the_suite_too():
    report = await validate(jsonl_saver_fsync)
    assert _counts(report) == (81, 0, 8)


async def test_in_memory_saver_reaches_only_the_base_capabilities():
    # The comparison the README makes: LangGraph's own savers stop at the base 58.
    report = await validate(memory_saver)
    passed, failed, detected = _counts(report)
    assert (passed, failed, detected) == (58, 0, 5)
    for cap in EXTENDED_CAPABILITIES:
        assert report.results[cap.value].detected is False
