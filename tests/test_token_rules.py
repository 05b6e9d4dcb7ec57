"""Token counting: model families, images and media, the count cache, bad input, model facts."""

from __future__ import annotations

import base64
import math
import os
import struct
import uuid
import warnings

import pytest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from langgraph_ctx.context import tokens
from langgraph_ctx.context.tokens import (
    MessageTokenCounter,
    count_message_tokens,
    count_tokens,
    image_size,
    image_tokens,
    load_encoding,
    model_family,
)

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

    profiled = ScriptedChatModel(
        script=["x"], model_name="gpt-4o", profile={"max_input_tokens": 3_300}
    )
    facts = model_facts(profiled.bind_tools([]), context_window=9_999)
    assert (facts.name, facts.context_window, facts.window_source) == ("gpt-4o", 3_300, "profile")
    assert model_facts("gpt-4o").window_source == "table"
    assert model_facts("my-local-llama", context_window=32_768).window_source == "argument"
    assert model_facts("my-local-llama").context_window is None
    with pytest.raises(ValueError, match="positive int"):
        model_facts("gpt-4o", context_window=-1)
