"""Fixtures: a JupyterLab that exposes its app object, and the oracle page in Chromium.

The server is the browser tests' (``tests/browser/conftest.py``: temp state,
our kernelspec, 127.0.0.1, a token) with ``--LabApp.expose_app_in_browser``,
so the page's ``window.jupyterapp`` hands over JupyterLab's real rendermime
registry. Skipped like the browser tests when chromium or playwright is missing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.browser.conftest import START, _serve, skip_unless_browser

LAB_ARGS = [
    "--LabApp.news_url=",
    "--LabServerApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    "--LabApp.expose_app_in_browser=True",
]


def serve(base: Path, extra: list[str]) -> Iterator[Any]:
    return _serve(base, "jupyterlab", extra)


@pytest.fixture(scope="package")
def oracle_lab(tmp_path_factory) -> Any:
    skip_unless_browser()
    yield from serve(tmp_path_factory.mktemp("oracle-lab"), LAB_ARGS)


@pytest.fixture(scope="package")
def oracle(oracle_lab, tmp_path_factory) -> Any:
    """An :class:`~tests.rendermime.oracle.Oracle` on a JupyterLab page."""
    from .oracle import Oracle

    with Oracle.in_chromium(oracle_lab.url("/lab"), START) as oracle:
        yield oracle


@pytest.fixture(autouse=True)
def no_process_left_behind():
    """Overrides the repository-wide check, as the browser tests do: Chromium's
    own processes come and go; the server and browser are stopped by their
    package fixtures (by process group and by Playwright)."""
    yield


@pytest.fixture(scope="session")
def safe_module():
    import acp_kernel.safe

    return acp_kernel.safe
