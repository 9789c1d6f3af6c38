"""IPython extension: ``%acp``, ``%%acp`` and ``%%shell`` in an ordinary Python notebook.

Load with ``%load_ext acp_kernel`` (or ``%load_ext magics``)::

    %acp connect demo
    %%acp
    Summarise {df_name} for me.

The cell's value (also ``_acp``) is the :class:`~acp_kernel.turn.Turn`, or
for a passthrough terminal (``%acp passthrough demo``) the
:class:`~acp_kernel.passthrough.Reply`.
"""

from __future__ import annotations

import atexit
from typing import Any

from .transform import transform_cell

__all__ = ["load_ipython_extension", "unload_ipython_extension"]

_HELP = """%acp connect NAME|--command CMD [--cwd DIR] [--permissions P] [--as ALIAS]
%acp disconnect [ALIAS] | agents | status | sessions | new | cancel
%acp mode ID | model ID | config ID VALUE | load ID
%acp passthrough [NAME|--command CMD] [--cwd DIR] [--as ALIAS]   (the agent's own CLI in a terminal)
%%acp [ALIAS] [--no-interpolate] [--attach VAR]   (the cell is the prompt)
%%shell [--pwsh] [--timeout S] [--limit BYTES] [--cwd DIR] [--env K=V] [--show-argv] [--raise]"""


def _misplaced(*_: Any) -> None:
    from IPython.core.error import UsageError

    raise UsageError("%acp, %%acp and %%shell must start a line at the top level of a cell:\n" + _HELP)


_misplaced.__doc__ = _HELP


def load_ipython_extension(ip: Any) -> None:
    if transform_cell not in ip.input_transformers_cleanup:
        ip.input_transformers_cleanup.append(transform_cell)
    ip.register_magic_function(_misplaced, "line", "acp")
    ip.register_magic_function(_misplaced, "cell", "acp")
    ip.register_magic_function(_misplaced, "cell", "shell")
    from .runtime import kill_all_now

    atexit.register(kill_all_now)


def unload_ipython_extension(ip: Any) -> None:
    if transform_cell in ip.input_transformers_cleanup:
        ip.input_transformers_cleanup.remove(transform_cell)
