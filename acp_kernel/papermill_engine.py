"""The ``papermill.engine`` entry point ``acp``: papermill imports it at start-up.

Kept apart from :mod:`acp_kernel.papermill` so that papermill importing its
entry points never meets a half-initialised module (importing
``acp_kernel.papermill`` first imports papermill, which loads this).
"""

from __future__ import annotations

from papermill.engines import NBClientEngine

from . import papermill  # noqa: F401 - registers the ACP parameter translator


class AcpEngine(NBClientEngine):
    """papermill's nbclient engine, unchanged (the import above is the point)."""
