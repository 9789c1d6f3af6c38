"""IPython extension: ``%acp``, ``%%acp`` and ``%%shell`` in an ordinary Python notebook.

Load with ``%load_ext acp_kernel``::

    %acp connect demo
    %%acp
    Summarise {df_name} for me.

The cell's value (also ``_acp``) is the :class:`~acp_kernel.client.turn.Turn`, or
for a passthrough terminal (``%acp passthrough demo``) the
:class:`~acp_kernel.passthrough.manager.Reply`. ``%acp help`` lists the verbs (the
same table as the ACP kernel's ``%help``); in Python code,
``agent = await acp_kernel.connect("demo")`` (:mod:`acp_kernel.frontends.api`).

Where the input transformer turned a magic into an ``await`` (the usual
case) it is awaited in the cell. Otherwise (the cell that loaded the
extension, a plain ``def``) IPython calls the registered magic, which runs it
with :func:`run_sync`.
"""

from __future__ import annotations

import asyncio
import atexit
from typing import Any

from .transform import transform_cell
from acp_kernel.client.commands import MAGICS, help_plain

__all__ = ["load_ipython_extension", "unload_ipython_extension"]


def _help() -> str:
    return help_plain(MAGICS)


def run_sync(coro: Any) -> Any:
    """Run a magic that no transformer turned into an ``await``: in the cell
    that loaded the extension, or inside a plain ``def``.

    - Terminal IPython (no loop running now): on IPython's own asyncio loop.
    - ipykernel: the kernel's loop is busy running this very cell, so the
      connections live on a loop of the runtime's own (in a thread) and this
      waits for it (see :meth:`acp_kernel.magics.runtime.Runtime.background`); when
      connections already live on the kernel's loop, a usage error says what
      works instead.
    """
    from .runtime import runtime  # lazy: start-up time

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        from acp_kernel.compat import ipython_asyncio_loop  # lazy: start-up time

        return ipython_asyncio_loop().run_until_complete(coro)
    return runtime().run_blocking(coro)


def _acp_line(line: str) -> Any:
    from .runtime import runtime  # lazy: start-up time

    return run_sync(runtime().line(line))


def _acp_cell(line: str, cell: str) -> Any:
    from .runtime import runtime  # lazy: start-up time

    return run_sync(runtime().cell(line, cell))


def _shell_cell(line: str, cell: str) -> Any:
    from .runtime import runtime  # lazy: start-up time

    return run_sync(runtime().shell(line, cell))


def load_ipython_extension(ip: Any) -> None:
    if transform_cell not in ip.input_transformers_cleanup:
        ip.input_transformers_cleanup.append(transform_cell)
    _acp_line.__doc__ = _acp_cell.__doc__ = _help()
    ip.register_magic_function(_acp_line, "line", "acp")
    ip.register_magic_function(_acp_cell, "cell", "acp")
    ip.register_magic_function(_shell_cell, "cell", "shell")
    kernel = getattr(ip, "kernel", None)
    if kernel is not None:  # from now on, see which clients announce a widget manager
        from acp_kernel.frontends.api import widget_clients  # lazy: start-up time

        widget_clients(kernel)
        from acp_kernel.notebook_mcp import register_document  # lazy: start-up time

        register_document()  # the notebook page's extension opens its document comm (live `cells`)
    from .runtime import kill_all_now  # lazy: start-up time

    atexit.register(kill_all_now)
    from acp_kernel.protocol.warm import schema_in_background  # lazy: start-up time

    schema_in_background()  # while the user types `%acp connect`: the connect then rarely waits for it


def unload_ipython_extension(ip: Any) -> None:
    if transform_cell in ip.input_transformers_cleanup:
        ip.input_transformers_cleanup.remove(transform_cell)
