"""Run a flush at most ``rate_hz`` times a second, however often it is poked.

Why: a browser needs 43 s to render 2,000 growing updates; per-chunk output
is the O(n^2) trap. The first poke after a quiet interval flushes at once
(low latency for the first words); pokes within the interval schedule one
flush at its end with ``loop.call_later``. With no running loop (a
synchronous caller) nothing is scheduled: the next poke after the interval,
or :meth:`flush_now`, does the work. Callbacks run on the loop thread only.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class Coalescer:
    def __init__(
        self,
        flush: Callable[[], None],
        rate_hz: float = 10.0,
        *,
        clock: Callable[[], float] = time.monotonic,
        get_loop: Callable[[], Any] = _running_loop,
    ) -> None:
        self._flush = flush
        self.interval = 1.0 / rate_hz if rate_hz > 0 else 0.0
        self._clock = clock
        self._get_loop = get_loop
        self._last = float("-inf")
        self._handle: Any = None
        self._dirty = False
        self._closed = False
        self._held = 0
        self.flushes = 0

    def poke(self) -> None:
        """Something changed: flush now if allowed, else once the interval ends."""
        if self._closed:
            return
        self._dirty = True
        if self._held:
            return  # one poke at the release
        wait = self._last + self.interval - self._clock()
        if self._handle is not None:
            if wait > -self.interval:
                return
            # The scheduled flush is a whole interval late: the loop's own
            # thread is busy with synchronous work (the notebook server's
            # ``execute`` runs user code there), so flush from this poke.
            self._handle.cancel()
            self._handle = None
        if wait <= 0:
            self._run()
            return
        loop = self._get_loop()
        if loop is not None:
            self._handle = loop.call_later(wait, self._fire)

    def hold(self) -> None:
        """Until :meth:`release`, a poke only marks the change: the events of one read (a
        busy turn's tool calls come a few hundred at once) make one poke, not one each."""
        self._held += 1

    def release(self) -> None:
        self._held -= 1
        if not self._held and self._dirty:
            self.poke()

    def _fire(self) -> None:
        self._handle = None
        if not self._closed and self._dirty:
            self._run()

    def _run(self) -> None:
        self._dirty = False
        self._last = self._clock()
        self.flushes += 1
        self._flush()

    def flush_now(self) -> None:
        """Flush pending changes at once (before other output, at the end)."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        if self._dirty and not self._closed:
            self._run()

    def close(self, *, flush: bool = True) -> None:
        """No more flushes; the pending one runs first unless ``flush`` is False (the
        caller replaces what it would have updated)."""
        if flush:
            self.flush_now()
        elif self._handle is not None:
            self._handle.cancel()
            self._handle = None
        self._closed = True
