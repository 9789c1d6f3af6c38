"""Shared fixtures: scripted agents as real processes, and a process-leak check."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest

from acp_kernel.protocol import proctree
from acp_kernel.client.registry import AgentSpec

AGENTS = Path(__file__).parent / "agents"


def scripted_spec(scenario: dict, name: str = "scripted") -> AgentSpec:
    """An AgentSpec running tests/agents/scripted_agent.py with ``scenario``."""
    return AgentSpec(
        name=name,
        title="scripted test agent",
        command=(sys.executable, str(AGENTS / "scripted_agent.py"), json.dumps(scenario)),
    )


def demo_spec() -> AgentSpec:
    return AgentSpec(name="demo", title="demo", command=(sys.executable, "-m", "acp_kernel.demo.agent"))


#: Test folders whose tests share package-scoped servers (JupyterLab, Chromium) or
#: heavy real CLIs: under pytest-xdist (``--dist loadgroup``) each runs on one worker.
_ONE_WORKER = ("browser", "realclis")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        path = Path(str(item.path))
        parts = path.relative_to(here).parts if path.is_relative_to(here) else ()
        if parts and parts[0] in _ONE_WORKER:
            item.add_marker(pytest.mark.xdist_group(parts[0]))


@pytest.fixture
def scripted():
    return scripted_spec


def _our_tree() -> set[int]:
    return proctree.tree(os.getpid())


@pytest.fixture(autouse=True)
def no_process_left_behind():
    """Every test must leave the process table as it found it."""
    before = _our_tree()
    yield
    left = {p for p in _our_tree() - before if proctree.alive(p)}
    if left:
        details = []
        for pid in sorted(left):
            try:
                details.append(f"{pid}: " + Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:200])
            except OSError:
                details.append(str(pid))
        proctree.signal_all(0, left, 9)
        pytest.fail("processes left behind:\n" + "\n".join(details))


async def wait_text(turn, needle: str, timeout: float = 10.0) -> None:
    """Wait (on the turn's events, not a clock) until its text contains ``needle``."""
    if needle in turn.text:
        return
    fut = asyncio.get_running_loop().create_future()
    unsubscribe = turn.subscribe(lambda e: fut.done() or (needle in turn.text and fut.set_result(None)))
    try:
        await asyncio.wait_for(fut, timeout)
    finally:
        unsubscribe()
