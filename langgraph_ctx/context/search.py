"""Ranked text search over a handful of documents: Okapi BM25, pure Python, no index.

Used by `chat_context_load(query=...)` to find an archived context by its title, summary
and messages. A thread has tens of archives, not millions, so the documents are scored
directly each time; nothing is stored.

```python
from langgraph_ctx.context.search import rank

docs = [["Paris trip", "Day 1: Louvre; day 2: Orsay museum"], ["CSV parser", "use csv.reader"]]
[(r.index, round(r.score, 2), r.terms) for r in rank("museums in Paris", docs)]
# [(0, 1.24, ('museums', 'paris'))]
rank("zebra", docs)                                   # []: no match
rank("跨轮", [["修复跨轮 context 保持"]])[0].index       # 0
```

Why BM25, and why our own ~60 lines rather than `rank-bm25`:

- BM25 ranks by the words that are rare across the archives (idf) and saturates repeated
  words (k1), so a long archive that mentions "Paris" thirty times does not drown a short
  one titled "Paris trip". It needs no model and no network, and its scores can be
  explained (`Ranked.terms`).
- `rank-bm25`'s `BM25Okapi` (0.2.2, the current release) uses the idf
  `log((N - n + 0.5) / (n + 0.5))`, which is zero or negative for a word found in half
  the documents or more. With one archive a matching query scores below a non-matching
  one (-0.27 vs 0); with two, a word found in one of them scores 0, like no match.
  One to three archives is the common case here. We use Lucene's idf,
  `ln(1 + (N - n + 0.5) / (n + 0.5))`, which is always positive.
- It needs numpy, and has no tokenizer: the tokenizer (words, CJK bigrams, a light
  plural stemmer, stop words) is most of the work anyway.

Documents are lists of fields; a field can be weighted (the title counts twice in
`chat_context_load`), which is BM25F's idea in its simplest form: a weighted field's
words are counted that many times.
"""

from __future__ import annotations

import collections
import functools
import itertools
import math
import operator
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Final, NamedTuple

try:  # the C helper behind Counter.update: counts an iterable into a plain dict
    from collections import _count_elements  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - other Pythons

    def _count_elements(mapping: dict[str, int], iterable: Iterable[str]) -> None:
        get = mapping.get
        for item in iterable:
            mapping[item] = get(item, 0) + 1

__all__ = [
    "STOP_WORDS",
    "Ranked",
    "inverse_frequency",
    "query_terms",
    "rank",
    "rank_bags",
    "term_bags",
    "term_score",
    "tokenize",
    "tokenize_many",
]

K1: Final[float] = 1.2
B: Final[float] = 0.75

#: Words too common to tell archives apart (English function words, chat filler).
_STOP_TEXT = """
a about after again all also am an and any are as at back be been before but by can could
did do does doing for from had has have he her here hers him his how i if in into is it its
just let me more most my no not now of on or our ours out over please she should so some
than that the their them then there these they this those to too under up us very was we
were what when where which while who why will with would you your yours go going get got
tell show talk earlier previous last context conversation
"""
STOP_WORDS: Final[frozenset[str]] = frozenset(_STOP_TEXT.split())

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_CJK = re.compile(
    r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\U00020000-\U0002ffff]+"
)


def _stem(word: str) -> str:
    """Harman's S-stemmer: plurals to singular (`museums` -> `museum`, `cities` -> `city`)."""
    if len(word) <= 3 or not word.isalpha():
        return word
    if word.endswith("ies") and not word.endswith(("eies", "aies")):
        return word[:-3] + "y"
    if word.endswith("es") and not word.endswith(("aes", "ees", "oes")):
        return word[:-1]
    if word.endswith("s") and not word.endswith(("us", "ss")):
        return word[:-1]
    return word


