"""What makes a piece of text worth keeping: the explainable signals behind extraction.

Each signal has a name and a weight. `text_signals` says which signals a text carries,
so a score is always a sum of named parts a person can read back
(`{"user": 3.0, "path": 1.5, "recency": 1.7}`), never an opaque number.

The same signals pick the "key lines" that survive when a long text or a tool result is
cut down to a preview: constraint lines, decisions, paths, numbers and errors.

Word signals are found by set lookups on the lower-cased words (and word pairs), not by
case-insensitive regular expressions: previews score every line of large tool outputs,
and this keeps that cheap.
"""

from __future__ import annotations

import bisect
import itertools
import re
from functools import lru_cache


# Words (and word pairs) that state a requirement, an outcome or decision, or an error.
# English and Chinese, as in the reference design.
def _vocabulary(words: str) -> frozenset[str]:
    return frozenset(words.split())


_WORDS: dict[str, frozenset[str]] = {
    "constraint": _vocabulary(
        "must should shall need needs needed require required requirement requirements "
        "never always cannot can't don't only do_not"
    ),
    "decision": _vocabulary(
        "decide decided decides deciding decision decisions agreed chose chosen final finally "
        "conclusion conclusions outcome outcomes result results done complete completed fixed "
        "resolved approved confirmed we'll we_will going_with"
    ),
    "error": _vocabulary(
        "error errors exception traceback failed failure fatal denied timeout refused"
    ),
}
# First words of the listed pairs (`do_not`): words have no "_", so a pair can only be
# listed when its first word is one of these.
_PAIR_STARTS = frozenset(
    word.split("_", 1)[0] for listed in _WORDS.values() for word in listed if "_" in word
)
_CHINESE: dict[str, tuple[str, ...]] = {
    "constraint": ("必须", "需要", "务必", "不要", "不能", "应该", "禁止"),
    "decision": ("决定", "结论", "完成", "确定", "采用", "已解决"),
    "error": ("错误", "失败"),
}
_WORD = re.compile(r"[a-z][a-z']*")
_HAS_CJK = re.compile(r"[\u4e00-\u9fff]")

# Regular expressions for the other signals (and for callers that want the matches).
DECISION = re.compile(
    r"\b(?:decid(?:e|ed|es|ing)|decisions?|agreed|we will|we'll|going with|chose|chosen|"
    r"final(?:ly)?|conclusions?|outcomes?|results?|done|completed?|fixed|resolved|"
    r"approved|confirmed)\b|决定|结论|完成|确定|采用|已解决",
    re.IGNORECASE,
)
# Unix/relative paths with at least one separator, Windows paths, file names.
PATH = re.compile(
    r"(?<![\w/])(?:~|\.{1,2})?(?:/[\w.@+-]*[\w@+-]){2,}"
    r"|\b[A-Za-z]:\\[\w\\.-]+"
    r"|[\w-]+(?:/[\w.-]+)*\.(?:py|js|ts|tsx|jsx|json|ya?ml|toml|md|txt|csv|sql|sh|go|rs|"
    r"java|c|cc|cpp|h|hpp|cfg|ini|log|html|css|xml|ipynb|lock|env)\b"
)
_UNIX_PATH = re.compile(r"(?<![\w/])(?:~|\.{1,2})?(?:/[\w.@+-]*[\w@+-]){2,}")
_WINDOWS_PATH = re.compile(r"\b[A-Za-z]:\\[\w\\.-]+")
# The "." comes first (the lookbehind after it) so that the search skips to each ".".
_FILE_NAME = re.compile(
    r"\.(?<=[\w-]\.)(?:py|js|ts|tsx|jsx|json|ya?ml|toml|md|txt|csv|sql|sh|go|rs|java|c|cc|cpp|"
    r"h|hpp|cfg|ini|log|html|css|xml|ipynb|lock|env)\b"
)
# Numbers that carry information: two or more digits, decimals, or a unit.
NUMBER = re.compile(r"\b\d+(?:[.,:]\d+)+\b|\b\d{2,}\b|\b\d+\s?(?:%|ms|s|kb|mb|gb|tb|k|usd|eur)\b")
# `NUMBER` with the digit first, so a search skips to digits (whether it matches: the same;
# "\b" before a digit is "no word character before it").
_NUMBER_START = re.compile(
    r"\d(?<!\w\d)(?:\d*(?:[.,:]\d+)+\b|\d+\b|\d*\s?(?:%|ms|s|kb|mb|gb|tb|k|usd|eur)\b)"
)

