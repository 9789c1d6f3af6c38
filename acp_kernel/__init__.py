"""acp-kernel: a notebook as a first-class Agent Client Protocol client.

The curated public API; everything heavier is imported on first use.

``agent = await acp_kernel.connect("demo")`` then ``turn = await
agent.prompt("...")`` (:mod:`acp_kernel.api`) is the Python API of the
magics' world. ``connect`` used to be :func:`acp_kernel.session.connect`
(start an :class:`AgentSpec`, get a bare :class:`Client`); that one is still
there by its full name.
"""

from __future__ import annotations

from typing import Any

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
    "AgentSpec": "registry",
    "load_config": "registry",
    "Client": "session",
    "Session": "session",
    "connect": "api",
    "Agent": "api",
    "ClientSettings": "host",
    "Turn": "turn",
    "shell_argv": "shell",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'acp_kernel' has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(f".{module}", __name__), name)


def load_ipython_extension(ip: Any) -> None:
    """``%load_ext acp_kernel``: the same extension as ``%load_ext magics``."""
    from magics import load_ipython_extension as load

    load(ip)


def unload_ipython_extension(ip: Any) -> None:
    from magics import unload_ipython_extension as unload

    unload(ip)
