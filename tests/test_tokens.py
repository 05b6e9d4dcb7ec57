"""Token counting: offline loading of the tokenizer files and OpenAI's chat and tool format.

Model families, images, the count cache and model facts are in test_token_rules.py."""

from __future__ import annotations

import base64
import gzip
import hashlib
import inspect
import json
import os
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
import tiktoken
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.tools import tool
from tiktoken_ext import openai_public

from langgraph_ctx.context import tokens
from langgraph_ctx.context.tokens import (
    BPE_SHA256,
    BPE_URL,
    MessageTokenCounter,
    TokenizerDataError,
    count_message_tokens,
    count_tokens,
    count_tool_tokens,
    load_encoding,
)

# ---------------------------------------------------------------------------
# Fixtures: no network, and tiktoken's own encodings as the reference
# ---------------------------------------------------------------------------


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[object]]:
    """Make every network connection raise, and record the attempts."""
    attempts: list[object] = []

    def refuse(*args: object, **kwargs: object) -> None:
        attempts.append(args)
        raise OSError("network access attempted during an offline test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    yield attempts


@pytest.fixture(scope="session")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tiktoken.Encoding]:
    """`tiktoken.get_encoding()` itself, fed through its own file cache (offline).

    The official files are placed in a private TIKTOKEN_CACHE_DIR under the key tiktoken
    computes (sha1 of the URL); tiktoken then checks the sha256 and builds the encoding
    its usual way. This is independent of langgraph_ctx's loader.
    """
    cache = tmp_path_factory.mktemp("tiktoken-cache")
    urls = {
        "o200k_base": "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
        "cl100k_base": "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
    }
    for name, url in urls.items():
        raw = gzip.decompress(tokens.bpe_file_path(name).read_bytes())
        (cache / hashlib.sha1(url.encode()).hexdigest()).write_bytes(raw)
    preloaded = set(tiktoken.registry.ENCODINGS)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TIKTOKEN_CACHE_DIR", str(cache))
        mp.setattr(socket, "getaddrinfo", _refuse)
        encodings = {name: tiktoken.get_encoding(name) for name in urls}
    for name in urls:  # leave tiktoken's registry as we found it
        if name not in preloaded:
            tiktoken.registry.ENCODINGS.pop(name, None)
    return encodings


def _refuse(*args: object, **kwargs: object) -> None:
    raise OSError("network access attempted")


def cookbook_count(messages: list[dict[str, str]], enc: tiktoken.Encoding) -> int:
    """OpenAI cookbook `num_tokens_from_messages` (current models), verbatim logic."""
    tokens_per_message = 3
    tokens_per_name = 1
    num_tokens = 0
    for message in messages:
        num_tokens += tokens_per_message
        for key, value in message.items():
            num_tokens += len(enc.encode(value, disallowed_special=()))
            if key == "name":
                num_tokens += tokens_per_name
    num_tokens += 3  # every reply is primed with <|start|>assistant<|message|>
    return num_tokens


def cookbook_tools(functions: list[dict], enc: tiktoken.Encoding, func_init: int) -> int:
    """OpenAI cookbook `num_tokens_for_tools`, tool part only."""
    prop_init, prop_key, enum_init, enum_item, func_end = 3, 3, -3, 3, 12
    count = 0
    for f in functions:
        count += func_init
        function = f["function"]
        desc = function["description"]
        if desc.endswith("."):
            desc = desc[:-1]
        count += len(enc.encode(function["name"] + ":" + desc))
        if len(function["parameters"]["properties"]) > 0:
            count += prop_init
            for key, prop in function["parameters"]["properties"].items():
                count += prop_key
                if "enum" in prop:
                    count += enum_init
                    for item in prop["enum"]:
                        count += enum_item
                        count += len(enc.encode(item))
                p_desc = prop["description"]
                if p_desc.endswith("."):
                    p_desc = p_desc[:-1]
                count += len(enc.encode(f"{key}:{prop['type']}:{p_desc}"))
    return count + func_end


def encoding_of(model: str) -> str:
    return (
        "cl100k_base"
        if model.startswith(("gpt-4-", "gpt-3.5")) or model == "gpt-4"
        else "o200k_base"
    )


# ---------------------------------------------------------------------------
# Offline loading
# ---------------------------------------------------------------------------


