"""Kernel-level fixtures: real kernels started through jupyter_client."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator

import pytest
from jupyter_client.manager import AsyncKernelManager

from acp_kernel.frontends.install import install
from tests.kernels import IpcKernelManager

AGENTS = Path(__file__).resolve().parent.parent / "agents"


def scripted_command(scenario: dict) -> str:
    """A ``%agent --command`` line running the scripted test agent."""
    import shlex

    return shlex.join([sys.executable, str(AGENTS / "scripted_agent.py"), json.dumps(scenario)])


@pytest.fixture(scope="session")
def kernelspec_path(tmp_path_factory) -> str:
    """Install our kernelspec with our own installer into a private prefix."""
    prefix = tmp_path_factory.mktemp("prefix")
    install(prefix=str(prefix))
    return str(prefix / "share" / "jupyter")


@pytest.fixture
def kernel_env(tmp_path, kernelspec_path, monkeypatch) -> dict[str, str]:
    monkeypatch.setenv("JUPYTER_PATH", kernelspec_path)
    env = dict(os.environ)
    env.update({
        "ACP_KERNEL_STATE": str(tmp_path / "state" / "sessions.json"),
        "ACP_KERNEL_CONFIG": str(tmp_path / "acp_kernel.json"),
        "ACP_DEMO_STATE_DIR": str(tmp_path / "demo-state"),
    })
    env.pop("ACP_KERNEL_AGENT", None)
    env.pop("JPY_SESSION_NAME", None)
    (tmp_path / "work").mkdir()
    return env


@dataclass
class Result:
    reply: dict[str, Any]
    outputs: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    #: monotonic arrival time of each of ``outputs``
    times: list[float] = field(default_factory=list)
    #: comm messages the kernel sent during the cell under another parent
    stray_comms: list[dict[str, Any]] = field(default_factory=list)

    @property
    def status(self) -> str:
        return self.reply["content"]["status"]

    def text(self) -> str:
        """Everything the cell showed, as one string (markdown, plain, streams and the
        error's traceback, which front-ends show as text)."""
        parts = []
        for msg in self.outputs:
            c = msg["content"]
            if msg["msg_type"] == "stream":
                parts.append(c["text"])
            elif msg["msg_type"] in ("display_data", "update_display_data", "execute_result"):
                data = c.get("data", {})
                parts.append(data.get("text/markdown") or data.get("text/plain") or "")
            elif msg["msg_type"] == "error":
                parts.append("\n".join(c.get("traceback", [])))
        return "\n".join(parts)


class KernelHarness:
    result_class: type[Result] = Result

    def __init__(self, km: AsyncKernelManager, kc: Any) -> None:
        self.km, self.kc = km, kc

    async def announce_widgets(self, timeout: float = 30) -> None:
        """Say hello as a notebook's widget manager does (a ``comm_info_request``
        for ``jupyter.widget``): the kernel then treats this client as a
        notebook (widgets, updates in place, buttons), not as a console."""
        msg_id = self.kc.comm_info(target_name="jupyter.widget")
        reply = await self.kc.get_shell_msg(timeout=timeout)
        while reply["parent_header"].get("msg_id") != msg_id:
            reply = await self.kc.get_shell_msg(timeout=timeout)

    async def execute(self, code: str, *, timeout: float = 30, allow_stdin: bool = True,
                      on_output=None) -> Any:
        """Run a cell; collect its iopub messages until idle. ``on_output`` also
        sees widget comm messages parented to another cell."""
        start = time.monotonic()
        msg_id = self.kc.execute(code, allow_stdin=allow_stdin)
        result = self.result_class(reply={})
        while True:
            msg = await self.kc.get_iopub_msg(timeout=timeout)
            kind = msg["msg_type"]
            if msg["parent_header"].get("msg_id") != msg_id:
                if kind in ("comm_open", "comm_msg"):
                    result.stray_comms.append(msg)
                    if on_output is not None:
                        await on_output(msg)
                continue
            if kind == "status" and msg["content"]["execution_state"] == "idle":
                break
            if kind in ("stream", "display_data", "update_display_data", "execute_result",
                        "error", "comm_open", "comm_msg"):
                result.outputs.append(msg)
                result.times.append(time.monotonic())
                if on_output is not None:
                    await on_output(msg)
        result.reply = await self.kc.get_shell_msg(timeout=timeout)
        while result.reply["parent_header"].get("msg_id") != msg_id:
            result.reply = await self.kc.get_shell_msg(timeout=timeout)
        result.seconds = time.monotonic() - start
        return result


@contextlib.asynccontextmanager
async def running_kernel(env: dict[str, str], cwd: Any, *, tcp: bool = False) -> AsyncIterator[tuple[AsyncKernelManager, Any]]:
    """An ACP kernel started in ``cwd`` and a client ready for it; after the
    block, the client's channels stopped and the kernel shut down. On Unix
    sockets (tests/kernels.py), or with ``tcp``, on TCP ports as Jupyter starts it."""
    km = AsyncKernelManager(kernel_name="acp") if tcp else IpcKernelManager(kernel_name="acp")
    # A kernel that exits by itself may take seconds on a loaded machine; jupyter_client's
    # default (SIGTERM after 2.5 s) would turn that into a wall-clock limit. A kernel that
    # hangs on shutdown still shows: SIGTERM after 30 s, exit status -15.
    km.shutdown_wait_time = 60.0
    await km.start_kernel(env=env, cwd=str(cwd))
    kc = km.client()
    kc.start_channels()
    try:
        await kc.wait_for_ready(timeout=60)
        yield km, kc
    finally:
        kc.stop_channels()
        await km.shutdown_kernel(now=False)


@pytest.fixture
async def acp_kernel(kernel_env, tmp_path):
    async with running_kernel(kernel_env, tmp_path / "work") as (km, kc):
        harness = KernelHarness(km, kc)
        await harness.announce_widgets()  # a notebook (tests of a console say so)
        yield harness


async def wait_until(predicate, timeout: float = 10.0, interval: float = 0.02) -> None:
    """Poll a cheap condition (a process table, a file) until it holds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(interval)
