"""The ACP schema models, imported in a background thread while an agent starts.

``acp_kernel.protocol.schema`` costs about half a second of CPU to import (the SDK's
``acp`` package and its 280 generated models, built lazily). Paid where it is first
needed, that is the agent's first permission, file or terminal request: the question
in a long turn waited for it (issue 25's "question at step 900"). A client starts the
import here while it waits for the agent's ``initialize`` answer, time it spends
idle; a request that comes before the import is done waits for it, as it would have.
"""

from __future__ import annotations

import logging
import sys
import threading

log = logging.getLogger(__name__)
_lock = threading.Lock()
_started = False


def schema_in_background() -> None:
    """Start importing the schema models in a daemon thread (once per process)."""
    global _started
    with _lock:
        if _started or "acp_kernel.protocol.schema" in sys.modules:
            return
        _started = True
    threading.Thread(target=_import, name="acp-schema-import", daemon=True).start()


def _import() -> None:
    try:
        from . import schema  # noqa: F401  # lazy: start-up time (the point: off the caller's thread)
    except Exception:  # noqa: BLE001 - the first request imports it again and reports what failed
        log.debug("importing the ACP schema in the background failed", exc_info=True)
