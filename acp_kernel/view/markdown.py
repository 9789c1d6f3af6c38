"""Split streamed markdown into completed blocks and an open tail.

Why: re-sending a growing message on every chunk is O(n^2) traffic (5,000
chunks measured 483 MB). A block is *complete* once a blank line follows it
outside a fenced code block; completed blocks go out once, only the open
tail is re-sent (at a bounded rate). Every piece this module hands out is
self-contained markdown: a fence cut open is closed at the end of the piece
and reopened (same opener line) at the start of the next, so each output
renders on its own.

The tail is also cut at a line boundary once it grows past ``max_tail``
characters (a long paragraph or code block with no blank line), and a line
longer than ``max_tail`` is broken at its last space within ``max_tail``
characters (anywhere if it has none), so a tail update never costs more than a
few ``max_tail``. Pure and lazy: ``feed`` only keeps the chunk (a streamed
turn feeds 100,000 of them); the text is split when a block, the tail or a cut
is asked for (a view's refresh, ten times a second), in C-level ``find``
steps, and where a chunk ended never changes the result.
"""

from __future__ import annotations

import re

#: Fed characters kept unsplit at most (a reader normally comes ten times a second).
_SETTLE_CHARS = 1 << 16
_FENCE_OPEN = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")


def fence_opener(line: str) -> str | None:
    """The fence marker (e.g. "```") a line opens, or None."""
    m = _FENCE_OPEN.match(line)
    if m is None:
        return None
    marker, info = m.group(1), m.group(2)
    if marker[0] == "`" and "`" in info:
        return None  # CommonMark: a backtick fence's info string has no backticks
    return marker


def closes_fence(line: str, marker: str) -> bool:
    """Whether ``line`` closes a fence opened with ``marker``."""
    stripped = line.rstrip()
    body = stripped.lstrip(" ")
    if len(stripped) - len(body) > 3:
        return False
    char = marker[0]
    return len(body) >= len(marker) and body == char * len(body)


class BlockSplitter:
    """Incremental splitter: ``feed`` text, ``take_done`` completed blocks,
    ``tail`` the open part, ``cut`` everything (before another output)."""

    __slots__ = (
        "_pending",
        "_pending_chars",
        "_block",
        "_block_chars",
        "_done",
        "_fence",
        "_has_content",
        "_opener",
        "_partial",
        "_partial_chars",
        "max_tail",
    )

    def __init__(self, max_tail: int = 4000) -> None:
        self.max_tail = max_tail
        self._pending: list[str] = []  # fed, not yet split
        self._pending_chars = 0
        self._done: list[str] = []  # completed, self-contained pieces not yet taken
        self._block: list[str] = []  # complete lines of the open block
        self._block_chars = 0
        self._has_content = False  # the open block has more than a reopened fence line
        self._partial: list[str] = []  # the current line, not yet ended by "\n"
        self._partial_chars = 0
        self._fence: str | None = None  # marker of the fence we are in
        self._opener = ""  # the line that opened it (reopened after a cut)

    @property
    def in_fence(self) -> bool:
        self._settle()
        return self._fence is not None

    def feed(self, text: str) -> None:
        self._pending.append(text)
        self._pending_chars += len(text)
        if self._pending_chars > _SETTLE_CHARS:  # memory stays bounded if nobody reads for a while
            self._settle()

    def _settle(self) -> None:
        """Split what was fed since the last read."""
        if not self._pending:
            return
        text = "".join(self._pending) if len(self._pending) > 1 else self._pending[0]
        self._pending.clear()
        self._pending_chars = 0
        start = 0
        while True:
            nl = text.find("\n", start)
            if nl < 0:
                if start < len(text):
                    self._partial.append(text[start:])
                    self._partial_chars += len(text) - start
                    if self._partial_chars > self.max_tail:
                        rest = self._cut_long("".join(self._partial))
                        self._partial = [rest] if rest else []
                        self._partial_chars = len(rest)
                return
            if self._partial:
                self._partial.append(text[start:nl])
                line = "".join(self._partial)
                self._partial.clear()
                self._partial_chars = 0
            else:
                line = text[start:nl]
            self._line(self._cut_long(line) if len(line) > self.max_tail else line)
            start = nl + 1

    def _cut_long(self, line: str) -> str:
        """A line with no newline in sight (minified code, base64): give it to
        the block in pieces of at most ``max_tail`` characters, each ended at its
        last space (else at the limit); what is left, shorter, is returned."""
        start, limit = 0, self.max_tail
        while len(line) - start > limit:
            cut = line.rfind(" ", start + 1, start + limit + 1)
            end = cut + 1 if cut > start else start + limit
            self._line(line[start:end].rstrip(" "))
            start = end
        return line[start:]

    def _line(self, line: str) -> None:
        if self._fence is not None:
            if closes_fence(line, self._fence):
                self._fence = None
            self._add(line)
        else:
            marker = fence_opener(line)
            if marker is not None:
                self._fence = marker
                self._opener = line
                self._add(line)
            elif not line.strip():
                if self._has_content:
                    self._finish_block()
                return
            else:
                self._add(line)
        if self._block_chars > self.max_tail:
            self._finish_block()

    def _add(self, line: str) -> None:
        self._block.append(line)
        self._block_chars += len(line) + 1
        self._has_content = True

    def _finish_block(self) -> None:
        """Move the open block to done, closing (and later reopening) a fence."""
        lines = self._block
        if self._fence is not None:
            lines.append(self._fence)
        self._done.append("\n".join(lines))
        self._reset_block()

    def _reset_block(self) -> None:
        if self._fence is not None:
            self._block = [self._opener]
            self._block_chars = len(self._opener) + 1
        else:
            self._block = []
            self._block_chars = 0
        self._has_content = False

    # -- reading ------------------------------------------------------------

    def take_blocks(self) -> list[str]:
        """Blocks completed since the last take, each self-contained."""
        self._settle()
        blocks, self._done = self._done, []
        return blocks

    def take_done(self) -> str:
        """Blocks completed since the last take, as one markdown piece ("" if none)."""
        return "\n\n".join(self.take_blocks())

    def tail(self) -> str:
        """The open block (and unfinished line), fence closed if open."""
        self._settle()
        partial = "".join(self._partial)
        if not self._has_content and not partial:
            return ""
        lines = list(self._block)
        if partial:
            lines.append(partial)
        if self._fence is not None:
            lines.append(self._fence)
        return "\n".join(lines)

    def cut(self) -> str:
        """Everything pending as one piece; the stream then continues afresh
        (inside the same fence, reopened, if one is open)."""
        tail = self.tail()
        done = self.take_done()
        self._partial.clear()
        self._partial_chars = 0
        self._reset_block()
        return "\n\n".join(p for p in (done, tail) if p)


def split_blocks(text: str, max_tail: int = 4000) -> list[str]:
    """The completed blocks of a whole text, then its open tail (if any)."""
    s = BlockSplitter(max_tail)
    s.feed(text)
    pieces = s.take_blocks()
    tail = s.tail()
    if tail:
        pieces.append(tail)
    return pieces