def tokenize(text: str) -> list[str]:
    """Search terms of `text`: lower-cased words, plurals folded, CJK as character bigrams.

    Chinese, Japanese and Korean have no spaces; overlapping character pairs are the
    usual way to index them without a dictionary (a one-character run stays one term).

    Example:
        ```python
        tokenize("The Museums of Paris")   # ['museum', 'pari']: stop words out, plurals folded
        tokenize("修复跨轮 bug")             # ['修复', '复跨', '跨轮', 'bug']
        ```
    """
    if text.isascii():  # the common case, ~4x faster: NFKC and CJK change nothing here
        words = itertools.filterfalse(STOP_WORDS.__contains__, _WORD.findall(text.lower()))
        return list(map(_stem_word, words))
    return [term for term, _ in _terms(text)]


def tokenize_many(texts: Sequence[str]) -> list[list[str]]:
    """`tokenize` of each text (relevance indexes every line of a message this way).

    Example:
        ```python
        tokenize_many(["The Museums", "of Paris"])   # [['museum'], ['pari']]
        tokenize_many(["修复跨轮 bug"])               # [['修复', '复跨', '跨轮', 'bug']]
        ```
    """
    if not all(map(str.isascii, texts)):
        return [tokenize(text) for text in texts]
    words = _ascii_words(texts)
    get = _terms_of_words(itertools.chain.from_iterable(words)).__getitem__
    return [list(filter(None, map(get, line))) for line in words]


def term_bags(texts: Sequence[str]) -> list[dict[str, int]]:
    """Each text's search terms and how often each occurs (`Counter(tokenize(text))`).

    Relevance indexes every line of every message this way, so the common case (ASCII
    text) stays in C as much as it can: one `translate` (every character that is not a
    letter or digit becomes a space: the same words as the word pattern, in ASCII) and
    `split` per text, stop words and plurals folded through a table of the distinct
    words, and the counting done by `collections`' C helper.

    Example:
        ```python
        term_bags(["The Museums of Paris museum", "修复跨轮"])
        # [{'museum': 2, 'pari': 1}, {'修复': 1, '复跨': 1, '跨轮': 1}]
        ```
    """
    if not all(map(str.isascii, texts)):
        return [_bag(tokenize(text)) for text in texts]
    words = _ascii_words(texts)
    get = _terms_of_words(itertools.chain.from_iterable(words)).__getitem__
    # one bag per text, counted and cleared of stop words ("") by C loops over the texts
    bags: list[dict[str, int]] = [{} for _ in words]
    collections.deque(
        map(_count_elements, bags, map(map, itertools.repeat(get), words)), maxlen=0
    )
    collections.deque(map(dict.pop, bags, itertools.repeat(""), itertools.repeat(None)), maxlen=0)
    return bags


def _bag(terms: Iterable[str]) -> dict[str, int]:
    bag: dict[str, int] = {}
    _count_elements(bag, terms)
    return bag


# Every ASCII character that is not a letter or a digit becomes a space (a newline stays,
# to split joined texts again).
_ASCII_WORD_CHARS = str.maketrans(
    {chr(c): (chr(c) if chr(c).isalnum() or c == 10 else " ") for c in range(128)}
)


def _ascii_words(texts: Sequence[str]) -> list[list[str]]:
    """The lower-cased words of each ASCII text (`_WORD.findall`'s, several times faster)."""
    if not texts:
        return []
    if any(map(operator.contains, texts, itertools.repeat("\n"))):
        return [text.lower().translate(_ASCII_WORD_CHARS).split() for text in texts]
    joined = "\n".join(texts).lower().translate(_ASCII_WORD_CHARS)  # one call for all
    return [line.split() for line in joined.split("\n")]


_TERM_OF: dict[str, str] = {}
_TERMS_KEPT = 65_536  # distinct words remembered (a few MB; log lines bring many numbers)


def _terms_of_words(words: Iterable[str]) -> dict[str, str]:
    """A map word -> its search term ("" for a stop word) holding each of `words`.

    Words seen before come from a shared table: the same words recur in every line of
    a log, and in every message of a thread. When the table is full a new one replaces
    it (never emptied in place: another thread may be reading the old one).
    """
    global _TERM_OF
    table = _TERM_OF
    distinct = set(words)
    new = distinct.difference(table)
    if not new:
        return table
    if len(table) + len(new) > _TERMS_KEPT:
        table, new = {}, distinct
    table.update((word, "" if word in STOP_WORDS else _stem(word)) for word in new)
    _TERM_OF = table
    return table


