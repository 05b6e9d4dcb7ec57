"""Token counting: offline loading, OpenAI's chat format, images, tools, cache, bad input."""

from __future__ import annotations

import base64
import gzip
import hashlib
import inspect
import json
import math
import os
import socket
import struct
import subprocess
import sys
import textwrap
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
import tiktoken
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
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
    image_size,
    image_tokens,
    load_encoding,
    model_family,
)

ROOT = Path(__file__).resolve().parents[1]

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


# ---------------------------------------------------------------------------
# Families and unknown models
# ---------------------------------------------------------------------------


def test_model_families() -> None:
    assert model_family("gpt-4o-2024-08-06").encoding == "o200k_base"
    assert model_family("openai:gpt-4.1-mini").exact
    assert model_family("azure_openai/gpt-35-turbo").encoding == "cl100k_base"
    assert model_family("gpt-4-turbo").encoding == "cl100k_base"
    assert model_family("o4-mini").image_rule == "patch"
    for name, family in [
        ("anthropic:claude-sonnet-4-5", "claude"),
        ("models/gemini-2.5-pro", "gemini"),
        ("Qwen/Qwen3-32B", "qwen"),
        ("meta-llama/Llama-3.1-8B-Instruct", "llama"),
        ("gpt-oss-120b", "gpt-oss"),
    ]:
        fam = model_family(name)
        assert (fam.name, fam.exact) == (family, False)


def test_approximate_families_scale_o200k_per_message() -> None:
    msgs = [HumanMessage("The quick brown fox jumps over the lazy dog. " * 5), AIMessage("ok")]
    per_message = [count_message_tokens(m, "gpt-4o") for m in msgs]
    expected = sum(math.ceil(n * 1.25) for n in per_message) + 3
    assert count_tokens(msgs, model="claude-3-5-haiku-latest") == expected


def test_unknown_model_falls_back_with_one_warning_per_name() -> None:
    name = f"my-finetune-{uuid.uuid4().hex[:8]}"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = count_tokens([("user", "hello")], model=name)
        count_tokens([("user", "hello again")], model=name)
        count_message_tokens(("user", "x"), model=name)
    relevant = [w for w in caught if name in str(w.message)]
    assert len(relevant) == 1
    assert "o200k_base" in str(relevant[0].message)
    assert relevant[0].filename == __file__  # points at the caller, not the package
    assert first == math.ceil(count_message_tokens(("user", "hello")) * 1.1) + 3
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        count_tokens(["x"], model=name + "-other")
    assert len(caught) == 1


# ---------------------------------------------------------------------------
# Images and other media
# ---------------------------------------------------------------------------


def png_bytes(width: int, height: int, body: int = 50_000) -> bytes:
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + ihdr + os.urandom(body)


def jpeg_bytes(width: int, height: int) -> bytes:
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00" + b"\x00" * 9
    exif = b"\xff\xe1" + struct.pack(">H", 2 + 3000) + os.urandom(3000)
    sof0 = b"\xff\xc0" + struct.pack(">HBHHB", 11, 8, height, width, 1) + b"\x01\x11\x00"
    return b"\xff\xd8" + app0 + exif + sof0 + os.urandom(2000)


def test_image_sizes_are_read_from_headers() -> None:
    assert image_size(png_bytes(1500, 800)) == (1500, 800)
    assert image_size(jpeg_bytes(640, 480)) == (640, 480)
    assert image_size(b"GIF89a" + struct.pack("<HH", 31, 17) + b"\x00" * 10) == (31, 17)
    vp8x = (
        b"RIFF"
        + b"\x00" * 4
        + b"WEBPVP8X"
        + b"\x00" * 8
        + (299).to_bytes(3, "little")
        + (199).to_bytes(3, "little")
    )
    assert image_size(vp8x) == (300, 200)
    assert image_size(b"not an image") is None


def test_image_token_rules() -> None:
    # OpenAI vision guide examples.
    assert image_tokens(1024, 1024, model="gpt-4o") == 765
    assert image_tokens(2048, 4096, model="gpt-4o") == 1105
    assert image_tokens(4096, 8192, model="gpt-4o", detail="low") == 85
    assert image_tokens(1024, 1024, model="gpt-4o-mini") == 2833 + 4 * 5667
    assert image_tokens(1024, 1024, model="o1") == 75 + 4 * 150
    assert image_tokens(1024, 1024, model="gpt-4.1-mini") == math.ceil(1024 * 1.62)
    assert image_tokens(1800, 2400, model="gpt-4.1-mini") == math.ceil(1452 * 1.62)
    assert image_tokens(1000, 1000, model="claude-sonnet-4-5") == 1334
    assert image_tokens(300, 300, model="gemini-2.5-flash") == 258
    assert image_tokens(1000, 1000, model="gemini-2.5-flash") == 4 * 258
    assert image_tokens(None, None, model="gpt-4o") == 765  # unknown size: 1024x1024


