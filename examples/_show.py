"""Printing helpers shared by the examples: the usage bar, compaction records, errors."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

from langgraph_ctx.context.compaction import CompactionRecord
from langgraph_ctx.context.llm_error import is_llm_error

WIDTH = 100


def clip(text: Any, width: int = WIDTH) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def offline() -> bool:
    return not os.environ.get("OPENAI_API_KEY")


def turn(label: str, user: str, out: dict[str, Any], seen_compactions: int) -> int:
    """Print one turn: what the user said, the reply, the usage bar and any compaction."""
    reply = out["messages"][-1]
    print(f"\n[{label}] user: {clip(user, 80)}")
    if is_llm_error(reply):
        print("  assistant (failed):")
        for line in str(reply.content).splitlines():
            print(f"    {clip(line, 96)}")
    else:
        print(f"  assistant: {clip(reply.content, 96)}")
    print(f"  context  {out['context_usage']}")
    log = out.get("compaction_log") or []
    for raw in log[seen_compactions:]:
        print(f"  compaction: {describe(CompactionRecord.model_validate(raw))}")
    return len(log)


def describe(record: CompactionRecord) -> str:
    """One line about what a compaction did."""
    parts = [
        f"{record.tokens_before:,} -> {record.tokens_after:,} tokens ({record.strategy})",
        f"kept {len(record.kept)}, dropped {len(record.dropped)} messages",
    ]
    if record.offloaded:
        refs = ", ".join(o.ref for o in record.offloaded)
        parts.append(f"offloaded {len(record.offloaded)} tool result(s) as previews ({refs})")
    if record.summary_updated and record.summary is not None:
        parts.append(f"summary now covers {record.summary.covered_messages} messages")
    if record.ladder:
        parts.append(f"fallback steps {record.ladder}")
    return "; ".join(parts) + f"  [{record.reason}]"


def notebook(out: dict[str, Any]) -> None:
    records = out.get("error_notebook") or []
    print(f"\nerror notebook ({len(records)} of at most 50):")
    for record in records:
        what = record.get("tool_name") or record.get("error_kind")
        print(f"  - {record['kind']} {what}: {record['error_type']}: {clip(record['message'], 70)}")


def thread_file(path: str | Path, messages: int) -> None:
    lines = [json.loads(line) for line in Path(path).read_text().splitlines()]
    kinds = Counter(line["t"] for line in lines)
    print(f"\n{path}: {sum(kinds.values())} lines {dict(kinds)}")
    print(f"  the state holds {messages} messages; the file holds every one of them")
    print(f"  read them with: jq -c 'select(.t==\"msg\") | .msg | {{type, content}}' {path}")
