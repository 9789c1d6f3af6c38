"""acp-kernel: a notebook as a first-class Agent Client Protocol client.

The curated public API; everything heavier is imported on first use.

``agent = await acp_kernel.connect("demo")`` then ``turn = await
agent.prompt("...")`` (:mod:`acp_kernel.frontends.api`) is the Python API of the
magics' world. ``connect`` used to be :func:`acp_kernel.client.session.connect`
(start an :class:`AgentSpec`, get a bare :class:`Client`); that one is still
there by its full name.
"""

from __future__ import annotations

from typing import Any

from . import _checkout
from ._lazy import lazy_attr

_checkout.expose_magics(__name__, __path__)

__all__ = [
    "Agent",
    "AgentSpec",
    "Client",
    "ClientSettings",
    "Session",
    "Turn",
    "connect",
    "load_config",
    "load_ipython_extension",
    "shell_argv",
]

_LAZY = {
    "AgentSpec": "client.registry",
    "load_config": "client.registry",
    "Client": "client.session",
    "Session": "client.session",
    "connect": "frontends.api",
    "Agent": "frontends.api",
    "ClientSettings": "client.host",
    "Turn": "client.turn",
    "shell_argv": "services.shell",
}


def __getattr__(name: str) -> Any:
    return lazy_attr(__name__, _LAZY, name)


def load_ipython_extension(ip: Any) -> None:
    """``%load_ext acp_kernel``: the magics (:mod:`acp_kernel.magics`)."""
    from .magics import load_ipython_extension as load  # lazy: start-up time

    load(ip)


def unload_ipython_extension(ip: Any) -> None:
    from .magics import unload_ipython_extension as unload  # lazy: start-up time

    unload(ip)
