"""The index of a thread's archived contexts: `ArchivedContext` entries, as JSON, and ids.

The index (`index.json` in the seed) is a list of `ArchivedContext`, written as camelCase
JSON: `{"v": 1, "threadId": ..., "items": [{"contextId": ..., "title": ..., ...}]}`.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic.alias_generators import to_camel

__all__ = [
    "INDEX_VERSION",
    "ArchivedContext",
    "index_document",
    "new_context_id",
    "normalize_title",
    "parse_index_document",
]

INDEX_VERSION: Final[int] = 1


class ArchivedContext(BaseModel):
    """One archived context: an entry of the index (the seed's `index.json` item).

    JSON uses the seed's camelCase names (`contextId`, `createdAt`, ...); Python uses
    snake_case. Unknown fields are kept, so an index written by a newer version survives
    a rewrite by this one.
    """

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="allow", frozen=True
    )

    context_id: str
    """`c_<yyyymmdd>_<6 hex>`, unique within the thread."""
    title: str
    created_at: str | None = None
    """When the context started (ISO 8601, UTC)."""
    archived_at: str
    message_count: int
    """Messages of the context (user, assistant, tool), without the context tools' own."""
    summary_preview: str = ""
    summary: str = ""
    archive_reason: str | None = None
    status: Literal["archived"] = "archived"
    thread_id: str
    """The conversation's thread."""
    archive_thread_id: str
    """The fork holding the archived messages (its own JSONL file with `JsonlSaver`)."""
    checkpoint_id: str
    """The checkpoint of `thread_id` the fork was taken at."""
    start_message_id: str | None = None
    end_message_id: str | None = None
    loaded_from: str | None = None
    """The archive that had been loaded into this context, if one was."""

    def to_json(self) -> dict[str, Any]:
        """The index item, with the seed's camelCase names."""
        return self.model_dump(mode="json", by_alias=True)


# Stored data names the model by this path (`codec.PACKAGE_MODELS`): it is the package,
# where the class was defined before the package was split, so old logs keep reading.
ArchivedContext.__module__ = "langgraph_ctx.context.archive"


def index_document(thread_id: str, items: Sequence[ArchivedContext]) -> dict[str, Any]:
    """The whole index as JSON: `{"v": 1, "threadId": ..., "items": [...]}`, oldest first."""
    return {"v": INDEX_VERSION, "threadId": thread_id, "items": [i.to_json() for i in items]}


def parse_index_document(data: Any, where: str) -> list[ArchivedContext]:
    """The entries of an index document.

    Raises:
        ValueError: the document is not an index (the message names `where` and the item).
    """
    if not isinstance(data, Mapping) or not isinstance(data.get("items"), list):
        raise ValueError(f"{where}: not a context index (expected {{'v': 1, 'items': [...]}})")
    if data.get("v") != INDEX_VERSION:
        raise ValueError(f"{where}: index version {data.get('v')!r}, this code reads 1")
    out = []
    for n, item in enumerate(data["items"]):
        try:
            out.append(ArchivedContext.model_validate(item))
        except ValidationError as err:
            raise ValueError(f"{where}: item {n} is not an archived context: {err}") from err
    return out


def new_context_id(
    taken: Callable[[str], bool] = lambda _: False, *, now: datetime | None = None
) -> str:
    """A fresh context id, `c_<yyyymmdd>_<6 hex>` (the seed's form), not `taken`."""
    day = (now or datetime.now(timezone.utc)).strftime("%Y%m%d")
    while True:
        candidate = f"c_{day}_{secrets.token_hex(3)}"
        if not taken(candidate):
            return candidate


def normalize_title(title: str) -> str:
    """A title as compared for duplicates: case and spacing ignored."""
    return " ".join(title.casefold().split())