# name -> weight, in the order signals are reported. The weights are the defaults of
# KeyMessageExtraction.
SIGNALS: dict[str, float] = {
    "decision": 2.0,
    "constraint": 1.5,
    "path": 1.5,
    "code": 1.0,
    "number": 1.0,
    "error": 1.0,
}


def _has_path(text: str) -> bool:
    return bool(
        ("/" in text and _UNIX_PATH.search(text))
        or (":\\" in text and _WINDOWS_PATH.search(text))
        or ("." in text and _FILE_NAME.search(text))
    )


def text_signals(text: str) -> list[str]:
    """The names of the signals present in `text`, in `SIGNALS` order.

    Example:
        ```python
        text_signals("We must keep /etc/app.yaml at 300 ms")
        # ['constraint', 'path', 'number']
        ```
    """
    lower = text.lower()
    words = _WORD.findall(lower)
    vocabulary = set(words)
    if not vocabulary.isdisjoint(_PAIR_STARTS):  # only listed pairs can matter
        vocabulary.update(f"{a}_{b}" for a, b in itertools.pairwise(words) if a in _PAIR_STARTS)
    cjk = not text.isascii() and bool(_HAS_CJK.search(text))
    found = {
        name
        for name, listed in _WORDS.items()
        if not vocabulary.isdisjoint(listed) or (cjk and any(w in text for w in _CHINESE[name]))
    }
    if _has_path(text):
        found.add("path")
    if "```" in text:
        found.add("code")
    if _NUMBER_START.search(text):
        found.add("number")
    return [name for name in SIGNALS if name in found]


def line_weight(line: str) -> float:
    """How much a single line says: the summed weights of the signals it carries."""
    return sum(SIGNALS[name] for name in text_signals(line))


@lru_cache(maxsize=64)
def line_weights(text: str) -> tuple[float, ...]:
    """`line_weight` of each line of `text` (split on newlines), cached by text.

    A preview is built several times while it is sized to its budget; the cache makes
    the lines of a large tool result scored once.
    """
    lines = text.split("\n")
    if not text.isascii():
        return tuple(_line_weight(line) if line.strip() else 0.0 for line in lines)
    # ASCII: the words of every line at once (`_WORD`'s words: letters and apostrophes)
    words_of = text.lower().translate(_LETTERS).split("\n")
    # A signal the whole text lacks is not looked for line by line; paths are found in
    # the whole text at once (none of their patterns spans a newline, and a line start
    # after one reads as the start of a line: the same matches as line by line).
    paths = _path_lines(text, lines)
    code = "```" in text
    numbers = _NUMBER_START.search(text) is not None
    weights: list[float] = []
    add = weights.append
    for line, words in zip(lines, words_of, strict=True):
        if not line.strip():
            add(0.0)
            continue
        listed_words = words.split()
        if "'" in words:  # `_WORD` starts a word at a letter: "'must" is "must"
            listed_words = [w for w in (w.lstrip("'") for w in listed_words) if w]
        weight = 0.0
        hits = _LISTED_OR_PAIR_START.intersection(listed_words)
        if hits:
            if hits.isdisjoint(_PAIR_STARTS):  # no pair: each listed word's kinds
                mask = 0
                for word in hits:
                    mask |= _KINDS[word]
                weight = _KINDS_WEIGHT[mask]
            else:
                weight = _words_weight(listed_words)
        if paths and len(weights) in paths:
            weight += _PATH_WEIGHT
        if code and "```" in line:
            weight += _CODE_WEIGHT
        if numbers and _NUMBER_START.search(line):
            weight += _NUMBER_WEIGHT
        add(weight)
    return tuple(weights)


