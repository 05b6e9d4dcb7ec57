"""Short texts are counted holding the GIL, to the same tokens as tiktoken's encoder.

`Encoder.bpe` splits a text of up to `_GIL_TEXT` characters with the encoding's own
pattern (the `regex` module, told not to release the GIL) and counts each piece with
`encode_single_piece`, which is what `encode_ordinary` does inside, minus letting go of
the GIL: a node counting its new messages (`keeping_gil`, which `MessageTokenCounter`
enters for a step's few new ones) beside LangGraph's background checkpoint write keeps
it (benchmarks/budget.py). Here both ways count random text of every kind.
"""

from __future__ import annotations

import random
import sys
import threading
import time

import pytest

from langgraph_ctx.context.tokens import load_encoding
from langgraph_ctx.context.tokens.chat_format import _GIL_TEXT, Encoder, keeping_gil
from langgraph_ctx.context.tokens.families import model_family

ALPHABET = (
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    " \t\n\r\n  .,;:!?'\"()[]{}<>-_=+*/\\|@#$%^&~`"
    "éèàùçÉÀñÑöÖüÜßøå"  # Latin letters, upper and lower
    "\u0301\u0308\u0327"  # combining marks
    "東京天気日本語中文한국어"  # CJK, Hangul
    "مرحبا" "नमस्ते" "Привет" "Ωμέγα"  # Arabic, Devanagari, Cyrillic, Greek
    "😀👍🏽🇫🇷\u200d\u00a0\u2028\u3000"  # emoji, ZWJ, non-breaking and other spaces
    "²³¼½①Ⅻ٣"  # other numbers
)
CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'Ll", "'D"]


def _texts(rng: random.Random, n: int) -> list[str]:
    out = []
    for _ in range(n):
        parts = []
        for _ in range(rng.randint(0, 40)):
            kind = rng.random()
            if kind < 0.1:
                parts.append(rng.choice(CONTRACTIONS))
            elif kind < 0.2:
                parts.append(" " * rng.randint(1, 5))
            elif kind < 0.25:
                parts.append(str(rng.randint(0, 10**9)))
            else:
                parts.append("".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 8))))
        out.append("".join(parts))
    return out


@pytest.mark.parametrize("model", ["gpt-4o", "gpt-4"])
def test_short_texts_count_as_tiktoken_encodes_them(model: str) -> None:
    encoder = Encoder(model_family(model))
    enc = load_encoding(model_family(model).encoding)
    texts = _texts(random.Random(16), 3000)
    texts += ["", " ", "\n\n\n", "don't", "I'M", "hello  world ", "a\r\nb", "x" * _GIL_TEXT]
    texts.append("half a surrogate \ud800 here")  # tiktoken repairs it; so do we
    for text in texts:
        with keeping_gil():
            assert encoder.bpe(text) == len(enc.encode_ordinary(text)), repr(text)
    with keeping_gil():
        assert encoder.bpe("y " * _GIL_TEXT) == len(enc.encode_ordinary("y " * _GIL_TEXT))


def test_counting_a_short_text_keeps_the_gil() -> None:
    encoder = Encoder(model_family("gpt-4o"))
    text = "the budget context model token tool call result weather Tokyo Paris " * 10
    encoder.bpe(text)  # pieces cached: count the rest freshly
    encoder._pieces.clear()
    spins = [0]
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            spins[0] += 1

    previous = sys.getswitchinterval()
    sys.setswitchinterval(0.5)  # no forced switch: only a released GIL lets it run
    worker = threading.Thread(target=spin)
    worker.start()
    try:
        time.sleep(0.01)  # the worker runs while this thread sleeps
        before = spins[0]
        with keeping_gil():
            for _ in range(5):
                encoder._pieces.clear()
                encoder.bpe(text)
        during = spins[0] - before
    finally:
        stop.set()
        sys.setswitchinterval(previous)
        worker.join()
    assert during == 0


def test_a_counter_keeps_the_gil_for_a_few_new_messages_only(monkeypatch) -> None:
    from langchain_core.messages import HumanMessage

    from langgraph_ctx.context.tokens import MessageTokenCounter, chat_format

    seen: list[bool] = []
    bpe = Encoder.bpe

    def spy(self: Encoder, text: str) -> int:
        seen.append(chat_format._KEEP_GIL.get())
        return bpe(self, text)

    monkeypatch.setattr(Encoder, "bpe", spy)
    counter = MessageTokenCounter("gpt-4o")
    history = [HumanMessage(f"message number {i} " * 8, id=f"m{i}") for i in range(40)]
    counter.count_many(history)  # a history counted from scratch: tiktoken's encoder
    assert seen and not any(seen)
    seen.clear()
    counter.count_many([*history, HumanMessage("one more " * 10, id="new")])
    assert seen and all(seen)  # the step's new message: the GIL kept


@pytest.mark.parametrize("model", ["gpt-4o", "gpt-4"])
def test_ascii_text_splits_into_the_pieces_of_the_encodings_own_pattern(model: str) -> None:
    """`Encoder.bpe` splits ASCII text with `re` (`ascii_pattern`): the same pieces as
    the encoding's `regex` pattern, for every ASCII character (controls, U+001C..U+001F,
    which `re`'s `\\s` matches and `regex`'s does not, apostrophes, case), and with the
    previews' "…" among them."""
    import re

    import regex

    from langgraph_ctx.context.tokens.chat_format import ascii_pattern

    enc = load_encoding(model_family(model).encoding)
    converted = ascii_pattern(enc._pat_str)
    assert converted is not None
    fast = re.compile(converted).findall
    slow = regex.compile(enc._pat_str).findall
    rng = random.Random(29)
    every = [chr(c) for c in range(128)]
    common = list("aAzZ09 '\n\r\t\x0b\x0c\x1c\x1f/.,-sStTdDmMlLvVrReE\u2026")
    def text() -> str:
        size = rng.randint(0, 40)
        return "".join(rng.choice(every if rng.random() < 0.3 else common) for _ in range(size))

    texts = [text() for _ in range(20000)]
    texts += [t for t in _texts(random.Random(30), 3000) if t.isascii()]
    texts += ["don't\n/usr/bin", "x.\n/y", "A\r\n\r\n  B", "  \n", "1234567", "I'LL we'Re"]
    texts += ["[\u2026 40 lines omitted \u2026]\nabc\u2026", "x\u2026\n\u2026/", "\u2026's \u2026S"]
    encoder = Encoder(model_family(model))
    for text in texts:
        assert fast(text) == slow(text), repr(text)
        with keeping_gil():
            assert encoder.bpe(text) == len(enc.encode_ordinary(text)), repr(text)


def test_a_pattern_with_a_class_it_cannot_translate_stays_with_regex() -> None:
    from langgraph_ctx.context.tokens.chat_format import ascii_pattern

    assert ascii_pattern(r"\p{Han}+|\s+") is None  # not a class of the encodings
    assert ascii_pattern(r"\p{Lo}+") is None  # no ASCII character: an empty class
    assert ascii_pattern(r"[\S]+") is None
    assert ascii_pattern(r" ?\p{L}+|\s+(?!\S)") == (
        r" ?[A-Za-z]+|[\t\n\x0b\x0c\r ]+(?![^\t\n\x0b\x0c\r ])"
    )
