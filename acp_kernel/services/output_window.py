"""What a page shows of a long output: the first lines, the last lines, and
between them how much was left out.

A notebook re-renders a stream output on every append, so a megabyte of
``%%shell`` output freezes the page. :class:`OutputWindow` decides, as the
text streams in, which part is the *head* (released at once, whole lines
only, within ``head_lines`` and ``head_bytes``), and keeps a bounded *tail*
(the last ``tail_lines`` lines within ``tail_bytes``) to show at the end,
with exact counts of what lies between (:class:`Cut`).

Lines are never cut in half, except a single line longer than a whole
budget (the first line for the head, the last for the tail), and a line the
caller released half-written with :meth:`OutputWindow.flush` (a prompt with
no newline yet). Such a cut never splits a UTF-8 character or a CSI escape
sequence, and :attr:`Cut.mid_line` says it happened.

Memory is O(head_bytes + tail_bytes). Pure: no I/O, no clock.
"""

from __future__ import annotations

from dataclasses import dataclass

from .output_buffer import _is_cont, incomplete_tail

#: Defaults: a thousand lines shown in all, 128 KiB at most.
HEAD_LINES = 500
TAIL_LINES = 500
LINE_BYTES = 128  # per line of budget: bytes = lines * LINE_BYTES (at least MIN_BYTES)
MIN_BYTES = 16 * 1024

_ESC = 0x1B
_NL = 10


def budget_bytes(lines: int) -> int:
    """The byte budget that goes with a line budget."""
    return max(MIN_BYTES, lines * LINE_BYTES)


def _count_lines(data: bytes) -> int:
    """Lines in ``data``: newlines, plus an unfinished last line."""
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def _open_escape(data: bytes | bytearray, pos: int) -> int:
    """Start of a CSI/escape sequence that ``pos`` would split, else -1."""
    k = data.rfind(b"\x1b", max(0, pos - 64), pos)
    if k < 0:
        return -1
    if k + 1 < pos and data[k + 1] == ord("["):
        for i in range(k + 2, pos):
            if 0x40 <= data[i] <= 0x7E:
                return -1  # the sequence ended before pos
        return k
    return k if k + 1 >= pos else -1  # a lone ESC right before pos, or a two-byte ESC x


def _escape_end(data: bytes | bytearray, start: int) -> int:
    """Where the escape sequence starting at ``start`` ends (exclusive)."""
    if start + 1 < len(data) and data[start + 1] == ord("["):
        for i in range(start + 2, min(len(data), start + 64)):
            if 0x40 <= data[i] <= 0x7E:
                return i + 1
        return min(len(data), start + 64)
    return min(len(data), start + 2)


def _cut_before(data: bytes | bytearray, pos: int) -> int:
    """The last safe cut at or before ``pos``: not inside a character or an escape."""
    pos = min(pos, len(data))
    pos -= incomplete_tail(memoryview(data)[:pos])
    k = _open_escape(data, pos)
    return k if k >= 0 else pos


def _cut_after(data: bytes | bytearray, pos: int) -> int:
    """The first safe cut at or after ``pos``."""
    while pos < len(data) and _is_cont(data[pos]):
        pos += 1
    k = _open_escape(data, pos)
    return _escape_end(data, k) if k >= 0 else pos


@dataclass(frozen=True)
class Cut:
    """The end of a windowed output: what follows the head.

    ``omitted_*`` count exactly what lies between the head and ``tail``:
    ``head + omitted + tail`` is the whole output, byte for byte.
    """

    tail: str
    omitted_bytes: int
    omitted_lines: int  # newlines in the part left out (whole lines, unless mid_line)
    total_bytes: int
    total_lines: int
    #: A line was cut in half at the head's end or the tail's start.
    mid_line: bool = False
    #: The head (as released) ended inside a line: the notice starts on a new line.
    head_open: bool = False
    #: The head contains escape sequences (colours): reset before the notice.
    head_escapes: bool = False

    @property
    def cut(self) -> bool:
        return self.omitted_bytes > 0