def test_cold_load_in_a_fresh_process_attempts_no_network(tmp_path: Path) -> None:
    script = textwrap.dedent(
        """
        import json, os, socket, sys
        attempts = []
        def refuse(*args, **kwargs):
            attempts.append(repr(args)[:80])
            raise OSError("network access attempted")
        socket.socket.connect = refuse
        socket.socket.connect_ex = refuse
        socket.create_connection = refuse
        socket.getaddrinfo = refuse

        import tiktoken
        from langgraph_ctx.context.tokens import count_tokens, load_encoding
        n = count_tokens([("user", "hello world")], model="gpt-4o")
        ids = {name: load_encoding(name).encode_ordinary("hello world")
               for name in ("o200k_base", "cl100k_base")}
        print(json.dumps({
            "n": n, "ids": ids, "attempts": attempts,
            "cache_files": os.listdir(os.environ["TIKTOKEN_CACHE_DIR"]),
            "tiktoken_registry": sorted(tiktoken.registry.ENCODINGS),
        }))
        """
    )
    cache = tmp_path / "tiktoken-cache"
    cache.mkdir()
    env = {**os.environ, "TIKTOKEN_CACHE_DIR": str(cache)}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["attempts"] == []
    assert result["ids"] == {"o200k_base": [24912, 2375], "cl100k_base": [15339, 1917]}
    assert result["n"] == 3 + 1 + 2 + 3
    # The files reached tiktoken through its own cache, named as tiktoken names them,
    # whole and checked; tiktoken itself now serves them offline.
    expected = {hashlib.sha1(BPE_URL[name].encode()).hexdigest(): name for name in BPE_URL}
    assert sorted(result["cache_files"]) == sorted(expected)
    for file_name, name in expected.items():
        digest = hashlib.sha256((cache / file_name).read_bytes()).hexdigest()
        assert digest == BPE_SHA256[name]
    assert result["tiktoken_registry"] == ["cl100k_base", "o200k_base"]


def _load_fresh(monkeypatch: pytest.MonkeyPatch, cache_dir: str) -> tiktoken.Encoding:
    """`load_encoding` as in a new process whose tiktoken cache is ``cache_dir``."""
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", cache_dir)
    monkeypatch.setattr(tokens.bpe, "_encodings", {})
    monkeypatch.setattr(tiktoken.registry, "ENCODINGS", {})
    monkeypatch.setattr(socket, "getaddrinfo", _refuse)
    return load_encoding("cl100k_base")


