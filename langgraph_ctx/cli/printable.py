"""What the command line prints from a thread, made safe for a terminal.

A thread holds text others wrote: a model's reply, a tool's result (which a prompt
injection may steer), a thread id. Printed as it is, an escape sequence in it drives the
terminal: OSC 52 writes the clipboard, OSC 8 makes a link whose target is not its text,
a CSI moves the cursor over the lines printed before. `printable` writes control
characters out instead (``\\x1b``); `json_printable` does it in JSON's own form.
"""

from __future__ import annotations

import re

__all__ = ["json_printable", "printable"]

_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")
"""C0 but newline and tab, DEL and C1 (0x9b is a one-character CSI to many terminals),
and lone surrogates (text decoded with ``surrogateescape``), which no output encodes."""


def _escaped(m: re.Match[str]) -> str:
    code = ord(m.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(text: str) -> str:
    r"""``text`` with its control characters (not newlines and tabs) written out.

    >>> printable("ok\x1b]52;c;aGk=\x07 \x9b2J\tdone \udcff")
    'ok\\x1b]52;c;aGk=\\x07 \\x9b2J\tdone \\udcff'
    """
    return _CONTROL.sub(_escaped, text)


def json_printable(text: str) -> str:
    r"""JSON text with the characters JSON leaves raw (DEL, C1, lone surrogates:
    ``ensure_ascii`` off) as ``\u`` escapes: the same JSON, safe to print and to encode.

    >>> json_printable('{"t": "don\x92t"}')
    '{"t": "don\\u0092t"}'
    """
    return _CONTROL.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