class OutputWindow:
    """Feed decoded output; get back what to show now, and at the end the :class:`Cut`."""

    def __init__(self, head_lines: int = HEAD_LINES, tail_lines: int = TAIL_LINES,
                 head_bytes: int | None = None, tail_bytes: int | None = None) -> None:
        if min(head_lines, tail_lines) < 0:
            raise ValueError("line budgets must be >= 0")
        self.head_lines = head_lines
        self.tail_lines = tail_lines
        self.head_bytes = budget_bytes(head_lines) if head_bytes is None else head_bytes
        self.tail_bytes = budget_bytes(tail_lines) if tail_bytes is None else tail_bytes
        self.total_bytes = 0
        self.total_newlines = 0
        self.head_used = 0  # bytes released
        self.head_newlines = 0
        self.head_open = False  # released head ends inside a line
        self.head_escapes = False
        self.mid_line = False
        #: The head is over: everything else goes to the tail.
        self.cutting = False
        self._pending = bytearray()  # an unfinished line, not yet released
        self._tail = bytearray()
        self._tail_at_line = True  # _tail[0] starts a line
        self._tail_trimmed = False  # bytes were dropped from the tail's front

    # -- feeding ----------------------------------------------------------------

    def feed(self, text: str) -> str:
        """Take more output; return the part of the head to show now (maybe "")."""
        data = text.encode("utf-8", "replace")
        if not data:
            return ""
        self.total_bytes += len(data)
        self.total_newlines += data.count(b"\n")
        if self.cutting:
            self._to_tail(data)
            return ""
        self._pending += data
        return self._release()

    def flush(self) -> str:
        """Release an unfinished head line that fits (a prompt, a progress bar)."""
        if self.cutting or not self._pending:
            return ""
        if len(self._pending) > self.head_bytes - self.head_used:
            return ""
        n = _cut_before(self._pending, len(self._pending))  # not inside a character or an escape
        out = self._emit(bytes(self._pending[:n]))
        del self._pending[:n]
        return out

    def _emit(self, data: bytes) -> str:
        if not data:
            return ""
        self.head_used += len(data)
        self.head_newlines += data.count(b"\n")
        self.head_open = not data.endswith(b"\n")
        if _ESC in data:
            self.head_escapes = True
        return data.decode("utf-8", "replace")

    def _release(self) -> str:
        buf = self._pending
        room = self.head_bytes - self.head_used
        lines_left = self.head_lines - self.head_newlines
        end, n = 0, 0
        while n < lines_left:
            j = buf.find(b"\n", end, room)  # a newline at j < room: the line fits
            if j < 0:
                break
            end, n = j + 1, n + 1
        out = self._emit(bytes(buf[:end]))
        del buf[:end]
        full = self.head_newlines >= self.head_lines
        too_long = b"\n" in buf or len(buf) > room - end
        if full or too_long:
            if not full and self.head_used == 0 and buf:
                # The first line alone is longer than the head: show its start.
                cut = _cut_before(buf, self.head_bytes)
                out += self._emit(bytes(buf[:cut]))
                del buf[:cut]
                self.mid_line = True
            self._start_tail()
        return out

    def _start_tail(self) -> None:
        self.cutting = True
        if self.head_open:
            self.mid_line = True
        self._tail_at_line = not self.head_open
        rest = bytes(self._pending)
        self._pending.clear()
        if rest:
            self._to_tail(rest)

    def _to_tail(self, data: bytes) -> None:
        tail = self._tail
        tail += data
        keep = 2 * self.tail_bytes + 64
        if len(tail) > 4 * keep:
            drop = len(tail) - keep
            self._tail_at_line = tail[drop - 1] == _NL
            self._tail_trimmed = True
            del tail[:drop]

    # -- reading ------------------------------------------------------------------

    def last_line(self, limit: int = 200) -> str:
        """The last complete line seen (for a live status), at most ``limit`` characters."""
        buf = self._tail if self.cutting else self._pending
        end = buf.rfind(b"\n")
        if end < 0:
            return ""
        start = buf.rfind(b"\n", max(0, end - 4 * limit), end) + 1
        return bytes(buf[start:end]).decode("utf-8", "replace")[:limit]

    def finish(self) -> tuple[str, Cut]:
        """The output ended: (the rest of the head to show, the cut and tail)."""
        out = ""
        if not self.cutting:
            out = self._emit(bytes(self._pending))
            self._pending.clear()
            return out, Cut("", 0, 0, self.total_bytes, self.total_newlines + self._open_last(), head_open=self.head_open,
                            head_escapes=self.head_escapes)
        tail = self._tail
        start = self._tail_start(tail)
        kept = bytes(tail[start:])
        omitted = self.total_bytes - self.head_used - len(kept)
        cut = Cut(
            tail=kept.decode("utf-8", "replace"),
            omitted_bytes=omitted,
            omitted_lines=self.total_newlines - self.head_newlines - kept.count(b"\n"),
            total_bytes=self.total_bytes,
            total_lines=self.total_newlines + self._open_last(),
            mid_line=self.mid_line,
            head_open=self.head_open,
            head_escapes=self.head_escapes,
        )
        return out, cut

    def _open_last(self) -> int:
        """1 if the output ends inside a line (it counts as a line)."""
        last = (self._tail if self.cutting else self._pending) or None
        if last is None:
            return 1 if self.head_open else 0
        return 0 if last.endswith(b"\n") else 1

    def _tail_start(self, buf: bytearray) -> int:
        """Where the shown tail begins: a line start within the budgets."""
        if not buf or not self.tail_lines:
            return len(buf)
        lo = max(0, len(buf) - self.tail_bytes)
        if lo == 0 and (self._tail_at_line or not self._tail_trimmed):
            start = 0  # all of it since the head fits: nothing left out
        else:
            j = buf.find(b"\n", max(lo - 1, 0))
            start = j + 1 if j >= 0 else len(buf)
            if start >= len(buf):
                # The last line alone is longer than the tail budget: its end.
                self.mid_line = True
                return _cut_after(buf, lo)
        # At most tail_lines lines.
        pos = len(buf) - 1 if buf.endswith(b"\n") else len(buf)
        for _ in range(self.tail_lines):
            pos = buf.rfind(b"\n", start, pos)
            if pos < 0:
                return start
        return max(start, pos + 1)
