"""``acp_kernel.magics`` in a source checkout.

The magics live in the repository's top-level ``magics/`` folder (the
project's layout); a wheel carries them as ``acp_kernel/magics`` (mapped at
build time by ``hatch_build.py``). An editable install puts the checkout on
``sys.path`` instead, where ``acp_kernel/magics`` does not exist: this finder
answers for that one name from the folder beside the package, and for nothing
else. It is not installed when the package has a real ``magics`` subpackage.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import os
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from typing import Any


class _MagicsFinder(importlib.abc.MetaPathFinder):
    def __init__(self, fullname: str, folder: str) -> None:
        self.fullname = fullname
        self.folder = folder

    def find_spec(self, fullname: str, path: Sequence[str] | None = None, target: Any = None) -> ModuleSpec | None:
        if fullname != self.fullname:
            return None
        return importlib.util.spec_from_file_location(
            fullname, os.path.join(self.folder, "__init__.py"), submodule_search_locations=[self.folder])


def expose_magics(package: str, package_path: Sequence[str]) -> None:
    """Make ``<package>.magics`` importable from a checkout's ``magics/``."""
    here = package_path[0]
    if os.path.isdir(os.path.join(here, "magics")):
        return  # an installed wheel
    folder = os.path.join(os.path.dirname(os.path.abspath(here)), "magics")
    if not os.path.isfile(os.path.join(folder, "__init__.py")):
        return
    fullname = package + ".magics"
    if not any(isinstance(f, _MagicsFinder) and f.fullname == fullname for f in sys.meta_path):
        sys.meta_path.append(_MagicsFinder(fullname, folder))
