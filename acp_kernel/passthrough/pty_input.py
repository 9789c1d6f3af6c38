"""What goes into a passthrough PTY, and how what comes out is paced: pure logic.

A prompt typed from a cell reaches the agent's CLI the way a paste from a
terminal would: wrapped in bracketed-paste markers when the application has
asked for them (it writes ``ESC [ ? 2004 h``), so a multi-line prompt stays
one prompt; then the submit key, as a separate write. :class:`ModeWatch`
follows the application's requests across read boundaries, as a terminal
emulator does, instead of trusting a per-agent flag alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

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


_NAMED = {"\x1b": "Esc", "\r": "Enter", "\n": "Enter", "\t": "Tab", "\x7f": "Backspace"}


def key_name(keys: str) -> str:
    """How a person calls ``keys``: ``Esc``, ``Ctrl-C``, ``q``."""
    names = []
    for ch in keys:
        if ch in _NAMED:
            names.append(_NAMED[ch])
        elif ord(ch) < 0x20:
            names.append("Ctrl-" + chr(ord(ch) + 0x40))
        else:
            names.append(ch)
    return "+".join(names) if names else "nothing"


def key_names(sequence: "tuple[tuple[str, float], ...]") -> str:
    """A cancel sequence for a message: ``Esc``, ``Esc, Esc``, ``Ctrl-C``."""
    return ", ".join(key_name(k) for k, _ in sequence) or "nothing"


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


@dataclass
class _View:
    base: int  # bytes sent before the view's hello (it got those as a replay)
    last: float  # when it last said something
    drawn: int = 0  # live bytes drawn since the hello


class Flow:
    """Flow control between a PTY and the views drawing it, by acknowledgement.

    A program can print far faster than a browser can draw (``cat`` of a big
    file): unthrottled, the frontend queues megabytes and the page freezes. A
    real terminal stops reading until it has drawn what it has; here each view
    acknowledges the bytes it has drawn, and reading pauses while even the
    fastest live view is more than ``high`` bytes behind, resuming at ``low``
    or less. The program then blocks on its write, as under any slow terminal.

    A view that goes quiet while behind (a closed tab says no goodbye) stops
    counting after ``stale`` seconds, so it cannot stall the program. With no
    views (a headless run) nothing ever pauses.
    """

    def __init__(self, high: int = 4 << 20, low: int = 1 << 20, stale: float = 5.0) -> None:
        self.high, self.low, self.stale = high, low, stale
        self.sent = 0
        self._views: dict[str, _View] = {}

    def hello(self, view: str, now: float) -> None:
        self._views[view] = _View(self.sent, now)

    def bye(self, view: str) -> None:
        self._views.pop(view, None)

    def ack(self, view: str, drawn: int, now: float) -> None:
        """``drawn``: the bytes of live output the view has drawn since its hello."""
        v = self._views.get(view)
        if v is not None and drawn >= v.drawn:
            v.drawn, v.last = drawn, now

    def on_send(self, n: int) -> None:
        self.sent += n

    def behind(self, now: float) -> int | None:
        """How far the fastest live view is behind (None: no view counts)."""
        lags = [self.sent - v.base - v.drawn for v in self._views.values()
                if now - v.last < self.stale or self.sent - v.base - v.drawn <= self.low]
        return min(lags) if lags else None

    def should_pause(self, now: float) -> bool:
        lag = self.behind(now)
        return lag is not None and lag > self.high

    def may_resume(self, now: float) -> bool:
        lag = self.behind(now)
        return lag is None or lag <= self.low


class InOrder:
    """Keys each view typed, written in the order it typed them. JupyterLab may
    deliver one widget's messages on the main shell thread or on a subshell's, so
    two of them can reach the kernel swapped (seen: an Enter before the letters
    typed just ahead of it). Each input message carries its view's count; one that
    comes early is held until the ones before it arrive, or until :meth:`give_up`
    (a timer's, or more than ``max_held`` held) writes what is held, in order."""

    def __init__(self, max_held: int = 256) -> None:
        self.max_held = max_held
        self._next: dict[str, int] = {}  # view -> the count expected next
        self._held: dict[str, dict[int, str]] = {}  # view -> count -> data

    def take(self, view: str, seq: int, data: str) -> list[str]:
        """What to write now, in order (maybe nothing, maybe held ones too)."""
        expected = self._next.get(view, 1)
        if seq < expected:  # a repeat, or a count that started over: never lose keys
            return [data]
        held = self._held.setdefault(view, {})
        held[seq] = data
        out: list[str] = []
        while expected in held:
            out.append(held.pop(expected))
            expected += 1
        self._next[view] = expected
        if not held:
            del self._held[view]
        elif len(held) > self.max_held:
            out += self.give_up(view)
        return out

    def holding(self, view: str) -> bool:
        return view in self._held

    def give_up(self, view: str) -> list[str]:
        """The held messages in order, past the gap (a message that never came)."""
        held = self._held.pop(view, {})
        if held:
            self._next[view] = max(held) + 1
        return [held[k] for k in sorted(held)]

    def forget(self, view: str) -> list[str]:
        """A view that went away: what it still held, in order."""
        out = self.give_up(view)
        self._next.pop(view, None)
        return out
