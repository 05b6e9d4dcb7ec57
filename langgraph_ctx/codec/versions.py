"""Channel versions: LangGraph's string format, and the integers older logs hold.

LangGraph's own savers (`InMemorySaver`, `SqliteSaver`) and the LangGraph
server number a channel's versions ``"<counter, 32 digits>.<random>"``
(``"00000000000000000000000000000005.0.7916507770116351"``): strings that
sort in the order they were made, compared as strings by LangGraph. A thread
must move between those savers and ours both ways, so the saver writes that
format too.

Logs begun before stored the saver's own integers (``5``); their header has no
``"versions"`` field (`langgraph_ctx.codec.lines.has_legacy_versions`). Reading
such a log, an integer becomes the string
``"<counter, 32 digits>.0000000000000000"``: the same counter, so the order
along a branch and equality between ``channel_versions`` and ``versions_seen``
are kept, and `next_version` (or the server's) continues from it. In a newer
log, versions read back exactly as they were put, as in LangGraph's savers (a
caller that puts integers gets integers, and continues with integers).

>>> normalize_version(5)
'00000000000000000000000000000005.0000000000000000'
>>> next_version(normalize_version(5))
'00000000000000000000000000000006'
>>> next_version(f"{6:032}.0.7916507770116351")
'00000000000000000000000000000007'

"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langgraph_ctx.errors import CodecError

__all__ = [
    "check_put_versions",
    "next_version",
    "normalize_version",
    "pack_seen",
    "pack_version",
    "pack_versions",
    "unpack_seen",
    "unpack_version",
    "unpack_versions",
]


def next_version(current: str | int | None) -> str | int:
    """The version after ``current``: LangGraph's zero-padded counter.

    `InMemorySaver` adds ``.<random float>``; LangGraph itself reads only the
    counter (``current.split(".")[0]``) and compares versions as strings, which
    the padding keeps in order, so either form continues the other. The random
    part keeps two branches' versions apart in a blob table keyed by version;
    this saver tells branches apart by their ancestry, and leaves it out: each
    version costs a few bytes in the log (``[6]``, see `pack_version`).

    An integer ``current`` (a checkpoint put with integer versions, read back as
    put) continues as an integer: LangGraph gives every channel a step updates
    the version after the highest one, so a thread never mixes the two.
    """
    if current is None:
        counter = 0
    elif isinstance(current, int):
        return current + 1
    else:
        counter = int(current.split(".", 1)[0])
    return f"{counter + 1:032}"


def normalize_version(version: Any) -> Any:
    """An integer version (from an older log) as the string format; anything else as is."""
    if type(version) is int:
        return f"{version:032}.{0:016}"
    return version


# ------------------------------------------------------------ in the file

_WIDTH = 32
_LIMIT = 10**_WIDTH


def pack_version(version: Any) -> Any:
    """A version as a log line holds it: LangGraph's string as ``[counter, rest]``.

    ``"00000000000000000000000000000005.0.7916507770116351"`` is written
    ``[5, "0.7916507770116351"]`` and ``"00000000000000000000000000000006"``
    ``[6]``: a few bytes, and the step number shows.
    A version is never a list (LangGraph's are strings, integers or floats), so
    the form cannot be mistaken for one put as is.

    >>> pack_version(f"{5:032}.0.25")
    [5, '0.25']
    >>> pack_version(f"{6:032}")
    [6]
    >>> pack_version("custom"), pack_version(7)
    ('custom', 7)
    """
    if (
        type(version) is str
        and len(version) >= _WIDTH
        and version[:_WIDTH].isdigit()
        and version[:_WIDTH].isascii()
    ):
        if len(version) == _WIDTH:
            return [int(version)]
        if version[_WIDTH] == ".":
            return [int(version[:_WIDTH]), version[_WIDTH + 1 :]]
    return version


_COUNTERS: dict[int, str] = {}
"""Counter -> its version string, as `unpack_version` made it last: a log names each
version again on every line that reads or carries it (values, ``seen``), and one shared
string is cheaper to make and to hold than one per head."""

_COUNTERS_MAX = 1024


def _counter_text(counter: int) -> str:
    if len(_COUNTERS) >= _COUNTERS_MAX:
        _COUNTERS.clear()  # the oldest steps are rarely read again
    text = _COUNTERS[counter] = str(counter).zfill(_WIDTH)
    return text


def unpack_version(version: Any) -> Any:
    """Inverse of `pack_version`; raises `CodecError` for a list not of that form.

    >>> unpack_version([5, "0.25"]) == f"{5:032}.0.25"
    True
    """
    if type(version) is list:
        if len(version) == 1 and type(version[0]) is int and 0 <= version[0] < _LIMIT:
            text = _COUNTERS.get(version[0])  # the usual one, as the f-string below
            return _counter_text(version[0]) if text is None else text
        if (
            len(version) in (1, 2)
            and type(version[0]) is int
            and 0 <= version[0] < _LIMIT
            and (len(version) == 1 or type(version[1]) is str)
        ):
            counter = f"{version[0]:0{_WIDTH}}"
            return counter if len(version) == 1 else f"{counter}.{version[1]}"
        raise CodecError(f"invalid channel version {version!r}")
    return version


def check_put_versions(
    versions: Mapping[str, Any], new_versions: Mapping[str, Any], seen: Mapping[str, Any]
) -> None:
    """Raise `TypeError` for what a reader would refuse (`unpack_versions`,
    `unpack_seen`) before a put writes it: an object or a list where a version
    belongs, a node's ``versions_seen`` that is not an object of versions. (A put
    that wrote such a line left every read of the thread failing; `InMemorySaver`
    refuses an unhashable version with `TypeError` too, storing nothing.)

    >>> check_put_versions({"a": 1}, {"a": 1}, {"node": {"a": {"v": 1}}})
    Traceback (most recent call last):
    TypeError: versions_seen['node']['a']: a channel version must be a string or a number, not dict
    """
    for where, mapping in (("channel_versions", versions), ("new_versions", new_versions)):
        _check_put_mapping(where, mapping)
    for node, node_versions in seen.items():
        if not isinstance(node_versions, Mapping):
            raise TypeError(
                f"versions_seen[{node!r}] must map channels to versions, "
                f"not {type(node_versions).__name__}"
            )
        _check_put_mapping(f"versions_seen[{node!r}]", node_versions)


def _check_put_mapping(where: str, versions: Mapping[str, Any]) -> None:
    for channel, version in versions.items():
        if isinstance(version, (dict, list, tuple, set)):
            raise TypeError(
                f"{where}[{channel!r}]: a channel version must be a string or a number, "
                f"not {type(version).__name__}"
            )


def pack_versions(versions: Mapping[str, Any]) -> dict[str, Any]:
    """`pack_version` over a ``channel -> version`` mapping."""
    return {ch: pack_version(v) for ch, v in versions.items()}


def pack_seen(seen: Mapping[str, Any]) -> dict[str, Any]:
    """`pack_versions` over ``versions_seen`` (node -> versions)."""
    return {n: pack_versions(vs) if isinstance(vs, Mapping) else vs for n, vs in seen.items()}


def unpack_versions(versions: Mapping[str, Any], *, legacy: bool = False) -> Mapping[str, Any]:
    """`unpack_version` over a mapping (the same object when nothing changes);
    ``legacy``: integers too become strings (`normalize_version`).

    Raises `CodecError` for an object where a version belongs: the index looks
    versions up by value, and a tampered line's would fail there, after the line
    was taken (review 39).

    >>> unpack_versions({"messages": {"v": 1}})
    Traceback (most recent call last):
    langgraph_ctx.errors.CodecError: channel 'messages': a version must be a string or a number
    """
    kinds = set(map(type, versions.values()))
    if dict in kinds:
        channel = next(ch for ch, v in versions.items() if type(v) is dict)
        raise CodecError(f"channel {channel!r}: a version must be a string or a number")
    if list in kinds or (legacy and int in kinds):
        if legacy:
            return {ch: normalize_version(unpack_version(v)) for ch, v in versions.items()}
        return {ch: unpack_version(v) for ch, v in versions.items()}
    return versions


def unpack_seen(seen: Mapping[str, Any], *, legacy: bool = False) -> Mapping[str, Any]:
    """`unpack_versions` over ``versions_seen`` (node -> versions); raises `CodecError`
    for a node whose versions are not an object."""
    out: dict[str, Any] | None = None
    for node, versions in seen.items():
        if not isinstance(versions, Mapping):
            raise CodecError(f"'seen' of node {node!r} must be an object of versions")
        fixed = unpack_versions(versions, legacy=legacy)
        if fixed is not versions:
            if out is None:
                out = dict(seen)
            out[node] = fixed
    return seen if out is None else out