def test_image_blocks_are_never_counted_as_base64() -> None:
    png = base64.b64encode(png_bytes(1500, 800)).decode()
    text_only = count_message_tokens(HumanMessage([{"type": "text", "text": "What is this?"}]))
    formats = [
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{png}"}},
        {"type": "image", "base64": png, "mime_type": "image/png"},
        {"type": "image", "source_type": "base64", "data": png, "mime_type": "image/png"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png}},
    ]
    for block in formats:
        message = HumanMessage([{"type": "text", "text": "What is this?"}, block])
        assert count_message_tokens(message) == text_only + image_tokens(1500, 800)
    jpeg = base64.b64encode(jpeg_bytes(640, 480)).decode()
    low = {
        "type": "image_url",
        "image_url": {"url": f"data:image/jpeg;base64,{jpeg}", "detail": "low"},
    }
    assert count_message_tokens(HumanMessage([low])) == count_message_tokens(HumanMessage([])) + 85
    remote = {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}
    assert (
        count_message_tokens(HumanMessage([remote])) == count_message_tokens(HumanMessage([])) + 765
    )
    # Unknown blocks carrying base64: the payload is replaced by the media estimate.
    odd = {"type": "hologram", "payload": base64.b64encode(os.urandom(30_000)).decode()}
    assert count_message_tokens(HumanMessage([odd])) < 1200
    audio = {"type": "input_audio", "input_audio": {"data": "UklGR" * 5000, "format": "wav"}}
    assert (
        count_message_tokens(HumanMessage([audio]))
        == count_message_tokens(HumanMessage([])) + tokens.MEDIA_BLOCK_TOKENS
    )


# ---------------------------------------------------------------------------
# Cache and bad input
# ---------------------------------------------------------------------------


def test_cache_counts_each_message_once_and_invalidates_edits() -> None:
    counter = MessageTokenCounter("gpt-4o")
    original = HumanMessage("short", id="m1")
    first = counter.count(original)
    assert (counter.hits, counter.misses) == (0, 1)
    # Same id and content in a new object (as after a checkpoint round trip): a hit.
    assert counter.count(HumanMessage("short", id="m1")) == first
    assert (counter.hits, counter.misses) == (1, 1)
    edited = HumanMessage("a much longer text than before, edited in place", id="m1")
    assert counter.count(edited) == count_message_tokens(edited) > first
    assert (counter.hits, counter.misses, len(counter)) == (1, 2, 1)  # replaced, not added
    # Tool-call edits invalidate too.
    call = AIMessage("", id="a1", tool_calls=[{"name": "f", "args": {"x": 1}, "id": "c"}])
    changed = AIMessage("", id="a1", tool_calls=[{"name": "f", "args": {"x": 123456}, "id": "c"}])
    assert counter.count(call) != counter.count(changed)


def test_cache_is_bounded() -> None:
    counter = MessageTokenCounter("gpt-4o", max_entries=3)
    for i in range(10):
        counter.count(HumanMessage(f"message {i}", id=f"m{i}"))
    assert len(counter) == 3
    counter.count(HumanMessage("message 9", id="m9"))
    assert counter.hits == 1
    with pytest.raises(ValueError, match="max_entries"):
        MessageTokenCounter(max_entries=0)


def test_count_many_reuses_the_prefix_of_either_list_it_alternates_between(
    fingerprinted: list[BaseMessage],
) -> None:
    # A pipeline step counts the history, then the request it sends: both prefixes stay.
    counter = MessageTokenCounter("gpt-4o")
    history = [HumanMessage(f"question {i}", id=f"h{i}") for i in range(50)]
    request = [SystemMessage("You are terse.", id="s"), *history[-3:]]
    counter.count_many(history)
    counter.count_many(request)
    history = [*history, AIMessage("an answer", id="a")]
    fingerprinted.clear()
    counts = counter.count_many(history)
    assert len(fingerprinted) == 1  # only the new message went through the id + fingerprint cache
    assert counts == [count_message_tokens(m) for m in history]
    # An edit in place inside the reused prefix is still seen.
    history[3].content = "a question rewritten in place, much longer than it was"
    assert counter.count_many(history)[3] == count_message_tokens(history[3])


def test_count_request_equals_count_tokens_and_is_cached() -> None:
    counter = MessageTokenCounter("gpt-4o")
    call = AIMessage("", id="a1", tool_calls=[{"name": "f", "args": {"x": 1}, "id": "c"}])
    messages = [HumanMessage("Hi!", id="h"), call, ToolMessage("result", tool_call_id="c")]
    assert counter.count_request(messages) == count_tokens(messages)
    assert counter.count_request([]) == count_tokens([])
    misses = counter.misses
    assert counter.count_request(messages) == count_tokens(messages)
    assert counter.misses == misses  # every message came from the cache
    assert counter.count_request([("user", "Hi!")]) == count_tokens([("user", "Hi!")])

    def by_words(items: list[BaseMessage]) -> int:
        return sum(len(str(m.content).split()) for m in items)

    custom = MessageTokenCounter("gpt-4o", token_counter=by_words)
    assert custom.count_request([HumanMessage("one two"), HumanMessage("three")]) == 3


