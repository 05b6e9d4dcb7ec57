"""Images and other media: tokens from the pixel size with each provider's rule.

An image is never counted as base64 text: its size is read from the file's header
(PNG, JPEG, GIF, WebP); when it cannot be read, it counts as a 1024x1024 image.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
import struct
from collections.abc import Mapping
from typing import Any, Final

from langgraph_ctx.context.tokens.families import ModelFamily, model_family

__all__ = [
    "MEDIA_BLOCK_TOKENS",
    "MEDIA_BLOCK_TYPES",
    "UNKNOWN_IMAGE_SIZE",
    "image_size",
    "image_tokens",
]

MEDIA_BLOCK_TOKENS: Final[int] = 1000
MEDIA_BLOCK_TYPES: Final[frozenset[str]] = frozenset(
    {"audio", "input_audio", "video", "file", "document", "input_file", "pdf"}
)
#: Size assumed for an image whose pixels cannot be read (a URL, an unknown format).
UNKNOWN_IMAGE_SIZE: Final[tuple[int, int]] = (1024, 1024)
_IMAGE_PREFIX_CHARS = 350_000  # base64 decoded to find the size (~256 KB of JPEG headers)


def image_tokens(
    width: int | None,
    height: int | None,
    *,
    model: str = "gpt-4o",
    detail: str | None = "auto",
) -> int:
    """Tokens of one image for `model`, by the provider's documented rule.

    OpenAI tile models (gpt-4o, gpt-4.1, gpt-5, o1, o3): `detail="low"` costs the base;
    otherwise the image is fit in 2048x2048, its short side scaled to 768 px, and each
    512 px tile costs `image_tile` on top of `image_base` (85/170 for gpt-4o). OpenAI
    patch models (gpt-4.1-mini/nano, gpt-5-mini/nano, o4-mini): 32 px patches, at most
    1536, times the model's multiplier. Claude: `w*h/750` after fitting 1568 px / 1600
    tokens. Gemini: 258 per 768 px tile (258 for images up to 384 px). `"auto"` detail
    is counted as high. Unknown size: `UNKNOWN_IMAGE_SIZE`.

    Example:
        ```python
        image_tokens(1024, 1024, model="gpt-4o")  # -> 765
        image_tokens(1024, 1024, model="gpt-4o", detail="low")  # -> 85
        ```
    """
    return _image_tokens(width, height, model_family(model), detail)


def _image_tokens(width: int | None, height: int | None, family: ModelFamily, detail: Any) -> int:
    if not width or not height or width <= 0 or height <= 0:
        width, height = UNKNOWN_IMAGE_SIZE
    w, h = float(width), float(height)
    if family.image_rule == "patch":
        return _patch_tokens(w, h, family.image_patch_multiplier)
    if family.image_rule == "claude":
        scale = min(1.0, 1568 / max(w, h), math.sqrt(1600 * 750 / (w * h)))
        return math.ceil((w * scale) * (h * scale) / 750)
    if family.image_rule == "gemini":
        if w <= 384 and h <= 384:
            return 258
        return _ceil(w / 768) * _ceil(h / 768) * 258
    if detail == "low":
        return family.image_base
    if max(w, h) > 2048:
        scale = 2048 / max(w, h)
        w, h = w * scale, h * scale
    if min(w, h) > 768:
        scale = 768 / min(w, h)
        w, h = w * scale, h * scale
    return family.image_base + family.image_tile * _ceil(w / 512) * _ceil(h / 512)


def _patch_tokens(w: float, h: float, multiplier: float) -> int:
    patches = _ceil(w / 32) * _ceil(h / 32)
    if patches > 1536:
        r = math.sqrt(32 * 32 * 1536 / (w * h))
        r *= min(math.floor(w * r / 32) / (w * r / 32), math.floor(h * r / 32) / (h * r / 32))
        patches = min(_ceil(w * r / 32) * _ceil(h * r / 32), 1536)
    return math.ceil(patches * multiplier)


def _ceil(x: float) -> int:
    # Scaled sizes like 1056.0000000002 must not gain a tile.
    return math.ceil(x - 1e-9)


def block_image_tokens(block: Mapping[str, Any], family: ModelFamily) -> int:
    inner = block.get("image_url")
    url: Any = inner.get("url") if isinstance(inner, Mapping) else inner
    detail = block.get("detail") or (inner.get("detail") if isinstance(inner, Mapping) else None)
    width = block.get("width") or (inner.get("width") if isinstance(inner, Mapping) else None)
    height = block.get("height") or (inner.get("height") if isinstance(inner, Mapping) else None)
    if not (isinstance(width, int) and isinstance(height, int)):
        width = height = None
        payload = None
        if isinstance(url, str) and url.startswith("data:") and "," in url:
            payload = url.split(",", 1)[1]
        elif isinstance(block.get("base64"), str):
            payload = block["base64"]
        elif isinstance(block.get("data"), str):
            payload = block["data"]
        elif isinstance(block.get("source"), Mapping) and isinstance(
            block["source"].get("data"), str
        ):
            payload = block["source"]["data"]
        if payload:
            size = image_size(_b64_prefix(payload))
            if size:
                width, height = size
    return _image_tokens(width, height, family, detail)


def _b64_prefix(payload: str) -> bytes:
    chunk = re.sub(r"\s+", "", payload[:_IMAGE_PREFIX_CHARS])
    chunk = chunk[: len(chunk) // 4 * 4]
    try:
        if "-" in chunk or "_" in chunk:
            return base64.urlsafe_b64decode(chunk)
        return base64.b64decode(chunk)
    except (binascii.Error, ValueError):
        return b""


def image_size(data: bytes) -> tuple[int, int] | None:
    """Pixel size `(width, height)` from the first bytes of a PNG, GIF, WebP or JPEG."""
    try:
        if data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR":
            w, h = struct.unpack(">II", data[16:24])
            return int(w), int(h)
        if data[:6] in (b"GIF87a", b"GIF89a"):
            w, h = struct.unpack("<HH", data[6:10])
            return int(w), int(h)
        if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
            chunk = data[12:16]
            if chunk == b"VP8 ":
                w, h = struct.unpack("<HH", data[26:30])
                return w & 0x3FFF, h & 0x3FFF
            if chunk == b"VP8L":
                bits = int.from_bytes(data[21:25], "little")
                return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
            if chunk == b"VP8X":
                return 1 + int.from_bytes(data[24:27], "little"), 1 + int.from_bytes(
                    data[27:30], "little"
                )
        if data[:2] == b"\xff\xd8":
            return _jpeg_size(data)
    except struct.error:
        return None
    return None


_JPEG_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    i = 2
    while i + 9 <= len(data):
        if data[i] != 0xFF:
            i += 1
            continue
        marker = data[i + 1]
        if marker == 0xFF:
            i += 1
            continue
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:
            i += 2
            continue
        if marker in _JPEG_SOF:
            h, w = struct.unpack(">HH", data[i + 5 : i + 9])
            return int(w), int(h)
        i += 2 + int.from_bytes(data[i + 2 : i + 4], "big")
    return None


_BASE64ISH = re.compile(r"[A-Za-z0-9+/=_\-\s]{256,}")


def strip_binary(value: Any) -> tuple[Any, bool]:
    """Copy of `value` with base64 payloads and data URLs removed (they are not text)."""
    if isinstance(value, str):
        if value.startswith("data:") or (len(value) >= 256 and _BASE64ISH.fullmatch(value)):
            return "", True
        return value, False
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        found = False
        for key, item in value.items():
            out[str(key)], hit = strip_binary(item)
            found = found or hit
        return out, found
    if isinstance(value, (list, tuple)):
        items = [strip_binary(item) for item in value]
        return [item for item, _ in items], any(hit for _, hit in items)
    return value, False
