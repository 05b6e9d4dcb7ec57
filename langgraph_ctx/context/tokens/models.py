"""Model facts: what a model name stands for, and how many tokens the model accepts.

The facts come from the model first and from this package's table last:

* **the name** (`base_model_name`): provider prefixes (`openai:`, `azure/`) and
  fine-tune names (`ft:gpt-4o-mini:acme::abc123` is gpt-4o-mini) come off, so a
  fine-tuned model is counted with its base model's tokenizer;
* **the context window** (`model_facts`, `context_window`): a chat model's LangChain
  profile (`model.profile["max_input_tokens"]`, filled by the provider package) wins;
  then the `context_window=` the caller gives; then the table of well-known models
  (`CONTEXT_WINDOWS`), looked up by the base name.

```python
from langgraph_ctx.context.tokens.models import base_model_name, context_window, model_facts

base_model_name("ft:gpt-4o-mini:acme::abc123")    # 'gpt-4o-mini'
context_window("openai:gpt-4o-mini")              # 128000
model_facts(chat_model).context_window            # chat_model.profile["max_input_tokens"]
```
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from langchain_core.runnables import Runnable, RunnableBinding

__all__ = [
    "CONTEXT_WINDOWS",
    "ModelFacts",
    "base_model_name",
    "context_window",
    "model_facts",
    "name_candidates",
    "normalize_model_name",
]

#: Providers written as `<provider>:<model>` (LangChain's `init_chat_model` names and a few
#: gateways). `<anything>/<model>` is always read as a prefix.
_PROVIDERS: Final[frozenset[str]] = frozenset(
    {
        "openai",
        "azure",
        "azure_openai",
        "azure_ai",
        "anthropic",
        "google",
        "google_genai",
        "google_vertexai",
        "google_anthropic_vertex",
        "vertex_ai",
        "vertexai",
        "bedrock",
        "bedrock_converse",
        "cohere",
        "fireworks",
        "together",
        "mistralai",
        "mistral",
        "huggingface",
        "groq",
        "ollama",
        "deepseek",
        "ibm",
        "nvidia",
        "xai",
        "perplexity",
        "openrouter",
        "litellm",
    }
)
_ANY_PREFIX = re.compile(r"^(?:[\w.-]+:|[\w.-]+/)+")


def normalize_model_name(model: str) -> str:
    """Lowercase model name without any `xxx:` / `xxx/` prefixes (`openai:`, `models/`).

    The blunt rule: everything up to the last prefix goes. `base_model_name` is the
    careful one; both are tried when a name is resolved (`name_candidates`).
    """
    return _ANY_PREFIX.sub("", model.strip().lower())


def base_model_name(model: str) -> str:
    """The model a name stands for: lowercase, no provider prefix, no fine-tune suffix.

    Example:
        ```python
        base_model_name("ft:gpt-4o-mini:acme::abc123")           # 'gpt-4o-mini'
        base_model_name("openai:ft:gpt-4o-2024-08-06:acme::x1")  # 'gpt-4o-2024-08-06'
        base_model_name("azure/GPT-4o")                          # 'gpt-4o'
        base_model_name("llama3:8b")                             # 'llama3:8b' (an Ollama tag)
        ```
    """
    name = model.strip().lower()
    while True:
        if name.startswith("ft:"):  # OpenAI fine-tunes: ft:<base>:<org>:<suffix>:<id>
            base = name.split(":")[1]
            return base or name
        cut = min((i for i in (name.find(":"), name.find("/")) if i > 0), default=-1)
        if cut < 0 or cut == len(name) - 1:
            return name
        if name[cut] == "/" or name[:cut] in _PROVIDERS:
            name = name[cut + 1 :]
            continue
        return name


def name_candidates(model: str) -> list[str]:
    """The names to look `model` up by, most specific first (no duplicates).

    The name as given (lowercased; tiktoken knows `ft:gpt-4o...` itself), its base model
    (`base_model_name`), and the name with every prefix cut (`normalize_model_name`).
    """
    seen: list[str] = []
    for name in (model.strip().lower(), base_model_name(model), normalize_model_name(model)):
        if name and name not in seen:
            seen.append(name)
    return seen


# Context windows of well-known models, longest prefix first, matched on the base name.
CONTEXT_WINDOWS: Final[tuple[tuple[str, int], ...]] = (
    ("gpt-5", 400_000),
    ("gpt-4.1", 1_047_576),
    ("gpt-4.5", 128_000),
    ("gpt-4o", 128_000),
    ("chatgpt-4o", 128_000),
    ("gpt-4-turbo", 128_000),
    ("gpt-4-1106", 128_000),
    ("gpt-4-0125", 128_000),
    ("gpt-4-32k", 32_768),
    ("gpt-4", 8_192),
    ("gpt-3.5-turbo", 16_385),
    ("o1-mini", 128_000),
    ("o1-preview", 128_000),
    ("o1", 200_000),
    ("o3", 200_000),
    ("o4-mini", 200_000),
    ("claude", 200_000),
    ("gemini-1.5-pro", 2_097_152),
    ("gemini", 1_048_576),
)
"""The package's table: the last resort after the model's profile and `context_window=`."""


def context_window(model: str) -> int | None:
    """Context window of a well-known model name (`CONTEXT_WINDOWS`), or None.

    Example:
        ```python
        context_window("openai:gpt-4o-mini")              # 128000
        context_window("ft:gpt-4o-mini:acme::abc123")     # 128000 (its base model)
        context_window("my-local-llama")                  # None
        ```
    """
    for name in name_candidates(model):
        for prefix, window in CONTEXT_WINDOWS:
            if name.startswith(prefix) or (prefix == "claude" and "claude" in name):
                return window
    return None


@dataclass(frozen=True)
class ModelFacts:
    """What the pipeline needs to know about the model it sits in front of."""

    name: str
    """The model name (as the chat model reports it, or as given)."""
    context_window: int | None
    """Tokens the model accepts, or None when nothing says."""
    window_source: str | None
    """Where `context_window` came from: `"profile"`, `"argument"`, `"table"` or None."""
    tools: list[Any] | None = None
    """Tools bound to the chat model (`llm.bind_tools(...)`), if any."""


def _profile_window(model: Any) -> int | None:
    profile = getattr(model, "profile", None)
    if isinstance(profile, Mapping):
        window = profile.get("max_input_tokens")
        if isinstance(window, int) and not isinstance(window, bool) and window > 0:
            return window
    return None


def model_facts(
    model: str | Runnable[Any, Any], *, context_window: int | None = None
) -> ModelFacts:
    """Name, context window and bound tools of a model name or a chat model object.

    The window comes from, in order: the chat model's LangChain profile
    (`model.profile["max_input_tokens"]`), `context_window`, the package's table.

    Example:
        ```python
        from langgraph_ctx.testing import ScriptedChatModel

        llm = ScriptedChatModel(script=["hi"], model_name="ft:gpt-4o-mini:acme::abc123",
                                profile={"max_input_tokens": 3_300})
        model_facts(llm)                          # ModelFacts(name='ft:gpt-4o-mini:acme::abc123',
                                                  #   context_window=3300, window_source='profile')
        model_facts("my-local-llama", context_window=32_768).context_window  # 32768
        ```
    """
    if context_window is not None and (
        not isinstance(context_window, int)
        or isinstance(context_window, bool)
        or context_window < 1
    ):
        raise ValueError(f"context_window must be a positive int, got {context_window!r}")
    if isinstance(model, str):
        name, tools, inner = model, None, None
    elif isinstance(model, Runnable):
        name, tools, inner = _name_and_tools(model)
    else:  # None was taken for a model named "NoneType"
        raise model_type_error(model, chat_models=True)
    profiled = _profile_window(inner) if inner is not None else None
    if profiled is not None:
        return ModelFacts(name, profiled, "profile", tools)
    if context_window is not None:
        return ModelFacts(name, context_window, "argument", tools)
    known = _table_window(name)
    return ModelFacts(name, known, "table" if known else None, tools)


_table_window = context_window  # model_facts's parameter of the same name hides it


def model_type_error(model: Any, *, chat_models: bool) -> TypeError:
    """The error for a `model` argument that is neither a name nor (`chat_models`) a chat
    model: it says what was given and what is expected.

    Example:
        ```python
        str(model_type_error(None, chat_models=False))
        # "model must be a model name (a str such as 'gpt-4o'), got None"
        ```
    """
    if model is None or isinstance(model, (int, float, bytes)):
        got = f"{model!r}" if model is None else f"{model!r} ({type(model).__name__})"
    else:
        got = f"an object of type {type(model).__name__}"
    if chat_models:
        return TypeError(
            f"model must be a model name (a str such as 'gpt-4o') or a LangChain chat model, "
            f"got {got}"
        )
    hint = ""
    if isinstance(model, Runnable):
        hint = " (for a chat model, pass its name: model_facts(llm).name)"
    return TypeError(f"model must be a model name (a str such as 'gpt-4o'), got {got}{hint}")


def _name_and_tools(model: Runnable[Any, Any]) -> tuple[str, list[Any] | None, Any]:
    """Model name, bound tools and the chat model under `llm.bind_tools(...)` bindings."""
    tools: list[Any] | None = None
    inner: Any = model
    while isinstance(inner, RunnableBinding):
        if tools is None and inner.kwargs.get("tools"):
            tools = list(inner.kwargs["tools"])
        inner = inner.bound
    for attribute in ("model_name", "model", "model_id", "deployment_name"):
        name = getattr(inner, attribute, None)
        if isinstance(name, str) and name:
            return name, tools, inner
    return type(inner).__name__, tools, inner
