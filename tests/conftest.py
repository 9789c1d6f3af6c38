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


#: Tests that share package-scoped servers (JupyterLab, Notebook 7, a kernel gateway,
#: Chromium) or heavy real CLIs run together on one worker each under pytest-xdist
#: (``--dist loadgroup``), so each server starts once per run, not once per worker.
#: Keyed by folder or file under tests/, the most specific key wins. The browser tests
#: are two groups of about equal time: the ones on the shared JupyterLab, and the ones
#: that start servers of their own.
_GROUPS = {
    "browser": "browser-lab",
    "browser/test_hostile_renderers.py": "browser-servers",
    "browser/test_gateway.py": "browser-servers",
    "browser/test_notebook7.py": "browser-servers",
    "browser/test_long_turn.py": "browser-servers",
    "realclis": "realclis",
}


def _group(parts: tuple[str, ...]) -> str | None:
    for n in range(len(parts), 0, -1):
        if (name := _GROUPS.get("/".join(parts[:n]))) is not None:
            return name
    return None


def _slowest() -> dict[str, float]:
    """tests/slowest.txt (made by tests/slowest.py from a CI run): node id -> seconds."""
    try:
        lines = (Path(__file__).parent / "slowest.txt").read_text().splitlines()
    except OSError:
        return {}
    return {nodeid: float(seconds) for seconds, _, nodeid in (line.partition(" ") for line in lines) if nodeid}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Groups, and the slowest tests first. Before xdist's own hook, which reads the
    groups into the test ids (after it, a group is never seen and every worker
    starts every server). The tests that took longest last time start first (the
    groups are scheduled as a whole, largest first, by xdist), so the run does
    not end with one worker on a long test while the others have nothing to do."""
    here = Path(__file__).parent
    for item in items:
        path = Path(str(item.path))
        if path.is_relative_to(here) and (name := _group(path.relative_to(here).parts)) is not None:
            item.add_marker(pytest.mark.xdist_group(name))
    took = _slowest()
    items.sort(key=lambda item: -took.get(item.nodeid, 0.0))


def pytest_xdist_node_collection_finished(node: object, ids: list[str]) -> None:
    """Under ``--dist loadgroup``, fail the run if a grouped test came back without its
    group: that happened silently with pytest 9.2 (pytest-dev/pytest-xdist#1386), and
    every worker then started every server."""
    config = getattr(node, "config", None)
    if config is None or config.getvalue("dist") != "loadgroup":
        return
    lost = [i for i in ids if "@" not in i.rsplit("]", 1)[-1] and _group(Path(i.split("::")[0]).parts[1:])]
    if lost:
        raise pytest.UsageError(f"pytest-xdist dropped the test groups ({len(lost)} tests, e.g. {lost[0]}): "
                                "see pytest-dev/pytest-xdist#1386 and the pytest pin in pyproject.toml")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> object:
    """With ``ACP_CPU_REPORT=DIR``, each worker appends ``cpu-seconds node-id`` lines to a
    file in DIR: this process's CPU and that of the children it reaped during the test
    (kernels, agents, servers a test started and stopped). CI is CPU-bound on two cores,
    so this, not ``--durations``, says which tests to make cheaper."""
    out = os.environ.get("ACP_CPU_REPORT")
    if not out:
        return (yield)
    before = os.times()
    try:
        return (yield)
    finally:
        after = os.times()
        spent = sum(after[:4]) - sum(before[:4])
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        Path(out).mkdir(parents=True, exist_ok=True)
        with open(Path(out) / f"cpu-{worker}.txt", "a", encoding="utf-8") as f:
            f.write(f"{spent:.2f} {item.nodeid}\n")


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
