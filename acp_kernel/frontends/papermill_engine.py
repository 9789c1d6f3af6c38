"""The ``papermill.engine`` entry point ``acp``: papermill imports it at start-up.

papermill has no entry point for translators, so this engine is how
installing acp-kernel makes ``papermill -p`` work on ACP notebooks: importing
it registers the translator (:mod:`acp_kernel.frontends.papermill`). The
engine itself is papermill's nbclient engine. Import order matters both ways
(papermill imports this while it initialises; this imports papermill): the
class is defined before anything of papermill is imported, so whichever comes
first finds ``AcpEngine`` ready.
"""

from __future__ import annotations

from typing import Any


class AcpEngine:
    """papermill's nbclient engine, by delegation (see the module docstring)."""

    @classmethod
    def execute_notebook(cls, *args: Any, **kwargs: Any) -> Any:
        from papermill.engines import NBClientEngine

        return NBClientEngine.execute_notebook(*args, **kwargs)


from . import papermill  # noqa: E402,F401 - registers the ACP parameter translator
