"""Where the magics' connections live, and how a call gets there.

Usually on the kernel's event loop: a rewritten ``%acp`` line is awaited in
the cell. But IPython calls the registered magic itself where no rewrite
happened (the cell that loaded the extension, a plain ``def``), and then the
kernel's loop is busy running that very cell: nothing can be awaited on it.
Such a magic runs on a loop of the runtime's own, in a thread, and every
later call is bridged there. Interrupts (SIGINT, main thread only) reach
what runs through :attr:`LoopHome._stop`.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

try:
    # IPython shows exactly this class as one line (``UsageError: ...``), no
    # traceback; a subclass would get a traceback. So every failure of a
    # magic, a usage error or an agent that could not start, raises it.
    from IPython.core.error import UsageError
except ImportError:  # pragma: no cover - IPython is a dependency
    class UsageError(Exception):  # type: ignore[no-redef]
        pass


class LoopHome:
    """The loop connections live on, and the bridge to it (a mixin of the runtime)."""

    def __init__(self) -> None:
        #: The kernel's loop (first use), or a loop of our own (see :meth:`background`).
        self.loop: asyncio.AbstractEventLoop | None = None
        self._stop: Callable[[], Any] | None = None  # what an interrupt does now

    def busy(self) -> bool:
        """Is anything open on the current home loop? (The runtime says.)"""
        return False

    # -- where connections live ---------------------------------------------------

    def background(self) -> asyncio.AbstractEventLoop:
        """For a magic IPython calls while the kernel's loop is busy running
        the cell (the cell that loaded the extension, a plain ``def``): a loop
        of our own in a thread, which connections then live on. Only while
        nothing is open on the kernel's loop."""
        if self.loop is None or (self.loop.is_running() and self.loop is asyncio.get_running_loop()
                                 and not self.busy()):
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="acp-magics", daemon=True).start()
            self.loop = loop
        if self.loop is asyncio.get_running_loop():
            raise UsageError("%acp inside a plain function cannot wait for the agent while the cell runs: "
                             "make it `async def` and await it, or use `agent = await acp_kernel.connect(...)`")
        return self.loop

    def run_blocking(self, coro: Any) -> Any:
        """Run ``coro`` on :meth:`background`'s loop and wait here (the calling thread blocks)."""
        try:
            loop = self.background()
        except BaseException:
            coro.close()
            raise
        future = asyncio.run_coroutine_threadsafe(coro, loop)
        with self._sigint(lambda: loop.call_soon_threadsafe(self._interrupt_now), loop=None):
            return future.result()

    def _interrupt_now(self) -> None:
        if self._stop is not None:
            self._stop()

    async def _bridge(self, coro: Any) -> Any:
        """Await ``coro`` on the connections' loop, from whichever loop calls."""
        here = asyncio.get_running_loop()
        if self.loop is None:
            self.loop = here
        home = self.loop
        if home is here:
            return await coro
        future = asyncio.run_coroutine_threadsafe(coro, home)
        with self._sigint(lambda: home.call_soon_threadsafe(self._interrupt_now)):
            try:
                return await asyncio.wrap_future(future)
            except asyncio.CancelledError:
                future.cancel()
                raise

    @contextmanager
    def _sigint(self, on_interrupt: Callable[[], Any], loop: Any = "running") -> Iterator[None]:
        """While a verb or turn runs, SIGINT calls ``on_interrupt`` on the loop
        (stock IPython would delay the interrupt until the cell yields, or
        kill the await outright). ``loop=None``: call it in the signal handler."""
        if loop == "running":
            loop = asyncio.get_running_loop()
        try:
            previous = signal.signal(signal.SIGINT, (lambda s, f: on_interrupt()) if loop is None
                                     else (lambda s, f: loop.call_soon_threadsafe(on_interrupt)))
        except ValueError:  # not the main thread: no signal handling here
            yield
            return
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)

    async def _interruptible(self, coro: Any, conn: Any = None) -> Any:
        """Run ``coro`` as its own task, so an interrupt can stop it wherever it waits."""
        task = asyncio.ensure_future(coro)
        stop = (lambda: conn.interrupt(task)) if conn is not None else task.cancel
        self._stop = stop  # for an interrupt that arrives through a bridge (another thread)
        with self._sigint(stop):
            try:
                return await task
            except asyncio.CancelledError:
                if task.cancelled() and not asyncio.current_task().cancelling():  # type: ignore[union-attr]
                    raise KeyboardInterrupt("interrupted") from None
                raise
            finally:
                self._stop = None