def test_a_corrupt_file_in_tiktokens_cache_is_replaced(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    cached = tmp_path / hashlib.sha1(BPE_URL["cl100k_base"].encode()).hexdigest()
    cached.write_bytes(base64.b64encode(b"a") + b" 0\n")  # a torn or foreign file
    enc = _load_fresh(monkeypatch, str(tmp_path))
    assert enc.encode_ordinary("hello world") == [15339, 1917]
    assert hashlib.sha256(cached.read_bytes()).hexdigest() == BPE_SHA256["cl100k_base"]
    assert [p.name for p in tmp_path.iterdir()] == [cached.name]  # no temporary file left


def test_a_cache_turned_off_or_unwritable_raises_a_named_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with pytest.raises(TokenizerDataError, match=r"cache is turned off.*TIKTOKEN_CACHE_DIR"):
        _load_fresh(monkeypatch, "")
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    with pytest.raises(TokenizerDataError, match=r"cannot be written.*TIKTOKEN_CACHE_DIR"):
        _load_fresh(monkeypatch, str(blocker / "cache"))


def test_the_cache_key_is_the_address_tiktoken_fetches() -> None:
    for name, url in BPE_URL.items():
        source = inspect.getsource(openai_public.ENCODING_CONSTRUCTORS[name])
        assert f'"{url}"' in source


def test_pinned_hashes_are_tiktokens_published_hashes() -> None:
    for name, digest in BPE_SHA256.items():
        source = inspect.getsource(openai_public.ENCODING_CONSTRUCTORS[name])
        assert f'expected_hash="{digest}"' in source
        raw = gzip.decompress(tokens.bpe_file_path(name).read_bytes())
        assert hashlib.sha256(raw).hexdigest() == digest


def test_encodings_equal_tiktoken_reference(
    reference: dict[str, tiktoken.Encoding], no_network: list[object]
) -> None:
    text = "Hello, wörld! 東京の天気は？ <|endoftext|> def f(x):\n\treturn x**2  # 🚀"
    for name, ref in reference.items():
        ours = load_encoding(name)  # type: ignore[arg-type]
        assert ours.encode_ordinary(text) == ref.encode_ordinary(text)
        assert ours._pat_str == ref._pat_str
        assert ours._special_tokens == ref._special_tokens
        assert ours.n_vocab == ref.n_vocab
    assert no_network == []


def _bpe_override(monkeypatch: pytest.MonkeyPatch, path: Path) -> None:
    monkeypatch.setattr(tokens.bpe, "bpe_file_path", lambda encoding: path)
    monkeypatch.setattr(tokens.bpe, "_encodings", {})


def test_missing_bpe_file_raises_named_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    missing = tmp_path / "o200k_base.tiktoken.gz"
    _bpe_override(monkeypatch, missing)
    with pytest.raises(TokenizerDataError) as info:
        load_encoding("o200k_base")
    assert info.value.path == str(missing)
    assert "cannot be read" in str(info.value) and "pip install" in str(info.value)


def test_corrupt_bpe_files_raise_named_errors(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = tmp_path / "o200k_base.tiktoken.gz"
    _bpe_override(monkeypatch, path)
    path.write_bytes(b"not gzip at all")
    with pytest.raises(TokenizerDataError, match="not valid gzip"):
        load_encoding("o200k_base")
    # Valid gzip, valid format, wrong content: the sha256 check catches it.
    path.write_bytes(gzip.compress(base64.b64encode(b"a") + b" 0\n"))
    with pytest.raises(TokenizerDataError, match="sha256 of the decompressed file is"):
        load_encoding("o200k_base")


# ---------------------------------------------------------------------------
# OpenAI chat format
# ---------------------------------------------------------------------------

MODELS = ["gpt-4o", "gpt-4o-mini", "gpt-4.1", "gpt-5", "o3", "o1", "gpt-4", "gpt-3.5-turbo"]

JARGON = [  # the OpenAI cookbook's example, with the API's counts (129 / 124)
    {
        "role": "system",
        "content": "You are a helpful, pattern-following assistant that translates "
        "corporate jargon into plain English.",
    },
    {
        "role": "system",
        "name": "example_user",
        "content": "New synergies will help drive top-line growth.",
    },
    {
        "role": "system",
        "name": "example_assistant",
        "content": "Things working well together will increase revenue.",
    },
    {
        "role": "system",
        "name": "example_user",
        "content": "Let's circle back when we have more bandwidth to touch base on "
        "opportunities for increased leverage.",
    },
    {
        "role": "system",
        "name": "example_assistant",
        "content": "Let's talk later when we're less busy about how to do better.",
    },
    {
        "role": "user",
        "content": "This late pivot means we don't have time to boil the ocean for the "
        "client deliverable.",
    },
]

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_current_weather",
        "description": "Get the current weather in a given location",
        "parameters": {
            "type": "object",
            "properties": {
                "location": {
                    "type": "string",
                    "description": "The city and state, e.g. San Francisco, CA",
                },
                "unit": {
                    "type": "string",
                    "description": "The unit of temperature to return",
                    "enum": ["celsius", "fahrenheit"],
                },
            },
            "required": ["location"],
        },
    },
}
WEATHER_MESSAGES = [
    {
        "role": "system",
        "content": "You are a helpful assistant that can answer to questions about the weather.",
    },
    {"role": "user", "content": "What's the weather like in San Francisco?"},
]


@pytest.mark.parametrize(
    ("model", "api_count"),
    [
        ("gpt-3.5-turbo", 129),
        ("gpt-4-0613", 129),
        ("gpt-4", 129),
        ("gpt-4o", 124),
        ("gpt-4o-mini", 124),
    ],
)
def test_cookbook_example_matches_openai_api_count(model: str, api_count: int) -> None:
    assert count_tokens(JARGON, model=model) == api_count


@pytest.mark.parametrize(
    ("model", "api_count"),
    [("gpt-3.5-turbo", 105), ("gpt-4", 105), ("gpt-4o", 101), ("gpt-4o-mini", 101)],
)
def test_cookbook_tools_example_matches_openai_api_count(model: str, api_count: int) -> None:
    assert count_tokens(WEATHER_MESSAGES, model=model, tools=[WEATHER_TOOL]) == api_count


