"""The ACP kernel's plumbing on ipykernel: the iopub sink, the cell's frontend.

Kept apart from :mod:`acp_kernel.frontends.kernel` (what a cell does); what
leans on ipykernel's private API (comms, iopub topics, the app's IOPub
thread, stdin) is in :mod:`acp_kernel.compat`.
"""

from __future__ import annotations

import asyncio
from typing import Any

from .. import compat
from ..client.commands import KERNEL
from ..safe import check_data
from ..view.frontend import Frontend
from ..client.notebook import DOCUMENT_TOOLS, NotebookSide, Origin
from .ask import StdinQuestions


class KernelSink:
    """The view's DisplaySink: display messages on iopub, parented to the cell."""

    def __init__(self, kernel: Any, parent: dict[str, Any]) -> None:
        self.kernel = kernel
        self.parent = parent

    def _send(self, msg_type: str, content: dict[str, Any]) -> None:
        if "data" in content:
            check_data(content["data"])
        k = self.kernel
        k.session.send(k.iopub_socket, msg_type, content, parent=self.parent, ident=compat.iopub_topic(k, msg_type))

    def display(self, data: dict, metadata: dict | None = None, display_id: str | None = None) -> None:
        self._send("display_data", {"data": data, "metadata": metadata or {},
                                    "transient": {"display_id": display_id} if display_id else {}})

    def update(self, data: dict, metadata: dict | None = None, display_id: str = "") -> None:
        self._send("update_display_data", {"data": data, "metadata": metadata or {},
                                           "transient": {"display_id": display_id}})

    def stream(self, text: str, name: str = "stdout") -> None:
        self._send("stream", {"name": name, "text": text})


class KernelFrontend:
    """What the controller may use of this kernel: the running cell's sink,
    what its frontend shows (:mod:`acp_kernel.view.frontend`: a widget
    manager announced by the cell's client means a notebook; else a client
    that allows stdin is a console, one that does not is headless), and who
    answers questions. Called within the cell's context."""

    kind = KERNEL

    def __init__(self, kernel: Any) -> None:
        self.kernel = kernel

    def sink(self) -> KernelSink:
        return self.kernel._sink or KernelSink(self.kernel, {})

    def frontend(self) -> Frontend:
        k = self.kernel
        return k.widget_clients.frontend(k.get_parent("shell"), k._allow_stdin)

    def interactive(self) -> bool:
        """Someone can answer: a notebook (buttons) or a console (stdin); headless runs cannot."""
        return self.kernel._allow_stdin

    def widgets(self) -> bool:
        return self.frontend().widgets

    def notebook_side(self) -> Any:
        """For the ``notebook`` MCP server: no Python namespace here, so the document's
        tools only: ``cells`` (the page, the notebook file, else the cells this kernel
        ran) and the proposals (``insert_cell``, ``edit_cell``, ``delete_cell``)."""
        return NotebookSide(DOCUMENT_TOOLS, history=lambda: list(self.kernel.cell_history))

    def origin(self) -> Origin:
        return Origin.of(self.kernel.get_parent("shell"))

    def next_input(self, text: str) -> bool:
        """Sent with this cell's reply (:meth:`AcpKernel._ok`); not in a headless run (nbclient
        drops the payload: nobody would see the cell)."""
        if self.kernel._next_input is not None or not self.interactive():
            return False
        self.kernel._next_input = text
        return True

    def asker(self) -> Any:
        """A console's questions go through ``input_request`` (widgets answer in a notebook)."""
        if self.frontend().ask != "stdin":
            return None
        return StdinQuestions(compat.stdin_reader(self.kernel))


async def on_loop(loop: asyncio.AbstractEventLoop | None, coro: Any, log: Any, what: str) -> None:
    """Run ``coro`` on the shell's loop from the control thread's (shutdown), within 5 s."""
    try:
        if loop is not None and loop.is_running() and loop is not asyncio.get_running_loop():
            done = asyncio.run_coroutine_threadsafe(coro, loop)
            await asyncio.wait_for(asyncio.wrap_future(done), 5.0)
        else:
            await coro
    except Exception:  # noqa: BLE001 - shutting down regardless
        log.warning("closing %s cleanly failed; killing", what, exc_info=True)
