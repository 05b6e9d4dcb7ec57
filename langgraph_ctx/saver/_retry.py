"""`_retry_on_change`: run a saver call again when its log changed under it."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from langgraph_ctx.errors import LogChangedError

_P = ParamSpec("_P")
_T = TypeVar("_T")
_CHANGED_RETRIES = 5


def _retry_on_change(method: Callable[_P, _T]) -> Callable[_P, _T]:
    """Run the call again when storage reports that a log changed under it.

    Only storage without reader locks (Redis) raises `LogChangedError`: a read
    found the log rewritten since it was indexed, or a conditional append found
    lines it had not read (a writer whose lock expired). Nothing was applied,
    and the next attempt re-reads the log first. JSONL never raises it.
    """

    @functools.wraps(method)
    def retrying(*args: _P.args, **kwargs: _P.kwargs) -> _T:
        for _ in range(_CHANGED_RETRIES - 1):
            try:
                return method(*args, **kwargs)
            except LogChangedError:
                continue
        return method(*args, **kwargs)

    return retrying
