"""Helpers for the fault-injection suite: scripted agents that misbehave.

Library-level cases run a :class:`~acp_kernel.client.session.Client` against
``tests/agents/scripted_agent.py`` over real pipes; kernel-level cases reuse
the real-kernel fixtures of ``tests/kernel/conftest.py``. The autouse fixture
of ``tests/conftest.py`` fails any test that leaves a process behind.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
from typing import Any

from acp_kernel.protocol import proctree
from acp_kernel.client.session import Client
from acp_kernel.client.turn import Notice, Turn

from ..conftest import scripted_spec, wait_text  # noqa: F401  (shared with the fault tests)
# Real-kernel fixtures (jupyter_client), shared with tests/kernel.
from ..kernel.conftest import acp_kernel, kernel_env, kernelspec_path, scripted_command, wait_until  # noqa: F401


async def open_session(scenario: dict, **kwargs: Any):
    client = await Client(scripted_spec(scenario), **kwargs).start()
    session = await client.new_session()
    return client, session


def notices(turn: Turn, level: str | None = None) -> str:
    return "\n".join(n.text for n in turn.events
                     if isinstance(n, Notice) or type(n).__name__ == "Notice"
                     if level is None or n.level == level)


def answers(turn: Turn) -> list[tuple[str, Any]]:
    """The scripted agent's reports of its requests: ("RESULT"|"ERROR", json)."""
    out = []
    for m in re.finditer(r"(RESULT|ERROR) (.*?)(?=(?:RESULT|ERROR|PID) |\Z)", turn.text, re.S):
        out.append((m.group(1), json.loads(m.group(2))))
    return out




async def gone(pids, timeout: float = 10.0) -> None:
    """Poll the process table until none of ``pids`` is alive."""
    pids = set(pids)
    await wait_until(lambda: not any(proctree.alive(p) for p in pids), timeout)


async def next_connection_works(scenario: dict | None = None) -> None:
    """A fresh agent process answers a prompt: the client side recovered."""
    client, session = await open_session(scenario or {"prompt": [{"chunk": "fine"}]})
    try:
        turn = await session.prompt("again")
        assert turn.stop_reason == "end_turn" and turn.error is None
        assert turn.text == "fine" or scenario is not None
    finally:
        await client.close()


def rss_kib() -> dict[str, int]:
    text = open("/proc/self/status").read()
    return {k: int(re.search(k + r":\s+(\d+)", text).group(1)) for k in ("VmRSS", "VmHWM")}


def trim_heap() -> None:
    """Have the C allocator give back the free memory it keeps (glibc's ``malloc_trim``), so
    VmRSS is what the process holds, not what earlier tests in this worker left cached."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def reset_peak_rss() -> bool:
    """Reset VmHWM (Linux >= 4.0); False where not allowed."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def cmdline(pid: int) -> str:
    try:
        return open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


__all__ = ["os"]