def _path_lines(text: str, lines: list[str]) -> set[int]:
    """Numbers of the lines of `text` that hold a path (`_has_path` of each line)."""
    patterns = [
        pattern
        for pattern, mark in ((_UNIX_PATH, "/"), (_WINDOWS_PATH, ":\\"), (_FILE_NAME, "."))
        if mark in text
    ]
    if not patterns:
        return set()
    starts = list(itertools.accumulate((len(line) + 1 for line in lines[:-1]), initial=0))
    found: set[int] = set()
    for pattern in patterns:
        found.update(bisect.bisect_right(starts, m.start()) - 1 for m in pattern.finditer(text))
    return found


# ASCII letters and the apostrophe stay, a newline stays (to split lines), the rest is space.
_LETTERS = str.maketrans(
    {chr(c): (chr(c) if chr(c).isalpha() or chr(c) in "'\n" else " ") for c in range(128)}
)


def _ascii_line_weight(line: str, words: str) -> float:
    """`_line_weight` of an ASCII line, given its lower-cased letters (`_LETTERS`)."""
    listed_words = words.split()
    if "'" in words:  # `_WORD` starts a word at a letter: "'must" is "must"
        listed_words = [w for w in (w.lstrip("'") for w in listed_words) if w]
    return _weight(line, listed_words)


def _line_weight(line: str) -> float:
    """`line_weight` without naming the signals (the inner loop of `line_weights`)."""
    if not line.isascii():
        return line_weight(line)
    return _weight(line, _WORD.findall(line.lower()))


def _words_weight(words: list[str]) -> float:
    """The weight of the listed words (and word pairs) among lower-cased `words`."""
    weight = 0.0
    vocabulary = set(words)
    if not vocabulary.isdisjoint(_PAIR_STARTS):
        vocabulary.update(f"{a}_{b}" for a, b in itertools.pairwise(words) if a in _PAIR_STARTS)
    for listed, value in _WORD_WEIGHTS:
        if not vocabulary.isdisjoint(listed):
            weight += value
    return weight


def _weight(line: str, words: list[str]) -> float:
    """The weight of an ASCII ``line`` whose lower-cased words are ``words``."""
    weight = 0.0
    # Most lines hold no listed word and no pair start: one lookup per word says so
    # (a pair is listed only with a listed first word, so it needs one too).
    if not _LISTED_OR_PAIR_START.isdisjoint(words):
        weight = _words_weight(words)
    if _has_path(line):
        weight += _PATH_WEIGHT
    if "```" in line:
        weight += _CODE_WEIGHT
    if _NUMBER_START.search(line):
        weight += _NUMBER_WEIGHT
    return weight


def key_lines(lines: list[str], limit: int, weights: tuple[float, ...] | None = None) -> list[int]:
    """Indices of up to `limit` lines that carry the most signal, in their original order.

    Ties go to the earlier line; lines without any signal are never chosen. `weights`
    are the lines' weights when the caller has them already.
    """
    if limit <= 0 or not lines:
        return []
    if weights is None:
        weights = line_weights("\n".join(lines))
    best = sorted(((w, -i) for i, w in enumerate(weights) if w > 0), reverse=True)[:limit]
    return sorted(-neg_index for _, neg_index in best)


# Weights are multiples of 0.5: their sum is the same in any order.
_WORD_WEIGHTS = tuple((listed, SIGNALS[name]) for name, listed in _WORDS.items())
_PATH_WEIGHT, _CODE_WEIGHT, _NUMBER_WEIGHT = SIGNALS["path"], SIGNALS["code"], SIGNALS["number"]
_LISTED_OR_PAIR_START = frozenset().union(*_WORDS.values(), _PAIR_STARTS)
# Each listed word's kinds as bits (in `_WORD_WEIGHTS` order), and the weight of each
# set of kinds: a line without a pair start weighs the kinds its listed words have.
_KINDS: dict[str, int] = {
    word: sum(1 << k for k, (listed, _) in enumerate(_WORD_WEIGHTS) if word in listed)
    for word in _LISTED_OR_PAIR_START
}
_KINDS_WEIGHT = tuple(
    sum(value for k, (_, value) in enumerate(_WORD_WEIGHTS) if mask >> k & 1)
    for mask in range(1 << len(_WORD_WEIGHTS))
)
