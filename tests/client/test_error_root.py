"""One exception root: every exception class the package defines is an ``AcpError``.

A front-end that catches ``AcpError`` then catches everything this package
raises on purpose; a class may keep a builtin base beside it (``UsageError``
is still a ``ValueError``, the file services' refusals are still ``OSError``).
The walk imports every module of ``acp_kernel``, so classes defined at module
or class level are all seen.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

import acp_kernel
from acp_kernel.errors import AcpError

ROOT = Path(acp_kernel.__file__).parent


def _modules() -> list[str]:
    return [m.name for m in pkgutil.walk_packages(acp_kernel.__path__, "acp_kernel.")
            if not m.name.endswith("__main__")]


def _ours(cls: type) -> list[type]:
    found = []
    for sub in cls.__subclasses__():
        if sub.__module__.startswith("acp_kernel.") or sub.__module__ == "acp_kernel":
            found.append(sub)
        found.extend(_ours(sub))
    return found


def test_every_exception_class_of_the_package_derives_from_acp_error():
    for name in _modules():
        importlib.import_module(name)
    ours = {f"{c.__module__}.{c.__qualname__}": c for c in _ours(BaseException)}
    assert "acp_kernel.client.commands.UsageError" in ours  # the walk sees the package's classes
    outside = sorted(name for name, cls in ours.items() if not issubclass(cls, AcpError))
    assert outside == [], f"derive these from acp_kernel.errors.AcpError: {outside}"


def test_no_exception_class_is_defined_inside_a_function():
    """A class made when a function runs would escape the walk above."""
    hidden = []
    for path in ROOT.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for func in ast.walk(tree):
            if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(func):
                if isinstance(node, ast.ClassDef) and any(
                        "Error" in ast.unparse(b) or "Exception" in ast.unparse(b) for b in node.bases):
                    hidden.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}")
    assert hidden == []