@pytest.mark.parametrize("model", MODELS)
def test_counts_equal_tiktoken_under_the_published_formula(
    model: str, reference: dict[str, tiktoken.Encoding], no_network: list[object]
) -> None:
    enc = reference[encoding_of(model)]
    messages = [
        {"role": "system", "content": "You are terse. Never use <|endoftext|> literally."},
        {"role": "user", "name": "alice", "content": "Wie spät ist es in 東京? 🕐"},
        {"role": "assistant", "content": "It is 10:42 there.\n\nAnything else?"},
        {"role": "user", "content": "  leading and trailing spaces  "},
    ]
    lc_messages = [
        SystemMessage(messages[0]["content"]),
        HumanMessage(messages[1]["content"], name="alice"),
        AIMessage(messages[2]["content"]),
        HumanMessage(messages[3]["content"]),
    ]
    expected = cookbook_count(messages, enc)
    assert count_tokens(messages, model=model) == expected
    assert count_tokens(lc_messages, model=model) == expected
    assert no_network == []


_role = st.sampled_from(["system", "user", "assistant"])
_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=0, max_size=80)
_name = st.one_of(st.none(), st.from_regex(r"[a-zA-Z0-9_-]{1,12}", fullmatch=True))


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(st.tuples(_role, _text, _name), min_size=0, max_size=6),
    st.sampled_from(["gpt-4o", "gpt-4"]),
)
def test_random_conversations_match_the_formula(
    reference: dict[str, tiktoken.Encoding],
    conversation: list[tuple[str, str, str | None]],
    model: str,
) -> None:
    messages = []
    for role, content, name in conversation:
        message = {"role": role, "content": content}
        if name:
            message["name"] = name
        messages.append(message)
    assert count_tokens(messages, model=model) == cookbook_count(
        messages, reference[encoding_of(model)]
    )


def test_tool_calls_are_counted_as_sent(reference: dict[str, tiktoken.Encoding]) -> None:
    enc = reference["o200k_base"]
    n = lambda text: len(enc.encode_ordinary(text))  # noqa: E731
    args = {"location": "Boston, MA", "unit": "celsius"}
    one = AIMessage("", tool_calls=[{"name": "get_weather", "args": args, "id": "call_1"}])
    result = ToolMessage("12 degrees", tool_call_id="call_1", name="get_weather")
    base = cookbook_count(
        [{"role": "assistant", "content": ""}, {"role": "tool", "content": "12 degrees"}], enc
    )
    # One call: its name, its JSON arguments (as langchain-openai sends them) and 5.
    assert count_tokens([one, result]) == base + 5 + n("get_weather") + n(json.dumps(args))
    two = AIMessage(
        "",
        tool_calls=[
            {"name": "get_weather", "args": args, "id": "call_1"},
            {"name": "get_time", "args": {}, "id": "call_2"},
        ],
    )
    base_two = cookbook_count([{"role": "assistant", "content": ""}], enc)
    parallel = 15 + (7 + n("get_weather") + n(json.dumps(args))) + (7 + n("get_time") + n("{}"))
    assert count_tokens([two]) == base_two + parallel
    # Tool-use blocks duplicating `tool_calls` in the content are not counted twice.
    blocks = AIMessage(
        [{"type": "tool_use", "id": "call_1", "name": "get_weather", "input": args}],
        tool_calls=[{"name": "get_weather", "args": args, "id": "call_1"}],
    )
    assert count_message_tokens(blocks) == count_message_tokens(one)


def test_tool_call_rule_matches_a_measured_openai_request() -> None:
    # A gpt-4 request measured at 35 prompt tokens by the OpenAI API (reported in
    # forestwanglin/openai-java#5), sent with pretty-printed arguments. langchain-openai
    # re-sends json.dumps(args), so the same request from LangChain is the measured
    # count minus the difference between the two argument strings.
    enc = load_encoding("cl100k_base")
    pretty = '{\n  "location": "Boston, MA"\n}'
    compact = json.dumps({"location": "Boston, MA"})
    measured = 35 - len(enc.encode(pretty)) + len(enc.encode(compact))
    messages = [
        AIMessage(
            "",
            tool_calls=[
                {"name": "get_current_weather", "args": {"location": "Boston, MA"}, "id": "c1"}
            ],
        ),
        ToolMessage("29 degree celcius", tool_call_id="c1", name="get_current_weather"),
    ]
    assert count_tokens(messages, model="gpt-4") == measured


