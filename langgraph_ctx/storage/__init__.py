"""Where thread logs live: `LogStorage` and its backends (JSONL files, Redis).

The Redis backend (``langgraph_ctx.storage.redis``) needs the ``redis`` extra;
it is not imported here, so this package works without it.
"""

from langgraph_ctx.storage.base import LogStorage, Synced
from langgraph_ctx.storage.transfer import copy_thread_between

__all__ = ["LogStorage", "Synced", "copy_thread_between"]