@functools.lru_cache(maxsize=65_536)
def _stem_word(word: str) -> str:
    return _stem(word)


def _terms(text: str) -> Iterator[tuple[str, str]]:
    """(term, the word it came from) for each search term of `text`."""
    for run in _WORD.findall(unicodedata.normalize("NFKC", text).casefold()):
        at = 0
        for cjk in _CJK.finditer(run):
            yield from _words(run[at : cjk.start()])
            chars = cjk.group()
            for pair in [a + b for a, b in itertools.pairwise(chars)] or [chars]:
                yield pair, pair
            at = cjk.end()
        yield from _words(run[at:])


def _words(text: str) -> list[tuple[str, str]]:
    return [(_stem(text), text)] if text and text not in STOP_WORDS else []


class Ranked(NamedTuple):
    """One matching document: its position in the input, its score, the query words it has."""

    index: int  # type: ignore[assignment]  # the field shadows tuple.index, as named
    score: float
    terms: tuple[str, ...]


def rank(
    query: str,
    documents: Sequence[Sequence[str]],
    *,
    weights: Sequence[int] | None = None,
) -> list[Ranked]:
    """Documents matching `query`, best first (BM25); ties keep the input order.

    Args:
        query: free text.
        documents: each a sequence of fields (title, summary, body, ...).
        weights: how many times each field's words count (default 1 each).

    Returns:
        Only documents with a positive score: `[]` when nothing matches (or the query has
        no searchable words).
    """
    bags: list[Counter[str]] = []
    for fields in documents:
        bag: Counter[str] = Counter()
        for i, field in enumerate(fields):
            weight = weights[i] if weights is not None and i < len(weights) else 1
            for term in tokenize(field):
                bag[term] += weight
        bags.append(bag)
    return rank_bags(query, bags)


def inverse_frequency(n_docs: int, df: int) -> float:
    """BM25's idf with Lucene's +1, positive even for a word in every document."""
    return math.log(1 + (n_docs - df + 0.5) / (df + 0.5))


def term_score(idf: float, tf: int, length: int, average: float) -> float:
    """One query term's BM25 contribution to a document of `length` terms."""
    return idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * length / (average or 1.0)))


def query_terms(query: str) -> dict[str, str]:
    """The search terms of `query`, each with the word it came from (first occurrence)."""
    words: dict[str, str] = {}
    for term, word in _terms(query):
        words.setdefault(term, word)
    return words


def rank_bags(query: str | dict[str, str], bags: Sequence[Mapping[str, int]]) -> list[Ranked]:
    """`rank` over documents already counted into term bags (term -> count).

    Callers that score the same documents again and again (compaction scores the whole
    history at every request) keep the bags and only count new documents.

    Example:
        ```python
        bags = [Counter(tokenize("Paris trip")), Counter(tokenize("CSV parser"))]
        rank_bags("trip to Paris", bags)[0].index   # 0
        ```
    """
    words = query_terms(query) if isinstance(query, str) else query
    terms = list(words)
    if not terms or not bags:
        return []
    n_docs = len(bags)
    lengths = [sum(bag.values()) for bag in bags]
    average = (sum(lengths) / n_docs) or 1.0
    idf = {
        t: inverse_frequency(n_docs, df)
        for t in terms
        if (df := sum(1 for bag in bags if t in bag))
    }
    ranked = []
    for i, bag in enumerate(bags):
        found = [t for t in terms if t in bag and t in idf]
        score = sum(term_score(idf[t], bag[t], lengths[i], average) for t in found)
        if score > 0:
            ranked.append(Ranked(i, score, tuple(words[t] for t in found)))
    ranked.sort(key=lambda r: -r.score)  # stable: equal scores keep the input order
    return ranked
