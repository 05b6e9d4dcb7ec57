"""Thread ids to file names and back.

A thread id comes from users, so any string must map to one file directly
inside the root directory and nothing else. Letters, digits, ``-``, ``_`` and
inner dots are kept so names stay readable; every other byte of the UTF-8
encoding becomes ``%XX`` (slashes, NUL, ``..``, a leading dot, ``%`` itself).
Ids whose encoded name would be too long for a file system get a hashed name
(``~<sha256>``); the original id is then read from the file's header line. The
empty id is ``%``.

>>> encode_thread_id("task-001")
'task-001'
>>> encode_thread_id("../../etc/passwd")
'%2E%2E%2F.%2E%2Fetc%2Fpasswd'
>>> decode_thread_id(encode_thread_id("crème/brûlée"))
'crème/brûlée'
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from typing import Any
from uuid import UUID

MAX_NAME_BYTES = 200
"""Encoded names longer than this are hashed (file systems allow 255 bytes)."""

HASHED_PREFIX = "~"
EMPTY_NAME = "%"
"""The name of the empty thread id (``%.jsonl``)."""
_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.")
_ESCAPE = re.compile(r"%([0-9A-F]{2})")


def id_list(name: str, ids: Iterable[str]) -> list[str]:
    """``ids`` as a list (taken once: a generator is read whole), refused if it is one
    string or bytes: iterating it would give its characters, and `prune("ab")` would
    prune threads ``a`` and ``b``.

    >>> id_list("thread_ids", (t for t in ["a", "b"]))
    ['a', 'b']
    >>> id_list("thread_ids", "ab")
    Traceback (most recent call last):
    TypeError: thread_ids must be a list of ids, not one string: pass ['ab']
    """
    if isinstance(ids, (str, bytes)):
        raise TypeError(f"{name} must be a list of ids, not one string: pass [{ids!r}]")
    return list(ids)


def check_thread_id(thread_id: object) -> str:
    """Return the thread id as a string, or raise `ValueError` for an unusable one.

    An int or a `uuid.UUID` is its text, as LangGraph writes it into a run's config (so
    ``delete_thread(uuid)`` deletes the thread ``invoke`` saved under that UUID)."""
    if type(thread_id) is str and thread_id and thread_id.isascii():
        return thread_id  # every call checks its id: the usual one costs two tests
    if isinstance(thread_id, bool) or not isinstance(thread_id, (str, int, UUID)):
        raise ValueError(
            f"thread_id must be a string (or an int, a UUID), got {type(thread_id).__name__}"
        )
    text = str(thread_id)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:  # a lone surrogate: no file name or log line can hold it
        raise ValueError(
            f"thread_id must be valid Unicode text; {text!r} has a lone surrogate at "
            f"position {exc.start}"
        ) from None
    return text


def encode_thread_id(thread_id: str) -> str:
    """A file-name-safe, reversible form of ``thread_id`` (without extension).

    The empty id, which LangGraph's savers take, is ``%`` (no other id is: every other
    ``%`` is followed by two hex digits).

    >>> encode_thread_id("")
    '%'
    """
    if not thread_id:
        return EMPTY_NAME
    data = thread_id.encode("utf-8")
    out = []
    for i, byte in enumerate(data):
        if byte in _SAFE and not (byte == 0x2E and (i == 0 or data[i - 1] == 0x2E)):
            out.append(chr(byte))
        else:
            out.append(f"%{byte:02X}")
    name = "".join(out)
    if len(name) > MAX_NAME_BYTES:
        return HASHED_PREFIX + hashlib.sha256(data).hexdigest()
    return name


def is_hashed(name: str) -> bool:
    return name.startswith(HASHED_PREFIX)


def decode_thread_id(name: str) -> str:
    """Inverse of `encode_thread_id` for non-hashed names.

    Raises `ValueError` for names this module did not produce.
    """
    if is_hashed(name):
        raise ValueError(f"{name!r} is a hashed name; read the thread id from its header")
    if name == EMPTY_NAME:
        return ""
    raw = bytearray()
    i = 0
    while i < len(name):
        ch = name[i]
        if ch == "%":
            match = _ESCAPE.match(name, i)
            if match is None:
                raise ValueError(f"{name!r} is not an encoded thread id")
            raw.append(int(match.group(1), 16))
            i += 3
        elif ord(ch) < 128 and ord(ch) in _SAFE:
            raw.append(ord(ch))
            i += 1
        else:
            raise ValueError(f"{name!r} is not an encoded thread id")
    try:
        thread_id = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{name!r} is not an encoded thread id (not UTF-8)") from None
    if encode_thread_id(thread_id) != name:
        raise ValueError(f"{name!r} is not the canonical encoding of a thread id")
    return thread_id


def hashed_thread_id(header: Mapping[str, Any] | None, name: str) -> str | None:
    """The thread id a long id's log (named by its hash, `is_hashed`) holds in its header:
    ``None`` if the header does not read, or names a thread whose name is not ``name``
    (then the log would be listed as that other thread, and as itself not at all).

    >>> hashed_thread_id({"thread_id": "L" * 300}, encode_thread_id("L" * 300)) == "L" * 300
    True
    >>> hashed_thread_id({"thread_id": "chat"}, encode_thread_id("L" * 300)) is None
    True
    """
    thread_id = header.get("thread_id") if header is not None else None
    if not isinstance(thread_id, str):
        return None
    try:
        return thread_id if encode_thread_id(thread_id) == name else None
    except ValueError:  # no thread id at all (a lone surrogate)
        return None