def test_count_text_as_system_remembers_the_last_prompt_and_sees_a_new_one() -> None:
    counter = MessageTokenCounter("gpt-4o")
    prompt = "You are a careful research agent. " * 20
    first = counter.count_text_as_system(prompt)
    assert first == count_message_tokens(SystemMessage(prompt))
    hits = counter.hits
    assert counter.count_text_as_system("".join(prompt)) == first  # equal text: remembered
    assert counter.hits == hits + 1
    longer = prompt + "Answer in French."
    assert counter.count_text_as_system(longer) == count_message_tokens(SystemMessage(longer))
    assert counter.count_text_as_system("") == 0


def test_custom_token_counter_is_used_per_message() -> None:
    seen: list[int] = []

    def by_words(messages: list[BaseMessage]) -> int:
        seen.append(len(messages))
        return sum(len(str(m.content).split()) for m in messages)

    counter = MessageTokenCounter("claude-sonnet-4-5", token_counter=by_words)
    assert counter.count(HumanMessage("one two three", id="x")) == 3
    assert counter.count(HumanMessage("one two three", id="x")) == 3
    assert seen == [1]
    assert not counter.exact


class ThoughtMessage(BaseMessage):
    """A message type no provider knows."""

    type: str = "thought"


def test_bad_input_is_counted_never_raised() -> None:
    none_content = AIMessage.model_construct(content=None, id="n1", tool_calls=[])
    weird = [
        None,
        42,
        {"foo": "bar"},
        {"role": "narrator", "content": None},
        {"role": "user", "content": {"nested": True}},
        none_content,
        ThoughtMessage("hmm"),
        HumanMessage.model_construct(content=[{"type": "text"}, "plain", 7]),
    ]
    n = count_tokens(weird)
    assert n > 3 + 3 * len(weird)
    assert count_message_tokens(ThoughtMessage("hmm")) == 3 + len(
        load_encoding().encode_ordinary("thought")
    ) + len(load_encoding().encode_ordinary("hmm"))
    assert count_tokens([]) == 3
    assert count_tokens("just a string") == count_tokens([("user", "just a string")])


def test_huge_tool_output_is_counted_exactly() -> None:
    blob = "lorem ipsum dolor sit amet 12345 " * 30_000  # ~1 MB
    message = ToolMessage(blob, tool_call_id="c1")
    expected = 3 + 1 + len(load_encoding().encode_ordinary(blob))
    assert count_message_tokens(message) == expected


# -- model names and windows: the model's own facts first --------------------------------------


def test_names_resolve_through_tiktokens_map_first_fine_tunes_included() -> None:
    from langgraph_ctx.context.tokens import base_model_name, context_window

    assert base_model_name("ft:gpt-4o-mini:acme::abc123") == "gpt-4o-mini"
    assert base_model_name("openai:ft:gpt-4o-2024-08-06:acme:tuned:x1") == "gpt-4o-2024-08-06"
    assert base_model_name("azure/GPT-4o") == "gpt-4o"
    assert base_model_name("ollama:llama3:8b") == "llama3:8b"  # an Ollama tag is not a prefix
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "unknown model" warning for any of these
        for name in ("ft:gpt-4o-mini:acme::abc123", "ft:gpt-4o:acme::x", "gpt-4o-2024-11-20"):
            family = model_family(name)
            assert family.exact and family.encoding == "o200k_base", name
        assert model_family("ft:gpt-3.5-turbo-0125:acme::y").encoding == "cl100k_base"
        assert model_family("ollama:llama3:8b").name == "llama"
    assert model_family("ft:gpt-4o-mini:acme::abc123").image_base == 2833  # gpt-4o-mini's rule
    text = [("user", "Ship the fix to /srv/app by Friday, 17:00.")]
    assert count_tokens(text, model="ft:gpt-4o-mini:acme::abc123") == count_tokens(
        text, model="gpt-4o-mini"
    )
    assert context_window("ft:gpt-4o-mini:acme::abc123") == 128_000
    assert context_window("my-local-llama") is None


def test_model_facts_read_the_chat_models_profile_before_the_table() -> None:
    from langgraph_ctx.context.tokens import model_facts
    from langgraph_ctx.testing import ScriptedChatModel

    profiled = ScriptedChatModel(script=["x"], model_name="gpt-4o",
                                 profile={"max_input_tokens": 3_300})
    facts = model_facts(profiled.bind_tools([]), context_window=9_999)
    assert (facts.name, facts.context_window, facts.window_source) == ("gpt-4o", 3_300, "profile")
    assert model_facts("gpt-4o").window_source == "table"
    assert model_facts("my-local-llama", context_window=32_768).window_source == "argument"
    assert model_facts("my-local-llama").context_window is None
    with pytest.raises(ValueError, match="positive int"):
        model_facts("gpt-4o", context_window=-1)