@pytest.mark.parametrize(("model", "func_init"), [("gpt-4o", 7), ("gpt-4.1", 7), ("gpt-4", 10)])
def test_tool_schemas_follow_the_cookbook_formula(
    model: str, func_init: int, reference: dict[str, tiktoken.Encoding]
) -> None:
    enc = reference[encoding_of(model)]
    second = {
        "type": "function",
        "function": {
            "name": "book_flight",
            "description": "Book a flight.",
            "parameters": {
                "type": "object",
                "properties": {
                    "origin": {"type": "string", "description": "IATA code."},
                    "seats": {"type": "integer", "description": "How many seats"},
                    "cabin": {"type": "string", "description": "", "enum": ["economy", "business"]},
                },
            },
        },
    }
    expected = cookbook_tools([WEATHER_TOOL, second], enc, func_init)
    assert count_tool_tokens([WEATHER_TOOL, second], model=model) == expected


def test_langchain_tools_and_tools_without_schemas_are_counted() -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    as_dict = {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add two numbers.",
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            },
        },
    }
    assert count_tool_tokens([add]) == count_tool_tokens([as_dict])
    nested = {
        "name": "plan",
        "description": "Plan a trip",
        "parameters": {
            "type": "object",
            "properties": {
                "stops": {
                    "type": "array",
                    "description": "Stops",
                    "items": {"type": "object", "properties": {"city": {"type": "string"}}},
                }
            },
        },
    }
    flat = json.loads(json.dumps(nested))
    del flat["parameters"]["properties"]["stops"]["items"]
    assert count_tool_tokens([nested]) > count_tool_tokens([flat])

    counter = MessageTokenCounter("gpt-4o")
    tokens_, notes = counter.count_tools([{"name": "lookup"}, object()])
    assert tokens_ > 0
    assert len(notes) == 2
    assert "'lookup' has no parameter schema" in notes[0]
    assert "'object' has no usable schema" in notes[1]
    # Provider built-in tools are counted by their JSON.
    assert count_tool_tokens([{"type": "web_search_preview"}]) > 0


def test_count_past_is_exact_or_a_lower_bound_past_the_limit() -> None:
    """`count_past` counts a prefix once it passes the limit, cut where tiktoken's pieces
    start: then its tokens are more than the limit and at most the message's (the
    prefix plus the rest is the whole count); otherwise it is the message's count."""
    import random

    from langchain_core.messages import ToolMessage

    from langgraph_ctx.context.tokens import MessageTokenCounter

    pool = [
        "word", " ", "  ", "\n", "\n\n", " \n", "\t", "123", "4567", ".", ",", "'s", "'S",
        "Hello", "ÉTÉ", "修复", "/", "//", "!!", " \r\n", "é", "😀", "x", "A", "___", "-",
        "\u3000", "\xa0",
    ]  # fmt: skip
    rng = random.Random(11)
    for model in ("gpt-4o", "gpt-4"):
        counter = MessageTokenCounter(model)
        seen_partial = seen_exact = 0
        for i in range(400):
            text = "".join(rng.choice(pool) for _ in range(rng.randint(0, 600)))
            message = ToolMessage(text, tool_call_id=f"c{i}", id=f"m{i}")
            limit = rng.randint(0, 120)
            whole = count_tokens([message], model=model) - count_tokens([], model=model)
            past = counter.count_past(message, limit)
            if past.exact:
                seen_exact += 1
                assert past.tokens == past.estimate == whole
            else:
                seen_partial += 1
                assert limit < past.tokens <= whole
        assert seen_partial > 50 and seen_exact > 50


@pytest.mark.parametrize(
    "odd",
    [
        {"role": "user", "content": None},
        {"role": "user", "content": [1, 2]},  # a list of what no content block is
        {"role": "user", "content": [None, "text", {"type": "text", "text": "x"}]},
        {"role": "user", "content": (1,)},
        {"role": 7, "content": {"nested": [1]}},
        {"type": "mystery"},
        None,
        42,
    ],
)
def test_odd_messages_are_counted_as_their_text_never_raising(odd: object) -> None:
    """docs/budget.md: nothing in a message list makes `count_tokens` raise."""
    alone = count_tokens([odd], model="gpt-4o")  # type: ignore[list-item]
    with_hi = count_tokens([odd, ("user", "hi")], model="gpt-4o")  # type: ignore[list-item]
    assert alone > 3 and with_hi > alone  # its own overhead at least, then one more message
