"""Magics-level fixtures: a real IPython kernel (``python3`` kernelspec) through jupyter_client.

Reuses the kernel-level harness: the same temp-prefix ``acp`` kernelspec, the
same environment (state, config and demo state in temp paths) and the same
iopub-driven ``execute``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from acp_kernel.protocol import proctree
from tests.kernels import IpcKernelManager
from tests.kernel import conftest as _kernel
from tests.kernel.conftest import KernelHarness, Result, scripted_command, wait_until  # noqa: F401

# The kernel-level fixtures, shared (pytest finds fixtures in a conftest's namespace):
# the ``acp`` kernelspec installed by our installer into a temp prefix, and the
# environment with state, config and demo state in temp paths.
kernelspec_path = _kernel.kernelspec_path
kernel_env = _kernel.kernel_env


class CellResult(Result):
    def displays(self) -> list[dict[str, Any]]:
        return [m for m in self.outputs if m["msg_type"] in ("display_data", "update_display_data")]

    def error_line(self) -> str:
        """The stderr a usage error printed (IPython shows ``UsageError: ...``)."""
        return "".join(m["content"]["text"] for m in self.outputs
                       if m["msg_type"] == "stream" and m["content"]["name"] == "stderr")


class MagicsHarness(KernelHarness):
    """A kernel driven cell by cell; ``ok`` runs a cell and insists it succeeded."""

    result_class = CellResult

    async def ok(self, code: str, **kw: Any) -> CellResult:
        res = await self.execute(code, **kw)
        assert res.status == "ok", (code, res.reply["content"], res.text())
        return res

    async def value(self, code: str) -> str:
        """``repr`` of the last line of ``code`` (an expression), run in the kernel
        after the lines before it (no pretty-printing, no ``_`` shuffle)."""
        *before, last = code.split("\n")
        res = await self.ok("\n".join([*before, f"print(repr(({last})), end='')"]))
        return "".join(m["content"]["text"] for m in res.outputs if m["msg_type"] == "stream")

    @property
    def pid(self) -> int:
        return self.km.provisioner.pid

    def descendants(self) -> set[int]:
        return proctree.tree(self.pid)


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def agent_pids(pids: set[int], marker: str) -> set[int]:
    return {p for p in pids if marker in cmdline(p)}


async def start(kernel_name: str, env: dict[str, str], cwd: str, *, notebook: bool = True) -> MagicsHarness:
    """A kernel and a client. ``notebook``: the client is a notebook with a
    widget manager, as JupyterLab's: it announces one, and (for the magics,
    loaded after any announcement) the kernel runs as Jupyter Server starts
    kernels, with ``JPY_SESSION_NAME`` set. Else it is a console."""
    if notebook and kernel_name != "acp":  # (the ACP kernel sees the announcement; it keys its store by this)
        env = {**env, "JPY_SESSION_NAME": str(Path(cwd) / "test.ipynb")}
    km = IpcKernelManager(kernel_name=kernel_name)
    await km.start_kernel(env=env, cwd=cwd)
    kc = km.client()
    kc.start_channels()
    await kc.wait_for_ready(timeout=60)
    harness = MagicsHarness(km, kc)
    if notebook:
        await harness.announce_widgets()
    return harness


async def stop(harness: MagicsHarness) -> None:
    harness.kc.stop_channels()
    if await harness.km.is_alive():
        await harness.km.shutdown_kernel(now=False)


@pytest.fixture
async def ipython(kernel_env, tmp_path):
    """A fresh IPython kernel, cwd a temp dir, with nothing loaded yet; the user's shell is bash."""
    harness = await start("python3", dict(kernel_env, SHELL="/bin/bash"), str(tmp_path / "work"))
    try:
        yield harness
    finally:
        await stop(harness)


@pytest.fixture
async def acp_sh_kernel(kernel_env, tmp_path):
    """The ACP kernel (our ``acp`` kernelspec, temp prefix) whose user's shell is /bin/sh."""
    env = dict(kernel_env, SHELL="/bin/sh")
    harness = await start("acp", env, str(tmp_path / "work"))
    try:
        yield harness
    finally:
        await stop(harness)


@pytest.fixture
async def magics(ipython):
    """An IPython kernel with ``%load_ext acp_kernel`` done."""
    await ipython.ok("%load_ext acp_kernel")
    return ipython


def button_clicker(harness: KernelHarness, label: str) -> tuple[asyncio.Future, Any]:
    """An ``on_output`` hook that answers the turn's first permission question
    with the option whose name holds ``label``, as the page does (the question
    is a block of the turn widget: tests/view/turnclick.py)."""
    from tests.view.turnclick import permission_answerer

    return permission_answerer(harness, label)
