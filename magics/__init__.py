"""IPython extension: ``%acp``, ``%%acp`` and ``%%shell`` in an ordinary Python notebook.

Load with ``%load_ext acp_kernel`` (or ``%load_ext magics``)::

    %acp connect demo
    %%acp
    Summarise {df_name} for me.

The cell's value (also ``_acp``) is the :class:`~acp_kernel.turn.Turn`, or
for a passthrough terminal (``%acp passthrough demo``) the
:class:`~acp_kernel.passthrough.Reply`. ``%acp help`` lists the verbs (the
same table as the ACP kernel's ``%help``); in Python code,
``agent = await acp_kernel.connect("demo")`` (:mod:`acp_kernel.api`).

Where the input transformer turned a magic into an ``await`` (the usual
case) it runs on the kernel's loop. Otherwise IPython calls the registered
magic, which runs it with :func:`run_sync`.
"""

from __future__ import annotations

import asyncio
import atexit
import functools
from typing import Any

from .transform import transform_cell

__all__ = ["load_ipython_extension", "unload_ipython_extension"]

#: ``execution_count`` of the cell that loaded the extension (its own magics
#: were transformed before the extension existed).
_loaded_in: int | None = None
#: Magics of that cell, run once its body is done (see :func:`_wrap_execute`).
_deferred: list[Any] = []


def _help() -> str:
    from acp_kernel.commands import MAGICS, help_plain

    return help_plain(MAGICS)


def run_sync(coro: Any) -> Any:
    """Run a magic that no transformer turned into an ``await``.

    - Terminal IPython (no loop running now): on IPython's own asyncio loop.
    - ipykernel, in the cell that loaded the extension: after the cell's
      body, still inside the cell (its outputs and its failure are the cell's).
    - ipykernel, inside a plain ``def`` (or ``class`` body): the kernel's loop
      is busy running this very cell, so nothing can be awaited here; a
      usage error says what works instead.
    """
    from IPython import get_ipython

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        from IPython.core.async_helpers import get_asyncio_loop

        return get_asyncio_loop().run_until_complete(coro)
    ip = get_ipython()
    if ip is not None and ip.execution_count == _loaded_in and getattr(ip, "kernel", None) is not None:
        _deferred.append(coro)
        return None
    coro.close()
    from .runtime import UsageError

    raise UsageError("%acp inside a plain function cannot wait for the agent while the cell runs: "
                     "make it `async def` and await it, or use `agent = await acp_kernel.connect(...)`")


def _acp_line(line: str) -> Any:
    from .runtime import runtime

    return run_sync(runtime().line(line))


def _acp_cell(line: str, cell: str) -> Any:
    from .runtime import runtime

    return run_sync(runtime().cell(line, cell))


def _shell_cell(line: str, cell: str) -> Any:
    from .runtime import runtime

    return run_sync(runtime().shell(line, cell))


def _wrap_execute(ip: Any) -> None:
    """Make the kernel run deferred magics before it replies to the cell
    (once per kernel); a failure there makes the cell fail."""
    kernel = getattr(ip, "kernel", None)
    if kernel is None or getattr(kernel.do_execute, "_acp_deferred", False):
        return
    original = kernel.do_execute

    @functools.wraps(original)
    async def do_execute(*args: Any, **kwargs: Any) -> Any:
        reply = original(*args, **kwargs)
        if asyncio.iscoroutine(reply) or isinstance(reply, asyncio.Future):
            reply = await reply
        while _deferred:
            coro = _deferred.pop(0)
            try:
                await coro
            except Exception as exc:  # noqa: BLE001 - shown as IPython shows a cell's error
                from IPython.core.error import UsageError

                for rest in _deferred:
                    rest.close()
                _deferred.clear()
                if isinstance(exc, UsageError):
                    ip.show_usage_error(exc)
                else:
                    ip.showtraceback()
                reply = {**reply, "status": "error", "ename": type(exc).__name__, "evalue": str(exc), "traceback": []}
        return reply

    do_execute._acp_deferred = True  # type: ignore[attr-defined]
    kernel.do_execute = do_execute


def load_ipython_extension(ip: Any) -> None:
    global _loaded_in
    if transform_cell not in ip.input_transformers_cleanup:
        ip.input_transformers_cleanup.append(transform_cell)
        _loaded_in = ip.execution_count
    _acp_line.__doc__ = _acp_cell.__doc__ = _help()
    ip.register_magic_function(_acp_line, "line", "acp")
    ip.register_magic_function(_acp_cell, "cell", "acp")
    ip.register_magic_function(_shell_cell, "cell", "shell")
    _wrap_execute(ip)
    from .runtime import kill_all_now

    atexit.register(kill_all_now)


def unload_ipython_extension(ip: Any) -> None:
    if transform_cell in ip.input_transformers_cleanup:
        ip.input_transformers_cleanup.remove(transform_cell)
