"""Bounded terminal output: keep the last ``limit`` bytes, whole characters only.

ACP says: when a terminal's output exceeds ``outputByteLimit``, drop from the
*beginning*, cutting at a character boundary (so the result may be a little
under the limit). Memory stays O(limit) however much goes through: a
``bytearray`` whose front deletions are amortized O(1) in CPython (it moves
its start pointer instead of the bytes).

Pure: no I/O, no event loop.
"""

from __future__ import annotations

import codecs


def _is_cont(b: int) -> bool:
    return b & 0xC0 == 0x80


def _seq_len(lead: int) -> int:
    """Length of the UTF-8 sequence a lead byte starts (0: not a lead byte)."""
    if lead < 0x80:
        return 1
    if 0xC2 <= lead <= 0xDF:
        return 2
    if 0xE0 <= lead <= 0xEF:
        return 3
    if 0xF0 <= lead <= 0xF4:
        return 4
    return 0


def incomplete_tail(data: bytes | bytearray | memoryview) -> int:
    """How many bytes at the end of ``data`` are an unfinished UTF-8 character."""
    n = len(data)
    for back in range(1, min(4, n) + 1):
        b = data[n - back]
        if _is_cont(b):
            continue
        need = _seq_len(b)
        return back if need > back else 0
    return 0


class OutputBuffer:
    """The tail of a byte stream, at most ``limit`` bytes, starting on a character.

    ``truncated`` turns true once anything was dropped. ``total`` counts every
    byte appended.
    """

    __slots__ = ("limit", "truncated", "total", "_buf")

    def __init__(self, limit: int) -> None:
        if limit < 0:
            raise ValueError("limit must be >= 0")
        self.limit = limit
        self.truncated = False
        self.total = 0
        self._buf = bytearray()

    def __len__(self) -> int:
        return len(self._buf)

    def append(self, data: bytes | bytearray | memoryview) -> None:
        n = len(data)
        if not n:
            return
        self.total += n
        limit = self.limit
        buf = self._buf
        if n >= limit:
            if n > limit or buf:
                self.truncated = True
            buf.clear()
            if limit:
                buf += memoryview(data)[n - limit :]
                self._align()
            return
        buf += data
        excess = len(buf) - limit
        if excess > 0:
            self.truncated = True
            del buf[:excess]
            self._align()

    def _align(self) -> None:
        # Skip the continuation bytes of a character cut in half: at most 3,
        # so binary output that is not UTF-8 is never eaten wholesale.
        buf = self._buf
        skip = 0
        while skip < 3 and skip < len(buf) and _is_cont(buf[skip]):
            skip += 1
        if skip:
            del buf[:skip]

    def data(self) -> bytes:
        """The kept bytes (may end inside a character still being written)."""
        return bytes(self._buf)

    def text(self, *, final: bool = False) -> str:
        """The kept output as text.

        While the process runs (``final`` False) an unfinished character at
        the end is left out: it is completed by the next append. Invalid bytes
        become U+FFFD.
        """
        buf = self._buf
        end = len(buf) if final else len(buf) - incomplete_tail(buf)
        return bytes(memoryview(buf)[:end]).decode("utf-8", "replace")

    def pending_tail(self) -> bytes:
        """The unfinished character at the end, for seeding a live decoder."""
        k = incomplete_tail(self._buf)
        return bytes(self._buf[len(self._buf) - k :]) if k else b""


class StreamDecoder:
    """UTF-8 decoding of a live stream: a character split across chunks is
    held back until its last byte arrives, never shown as U+FFFD."""

    __slots__ = ("_dec",)

    def __init__(self) -> None:
        self._dec = codecs.getincrementaldecoder("utf-8")("replace")

    def feed(self, data: bytes) -> str:
        return self._dec.decode(data)

    def flush(self) -> str:
        return self._dec.decode(b"", final=True)
