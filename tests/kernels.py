"""The kernel manager every test kernel starts with: its sockets are Unix sockets.

jupyter_client picks five free TCP ports by binding to port 0, closes them and
hands the numbers to the kernel, which binds them a moment later. On a busy
machine another process can take one in between (jupyter_client#487): the
kernel dies with "Address already in use" before it answers, and a test fails
for nothing it tests (it cost two CI runs, each once in ~1,400 tests). Sockets in a
directory of their own cannot be taken, so the race is gone rather than retried.

A class rather than a configured instance, so nbclient and papermill can be
given it (``kernel_manager_class=``) and still own, and shut down, the kernel.
"""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
import uuid
from pathlib import Path

from jupyter_client.manager import AsyncKernelManager, KernelManager
from traitlets import HasTraits, default


@functools.cache
def _socket_dir() -> Path:
    """One short directory for this test process's kernel sockets (a Unix
    socket's path is at most 107 bytes), removed when the process ends."""
    where = Path(tempfile.mkdtemp(prefix="acp-test-kernels-"))
    atexit.register(shutil.rmtree, where, ignore_errors=True)
    return where


class UnixSockets(HasTraits):
    """A kernel manager's defaults for the ``ipc`` transport: each kernel's sockets get
    a name of their own (jupyter_client removes them at shutdown); the path is
    absolute, as the kernel runs in its own cwd and the client in ours."""

    @default("transport")
    def _default_transport(self) -> str:
        return "ipc"

    @default("ip")
    def _default_ip(self) -> str:
        return str(_socket_dir() / uuid.uuid4().hex[:12])


class IpcKernelManager(UnixSockets, AsyncKernelManager):
    """``AsyncKernelManager`` on Unix sockets."""


class BlockingIpcKernelManager(UnixSockets, KernelManager):
    """``KernelManager`` (blocking) on Unix sockets, for jupyter_kernel_test."""
