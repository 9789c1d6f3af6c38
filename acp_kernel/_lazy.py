"""Names a package exports but imports on first use (PEP 562's module ``__getattr__``): its
users pay only for the parts they touch (:mod:`acp_kernel`, :mod:`acp_kernel.view`)."""

from __future__ import annotations

from importlib import import_module
from typing import Any


def lazy_attr(package: str, table: dict[str, str], name: str) -> Any:
    """``name`` of ``package``, from its module ``table[name]`` (relative to the package)."""
    module = table.get(name)
    if module is None:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    return getattr(import_module(f".{module}", package), name)
