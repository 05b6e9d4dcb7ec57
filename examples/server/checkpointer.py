"""The checkpointer langgraph.json names: threads as JSONL files (or Redis).

`create_checkpointer` reads ``LANGGRAPH_CTX_DIR`` (set in langgraph.json ``env``)
or, when ``LANGGRAPH_CTX_REDIS_URL`` is set, keeps threads in Redis instead.
To pass your own arguments, define it yourself::

    from langgraph_ctx.server import jsonl_checkpointer

    def create_checkpointer():
        return jsonl_checkpointer("./chats", fsync=True)
"""

from langgraph_ctx.server import create_checkpointer

__all__ = ["create_checkpointer"]
