"""A real python3 kernel (jupyter_client) with the test bridge importable in it."""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from jupyter_client.manager import AsyncKernelManager
from tests.kernels import IpcKernelManager

HERE = Path(__file__).resolve().parent


class Kernel:
    def __init__(self, km: AsyncKernelManager, kc: Any, events: Path) -> None:
        self.km, self.kc, self.events = km, kc, events

    def send(self, code: str) -> str:
        return self.kc.execute(code)

    async def finish(self, msg_id: str, timeout: float = 60) -> tuple[dict, str]:
        """Wait for the cell ``msg_id``'s reply; its reply content and its stdout."""
        out = []
        while True:
            msg = await self.kc.get_iopub_msg(timeout=timeout)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            if msg["msg_type"] == "stream":
                out.append(msg["content"]["text"])
            if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                break
        reply = await self.kc.get_shell_msg(timeout=timeout)
        while reply["parent_header"].get("msg_id") != msg_id:
            reply = await self.kc.get_shell_msg(timeout=timeout)
        return reply["content"], "".join(out)

    async def run(self, code: str, timeout: float = 60) -> str:
        content, out = await self.finish(self.send(code), timeout)
        assert content["status"] == "ok", content
        return out

    async def offer(self, **kwargs: Any) -> dict:
        """A new test bridge in the kernel; the offered McpServerStdio entry."""
        args = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
        out = await self.run(f"import sys; sys.path.insert(0, {str(HERE)!r})\n"
                             f"import kernel_bridge\nprint(kernel_bridge.start({str(self.events)!r}, {args}))")
        return json.loads(out.strip().splitlines()[-1])

    def recorded(self) -> list[dict]:
        if not self.events.exists():
            return []
        return [json.loads(line) for line in self.events.read_text().splitlines() if line]

    async def wait_recorded(self, kind: str, timeout: float = 30) -> dict:
        """Wait (bounded) until the bridge in the kernel has recorded ``kind``."""
        deadline = time.monotonic() + timeout
        while True:
            for event in self.recorded():
                if event["kind"] == kind:
                    return event
            if time.monotonic() > deadline:
                raise AssertionError(f"the kernel never recorded {kind!r}: {self.recorded()}")
            await asyncio.sleep(0.05)


@pytest.fixture
async def kernel(tmp_path):
    km = IpcKernelManager(kernel_name="python3")
    env = dict(os.environ)
    env.pop("MPLBACKEND", None)
    await km.start_kernel(env=env, cwd=str(tmp_path))
    kc = km.client()
    kc.start_channels()
    try:
        await kc.wait_for_ready(timeout=60)
        yield Kernel(km, kc, tmp_path / "events.jsonl")
    finally:
        kc.stop_channels()
        await km.shutdown_kernel(now=True)
