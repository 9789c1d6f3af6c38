"""The ACP kernel's logic in this process: an in-process harness, as ipykernel's own
tests have one (``ipykernel.inprocess``).

:class:`AcpKernel` is built on a jupyter_client ``Session`` and ipykernel's in-process
``DummySocket`` for iopub, and ``do_execute`` is awaited directly on the test's loop,
each cell with its own ``execute_request`` parent. What the cell published comes back
as the same :class:`~tests.kernel.conftest.Result` the subprocess harness gives. The
agent is still a real process over real pipes; what is left out is the kernel's own
process and its zmq channels, which the subprocess tests (``running_kernel``) keep
covering end to end. A cell here costs what its logic costs, not a kernel start.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any

from ipykernel.inprocess.socket import DummySocket
from jupyter_client.session import Session

from .conftest import Result


class InProcessKernel:
    """One :class:`AcpKernel` in this process; :meth:`execute` runs a cell."""

    def __init__(self, env: dict[str, str], cwd: str) -> None:
        from acp_kernel.frontends.kernel import AcpKernel

        # The kernel reads its settings (state, config, agent) from the environment
        # when it starts, as a kernel process would from the one it was given.
        self._saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        self._cwd = os.getcwd()
        os.chdir(cwd)
        self.session = Session(key=b"")
        self.iopub = DummySocket()
        # The app gives a kernel process its logger; here, a logger of our own.
        self.kernel = AcpKernel(session=self.session, iopub_socket=self.iopub, log=logging.getLogger("acp-kernel"))

    def _published(self) -> list[dict[str, Any]]:
        out = []
        while not self.iopub.queue.empty():
            parts = self.iopub.queue.get_nowait()
            _, frames = self.session.feed_identities([p.bytes for p in parts])
            out.append(self.session.deserialize(frames))
        return out

    async def execute(self, code: str, *, allow_stdin: bool = False) -> Result:
        request = self.session.msg("execute_request", {"code": code, "silent": False, "allow_stdin": allow_stdin})
        self.kernel.set_parent([], request, channel="shell")
        start = time.monotonic()
        content = await self.kernel.do_execute(code, silent=False, allow_stdin=allow_stdin)
        seconds = time.monotonic() - start
        outputs = [m for m in self._published() if m["parent_header"].get("msg_id") == request["header"]["msg_id"]
                   and m["msg_type"] in ("stream", "display_data", "update_display_data", "execute_result",
                                         "error", "clear_output")]
        reply = {"header": {"msg_type": "execute_reply"}, "parent_header": request["header"], "content": content}
        # No arrival times: the outputs are read from the socket after the cell, so
        # any time given here would be made up (``Result.times`` stays empty).
        return Result(reply, outputs, seconds)

    async def close(self) -> None:
        """What a shutdown_request does: the agent closed, terminals ended; then this
        process's environment and directory are as they were, whatever failed."""
        try:
            await self.kernel.do_shutdown(restart=False)
        finally:
            try:
                self._close_widgets()
            finally:
                os.chdir(self._cwd)
                for key, value in self._saved.items():
                    if value is None:
                        os.environ.pop(key, None)
                    else:
                        os.environ[key] = value

    def _close_widgets(self) -> None:
        """Close the comms this kernel's widgets opened, while its comm manager is the
        one installed (the next kernel here installs its own): a widget collected later
        then finds its comm closed and leaves the manager alone."""
        for comm in list(self.kernel.comm_manager.comms.values()):
            try:
                comm.close()
            except KeyError:  # already gone from the manager
                pass
