"""Which archive a `chat_context_load` request means (id, title, then BM25), or why none. Pure."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from langgraph_ctx.context.archive.entries import ArchivedContext, normalize_title
from langgraph_ctx.context.search import rank

__all__ = [
    "ArchiveSelection",
    "select_archive",
]

Problem = Literal[
    "nothing_archived", "no_input", "empty_query", "unknown_id", "ambiguous", "no_match"
]


@dataclass(frozen=True)
class ArchiveSelection:
    """The archive `chat_context_load` should load, or why there is none.

    `chosen` is set exactly when `problem` is None. `candidates` are, depending on the
    case: the other close matches (chosen), the archives sharing the title or tied
    (ambiguous), titles resembling an unknown id, or the newest archives (no match).
    """

    chosen: ArchivedContext | None = None
    problem: Problem | None = None
    how: Literal["id", "title", "search"] | None = None
    score: float | None = None
    terms: tuple[str, ...] = ()
    candidates: tuple[ArchivedContext, ...] = field(default_factory=tuple)


def select_archive(
    entries: Sequence[ArchivedContext],
    *,
    context_id: str | None = None,
    query: str | None = None,
    documents: Callable[[ArchivedContext], Sequence[str]] | None = None,
    runner_up_ratio: float = 0.8,
) -> ArchiveSelection:
    """Pick the archive meant by `context_id` (exact) or `query` (title, then BM25).

    Rules, in order:

    1. no archives: `nothing_archived`;
    2. a `context_id`: that archive (case and spaces ignored), else `unknown_id`;
    3. no `context_id` and no `query`: `no_input`; a blank `query`: `empty_query`;
    4. a `query` that is an archive's id: that archive (models often put the id there);
       equal to one title: that archive; to several: `ambiguous`;
    5. BM25 over title (counted twice), summary and `documents(entry)` (its messages):
       the best match, with the others scoring at least `runner_up_ratio` of it as
       candidates; an exact tie at the top: `ambiguous`; nothing: `no_match`.

    `entries` are newest first; candidates keep that order.

    Example:
        ```python
        selection = select_archive(entries, query="museums in Paris",
                                   documents=lambda e: [e.summary])
        selection.chosen.context_id if selection.chosen else selection.problem
        ```
    """
    if not entries:
        return ArchiveSelection(problem="nothing_archived")
    if context_id is not None and context_id.strip():
        wanted = context_id.strip().casefold()
        for entry in entries:
            if entry.context_id.casefold() == wanted:
                return ArchiveSelection(chosen=entry, how="id")
        by_title = tuple(e for e in entries if normalize_title(e.title) == normalize_title(wanted))
        return ArchiveSelection(problem="unknown_id", candidates=by_title or tuple(entries[:5]))
    if query is None:
        return ArchiveSelection(problem="no_input", candidates=tuple(entries[:5]))
    if not query.strip():
        return ArchiveSelection(problem="empty_query", candidates=tuple(entries[:5]))

    by_id = [e for e in entries if e.context_id.casefold() == query.strip().casefold()]
    if by_id:
        return ArchiveSelection(chosen=by_id[0], how="id")
    same_title = tuple(e for e in entries if normalize_title(e.title) == normalize_title(query))
    if len(same_title) == 1:
        return ArchiveSelection(chosen=same_title[0], how="title")
    if len(same_title) > 1:
        return ArchiveSelection(problem="ambiguous", how="title", candidates=same_title)

    fields = [
        [entry.title, entry.summary, *(documents(entry) if documents is not None else ())]
        for entry in entries
    ]
    ranked = rank(query, fields, weights=[2, 1])
    if not ranked:
        return ArchiveSelection(problem="no_match", candidates=tuple(entries[:5]))
    best = ranked[0]
    tied = [r for r in ranked if abs(r.score - best.score) <= 1e-9 * max(1.0, best.score)]
    if len(tied) > 1:
        return ArchiveSelection(
            problem="ambiguous",
            how="search",
            score=best.score,
            candidates=tuple(entries[r.index] for r in tied),
        )
    close = tuple(entries[r.index] for r in ranked[1:4] if r.score >= runner_up_ratio * best.score)
    return ArchiveSelection(
        chosen=entries[best.index],
        how="search",
        score=best.score,
        terms=best.terms,
        candidates=close,
    )
