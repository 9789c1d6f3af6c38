"""Terminal output for the turn widget: colours kept, every other sequence gone.

:func:`acp_kernel.termsafe.clean` with ``colour=True`` is the converter: it
keeps plain SGR colours (bold, italic, underline, foreground) and removes
everything else whole (OSC 8 links, titles, clipboard, cursor moves), so the
widget's script only ever meets ``ESC [ digits ; m`` and paints spans with
textContent. Live output arrives in pieces that may cut a sequence in two:
:class:`AnsiStream` holds back an unfinished sequence at the end of a piece
until the rest arrives (bounded), so half a sequence is never shown as text.
Markdown and plain text get no colours (``termsafe.clean``): stripped.
"""

from __future__ import annotations

import re

from .. import termsafe

#: An escape sequence left open at the end of a piece: CSI without its final
#: byte, or an OSC/DCS/APC/PM/SOS string without its terminator.
_OPEN_TAIL = re.compile("(?:\x1b(?:\\[[\x30-\x3f]*[\x20-\x2f]*|[\\]P^_X][^\x07\x1b]*\x1b?)?|\x9b[\x30-\x3f]*[\x20-\x2f]*)\\Z")
#: The longest unfinished tail held back; longer ones are let through (and cleaned).
HOLD_LIMIT = 4096


def colour(text: str) -> str:
    """Text with only plain colour sequences left (for the widget)."""
    return termsafe.clean(text, colour=True)


class AnsiStream:
    """Clean a stream piece by piece, never splitting an escape sequence."""

    __slots__ = ("_held",)

    def __init__(self) -> None:
        self._held = ""

    def feed(self, piece: str) -> str:
        data = self._held + piece
        self._held = ""
        m = _OPEN_TAIL.search(data[-HOLD_LIMIT:]) if "\x1b" in data[-HOLD_LIMIT:] or "\x9b" in data[-HOLD_LIMIT:] else None
        if m is not None and m.group(0):
            start = len(data) - len(data[-HOLD_LIMIT:]) + m.start()
            self._held = data[start:]
            data = data[:start]
        return colour(data) if data else ""

    def flush(self) -> str:
        data, self._held = self._held, ""
        return colour(data) if data else ""
