"""The ACP schema models, imported in a background thread while an agent starts.

``acp_kernel.protocol.schema`` costs about half a second of CPU to import (the SDK's
``acp`` package and its 280 generated models, built lazily). Paid where it is first
needed, that is the agent's first permission, file or terminal request: the question
in a long turn waited for it (issue 25's "question at step 900"). A client starts the
import here while it waits for the agent's ``initialize`` answer, time it spends
idle, and waits for it to end (:func:`schema_imported`) before it calls itself
started: the import holds the GIL in 5 ms slices, so one still running when a turn
streams took half the loop's time away from it (a fast agent's first turn ran at
0.8 of the floor instead of 1.0). A request that comes before the import is done
waits for it, as it would have.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading

log = logging.getLogger(__name__)
_lock = threading.Lock()
_started = False
_finished = False
_waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []


def schema_in_background() -> None:
    """Start importing the schema models in a daemon thread (once per process)."""
    global _started
    with _lock:
        if _started or "acp_kernel.protocol.schema" in sys.modules:
            return
        _started = True
    threading.Thread(target=_import, name="acp-schema-import", daemon=True).start()


def schema_started() -> bool:
    """Whether the background import was started in this process (or the schema is imported)."""
    return _started or "acp_kernel.protocol.schema" in sys.modules


async def schema_imported(timeout: float) -> None:
    """Return when the background import has ended (imported or failed), at once if none
    was started, or after ``timeout`` seconds (the import goes on; a request that needs the
    models waits for it then)."""
    loop = asyncio.get_running_loop()
    with _lock:
        if not _started or _finished:
            return
        waiter: asyncio.Future[None] = loop.create_future()
        _waiters.append((loop, waiter))
    try:
        await asyncio.wait_for(waiter, timeout)
    except TimeoutError:
        log.debug("the ACP schema import is still running after %s s; not waiting for it", timeout)


def _import() -> None:
    global _finished
    try:
        from . import schema  # noqa: F401  # lazy: start-up time (the point: off the caller's thread)
    except Exception:  # noqa: BLE001 - the first request imports it again and reports what failed
        log.debug("importing the ACP schema in the background failed", exc_info=True)
    finally:
        with _lock:
            _finished = True
            waiters = list(_waiters)
            _waiters.clear()
        for loop, waiter in waiters:
            try:
                loop.call_soon_threadsafe(_settle, waiter)
            except RuntimeError:  # that loop has closed: nobody waits any more
                pass


def _settle(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
