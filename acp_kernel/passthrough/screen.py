"""The passthrough terminal's screen as a person sees it: a pyte emulator fed
with the PTY's output. Pure logic, no I/O.

Full-screen CLIs move the cursor, redraw spinners and repaint unchanged
screens (kimi's prompt_toolkit re-sends its cursor twice a second), so the raw
bytes say little about what is shown. The rendered screen answers the
questions a cell asks: has it changed (idle means *the screen* stayed the
same), does it show the CLI working (a busy pattern) or ready (a ready
pattern), and what did a reply add (the lines new since the prompt, less the
CLI's own chrome).
"""

from __future__ import annotations

import difflib
import re
from collections import deque
from dataclasses import dataclass

import logging

import pyte

from .. import compat

log = logging.getLogger(__name__)

#: Lines that scrolled off the top, kept for a reply's text.
SCROLLBACK = 5000
#: The most output fed to the emulator from one read: a flood is mostly
#: overwritten anyway, and pyte takes about 3 s per megabyte.
FEED_MAX = 32 * 1024

#: Lines made of rules and box edges only (input boxes, separators).
_RULE = re.compile(r"^[\s─━═│┃╭╮╰╯┌┐└┘├┤┬┴┼▄▀▔▁▌▐█░▒▓╴╶╵╷╹╻\-_=|+*~]*$")
#: What may stand before an echoed prompt line (a prompt marker, a box edge; kimi-cli 1.52
#: echoes a prompt as ``✨ PROMPT``).
_MARKER = re.compile(r"^[\s>❯›»$%#:│┃|*•·✨]*")


class _Screen(pyte.Screen):
    """pyte's screen, keeping each line that scrolls off the top (cheaper than
    pyte's HistoryScreen, which wraps every event)."""

    def __init__(self, columns: int, lines: int) -> None:
        super().__init__(columns, lines)
        self.scrolled: deque[str] = deque(maxlen=SCROLLBACK)
        self.scroll_count = 0

    def select_graphic_rendition(self, *attrs: int, private: bool = False) -> None:
        """``CSI ? ... m`` (a private sequence, e.g. xterm's modifyOtherKeys query,
        which Gemini CLI sends) is not a rendition: pyte 0.8 passes it here
        with ``private=True``, which its own method does not take."""
        if not private:
            super().select_graphic_rendition(*attrs)

    def index(self) -> None:
        top, bottom = self.margins or pyte.screens.Margins(0, self.lines - 1)
        if self.cursor.y == bottom and top == 0:
            self.scrolled.append(_row(self.buffer[0], self.columns))
            self.scroll_count += 1
        super().index()


def _row(line: dict, columns: int) -> str:
    return "".join(line[x].data for x in range(columns)).rstrip()


@dataclass(frozen=True)
class Mark:
    """The screen at one moment (before a prompt), to diff a reply against."""

    lines: tuple[str, ...]
    scroll_count: int


