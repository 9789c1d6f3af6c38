"""What goes into a passthrough PTY, and what is read back out: pure logic.

A prompt typed from a cell reaches the agent's CLI the way a paste from a
terminal would: wrapped in bracketed-paste markers when the application has
asked for them (it writes ``ESC [ ? 2004 h``), so a multi-line prompt stays
one prompt; then the submit key, as a separate write. :class:`ModeWatch`
follows the application's requests across read boundaries, as a terminal
emulator does, instead of trusting a per-agent flag alone.
"""

from __future__ import annotations

import re

PASTE_START = "\x1b[200~"
PASTE_END = "\x1b[201~"
CTRL_C = "\x03"

_PASTE_ON = "\x1b[?2004h"
_PASTE_OFF = "\x1b[?2004l"
_TAIL = max(len(_PASTE_ON), len(_PASTE_OFF)) - 1

#: Control characters a pasted prompt must not carry: an ESC could end the
#: bracketed paste early and turn the rest of the text into keystrokes.
_UNSAFE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def paste(text: str, bracketed: bool) -> str:
    """The bytes a terminal sends when ``text`` is pasted into it.

    Line ends become CR (as terminals send them); control characters other
    than tab and newline are dropped.
    """
    body = _UNSAFE.sub("", text.replace("\r\n", "\n").replace("\r", "\n")).replace("\n", "\r")
    return f"{PASTE_START}{body}{PASTE_END}" if bracketed else body


class ModeWatch:
    """Whether the application in the PTY has bracketed paste on (DEC mode 2004)."""

    def __init__(self) -> None:
        self.bracketed_paste = False
        self._tail = ""

    def feed(self, text: str) -> None:
        if "\x1b" not in text and "\x1b" not in self._tail:
            return
        window = self._tail + text
        on, off = window.rfind(_PASTE_ON), window.rfind(_PASTE_OFF)
        if on >= 0 or off >= 0:
            self.bracketed_paste = on > off
        self._tail = window[-_TAIL:]


_ESCAPES = re.compile(
    r"\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC ... BEL or ST
    r"|\x1b\[[0-?]*[ -/]*[@-~]"  # CSI
    r"|\x1b[P^_][^\x1b]*(?:\x1b\\)?"  # DCS, PM, APC
    r"|\x1b[@-Z\\-_]"  # other two-byte escapes
    r"|\x1b"
)
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x0c\x0e-\x1f\x7f]")


def plain_text(raw: str) -> str:
    """Terminal output as plain text: escape sequences gone, each line as it
    last read after carriage returns (a spinner's frames collapse to the last)."""
    text = _ESCAPES.sub("", raw).replace("\r\n", "\n")
    lines = []
    for line in text.split("\n"):
        if "\r" in line:
            parts = [p for p in line.split("\r") if p]
            line = parts[-1] if parts else ""
        lines.append(_backspaces(_CONTROLS.sub(lambda m: m.group() if m.group() == "\b" else "", line)))
    return "\n".join(lines)


def _backspaces(line: str) -> str:
    if "\b" not in line:
        return line
    out: list[str] = []
    for ch in line:
        if ch == "\b":
            if out:
                out.pop()
        else:
            out.append(ch)
    return "".join(out)
