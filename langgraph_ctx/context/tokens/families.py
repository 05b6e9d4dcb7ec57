"""Model families: which encoding, overheads, margin and image rule count a model's tokens.

OpenAI models are exact (their encoding comes from tiktoken's own name map, fine-tuned
names included: `ft:gpt-4o-mini:acme::abc123` is gpt-4o-mini); other
families (Claude, Gemini, Llama, ...) are counted with ``o200k_base`` times a documented
margin (`FAMILIES`); unknown names use `DEFAULT_FAMILY` and warn once per name.
"""

from __future__ import annotations

import sys
import threading
import types
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

import tiktoken

from langgraph_ctx.context.tokens.bpe import EncodingName
from langgraph_ctx.context.tokens.models import (
    base_model_name,
    model_type_error,
    name_candidates,
    normalize_model_name,
)

__all__ = [
    "DEFAULT_FAMILY",
    "FAMILIES",
    "ImageRule",
    "ModelFamily",
    "model_family",
    "normalize_model_name",
]

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

_warned_models: set[str] = set()
_family_cache: dict[str, ModelFamily] = {}
_family_lock = threading.Lock()


def _tiktoken_encoding(model: str) -> str | None:
    """The encoding tiktoken's own model map gives `model` (its names, then its prefixes).

    Tried on each of `name_candidates(model)`: tiktoken knows `ft:gpt-4o-mini:...` and
    dated names (`gpt-4o-2024-08-06`) by prefix, so they need no entry of ours.
    """
    for name in name_candidates(model):
        try:
            return tiktoken.encoding_name_for_model(name)
        except KeyError:
            continue
    return None


def _openai_family(model: str) -> ModelFamily | None:
    encoding = _tiktoken_encoding(model)
    if encoding is None:
        return None
    name = base_model_name(model)
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
    package_dir = str(Path(__file__).resolve().parents[2])  # langgraph_ctx/
    frame: types.FrameType | None = sys._getframe(1)
    level = 1
    while frame is not None and frame.f_code.co_filename.startswith(package_dir):
        frame, level = frame.f_back, level + 1
    return level


def _replace(family: ModelFamily, **changes: Any) -> ModelFamily:
    from dataclasses import replace

    return replace(family, **changes)


def model_family(model: str) -> ModelFamily:
    """Return the counting rules for `model` (provider prefixes like `openai:` are ignored).

    Unknown names get `DEFAULT_FAMILY` and a `UserWarning`, once per name.

    Example:
        ```python
        model_family("gpt-4o-mini").encoding   # -> 'o200k_base'
        model_family("anthropic:claude-sonnet-4-5").exact  # -> False
        ```
    """
    return resolve_family(model, warn=True)


def resolve_family(model: str, *, warn: bool) -> ModelFamily:
    if not isinstance(model, str):  # None failed on its .strip(), far from the cause
        raise model_type_error(model, chat_models=False)
    family = _family_cache.get(model)
    if family is not None:
        return family
    family = _openai_family(model)
    if family is None:
        names = name_candidates(model)
        family = next((fam for key, fam in FAMILIES if any(key in n for n in names)), None)
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
