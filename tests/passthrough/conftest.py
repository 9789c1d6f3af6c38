"""Fixtures for the stand-in tests: the kernel suite's, reused, and a
passthrough manager whose terminals' process trees are killed after the test."""

import pytest

from acp_kernel.passthrough.manager import PassthroughManager
from acp_kernel.protocol import proctree
from tests.kernel.conftest import kernel_env, kernelspec_path  # noqa: F401


@pytest.fixture
async def manager():
    m = PassthroughManager()
    yield m
    for pty in list(m.terminals.values()):
        proctree.kill_tree_now(pty.ptyproc.pid)