class ScreenModel:
    """A terminal emulator for one PTY: feed it output, ask it what it shows."""

    def __init__(self, rows: int = 24, cols: int = 80) -> None:
        self._screen = _Screen(cols, rows)
        self._stream = pyte.Stream(self._screen)
        self._rows: list[str] = [""] * rows
        self.changes = 0  # how many reads changed what the screen shows

    # -- input ---------------------------------------------------------------------

    def feed(self, text: str) -> bool:
        """Apply output; True when what the screen shows changed (not a mere
        repaint of the same text, nor the cursor blinking on and off)."""
        big = len(text) > FEED_MAX
        if big:  # a flood: its tail, from a line start, is what stays on screen
            tail = text[-FEED_MAX:]
            cut = tail.find("\n")
            text = tail[cut + 1:] if cut >= 0 else tail
        try:
            self._stream.feed(text)
        except Exception:  # noqa: BLE001 - a sequence pyte cannot take must not stop the terminal
            log.debug("the screen emulator failed on some output; its parser starts again", exc_info=True)
            compat.reset_pyte_parser(self._stream)
        dirty = self._screen.dirty
        changed = big
        if dirty:
            cols = self._screen.columns
            for y in dirty:
                if 0 <= y < len(self._rows):
                    row = _row(self._screen.buffer[y], cols)
                    if row != self._rows[y]:
                        self._rows[y] = row
                        changed = True
            dirty.clear()
        if changed:
            self.changes += 1
        return changed

    def resize(self, rows: int, cols: int) -> None:
        """As xterm does: fewer rows keep the cursor's row on screen (the top
        lines scroll off), where pyte would delete lines from the top."""
        scr = self._screen
        if (rows, cols) == (scr.lines, scr.columns):
            return
        if rows < scr.lines:
            y = scr.cursor.y
            excess = max(0, y - (rows - 1))
            if excess:
                scr.set_margins()
                scr.cursor.y = scr.lines - 1
                for _ in range(excess):
                    scr.index()
                scr.cursor.y = y - excess
            for key in [k for k in scr.buffer if k >= rows]:
                del scr.buffer[key]
            scr.lines = rows
        scr.resize(rows, cols)
        self._rows = [_row(self._screen.buffer[y], cols) for y in range(rows)]
        self._screen.dirty.clear()
        self.changes += 1

    # -- what it shows ---------------------------------------------------------------

    @property
    def size(self) -> tuple[int, int]:
        return self._screen.lines, self._screen.columns

    def lines(self) -> list[str]:
        return list(self._rows)

    def text(self) -> str:
        """The screen as text: trailing spaces and blank bottom lines dropped."""
        return "\n".join(self._rows).rstrip()

    def drawn(self) -> bool:
        return any(self._rows)

    def search(self, pattern: str) -> str | None:
        """The first match of ``pattern`` (a regex, multi-line) on the screen, or None."""
        if not pattern:
            return None
        found = re.search(pattern, "\n".join(self._rows), re.MULTILINE)
        return found.group(0) if found else None

    def mark(self) -> Mark:
        return Mark(tuple(self._rows), self._screen.scroll_count)

    def scrolled_since(self, mark: Mark) -> list[str]:
        """The lines that scrolled off the top since ``mark`` (as many as are kept)."""
        scrolled = self._screen.scroll_count - mark.scroll_count
        kept = self._screen.scrolled
        n = min(scrolled, len(kept))
        return [kept[i] for i in range(len(kept) - n, len(kept))] if n > 0 else []

    def since(self, mark: Mark) -> list[str]:
        """The lines on screen (or scrolled off it) now that were not there at ``mark``."""
        after = self.scrolled_since(mark) + self._rows
        new: list[str] = []
        matcher = difflib.SequenceMatcher(None, list(mark.lines), after, autojunk=False)
        for tag, _, _, j1, j2 in matcher.get_opcodes():
            if tag in ("insert", "replace"):
                new.extend(after[j1:j2])
        return new


def reply_text(lines: list[str], prompt: str = "", chrome: str = "") -> str:
    """A reply's lines as text: rules, the CLI's chrome (``chrome``, a regex
    per line) and the echo of ``prompt`` left out, runs of blank lines made one."""
    pattern = re.compile(chrome) if chrome else None
    echo = {_MARKER.sub("", ln).strip() for ln in prompt.splitlines() if ln.strip()}
    out: list[str] = []
    for line in lines:
        line = line.rstrip()
        if line and (_RULE.match(line) or (pattern is not None and pattern.search(line))):
            continue
        bare = _MARKER.sub("", line).strip().strip("│┃").strip()
        if bare and bare in echo:
            echo.discard(bare)  # each prompt line once: a reply quoting it stays
            continue
        if not line and (not out or not out[-1]):
            continue
        out.append(line)
    while out and not out[-1]:
        out.pop()
    return "\n".join(out)


def last_lines(text: str, n: int = 3) -> str:
    """The last ``n`` non-blank lines, each stripped (what a one-line message quotes)."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return " / ".join(lines[-n:])
