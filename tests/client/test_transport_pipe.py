"""The agent's stdout pipe is grown (:data:`~acp_kernel.protocol.transport.STDOUT_PIPE_BYTES`)
where the system allows it, so a fast stream reaches the loop in reads of up to asyncio's
256 KiB, not the default pipe's 64 KiB."""

from __future__ import annotations

import asyncio
import fcntl
import sys
from pathlib import Path

import pytest

from acp_kernel.protocol.transport import STDOUT_PIPE_BYTES, ProcessTransport

GET = getattr(fcntl, "F_GETPIPE_SZ", None)
MAX = Path("/proc/sys/fs/pipe-max-size")


@pytest.mark.skipif(GET is None or not MAX.exists(), reason="Linux pipes only")
async def test_the_agents_stdout_pipe_is_as_large_as_the_system_lets_it_be():
    want = min(STDOUT_PIPE_BYTES, int(MAX.read_text()))
    got = bytearray()
    transport = ProcessTransport([sys.executable, "-c", "import sys; sys.stdout.write('x' * 300_000)"])
    done = asyncio.get_running_loop().create_future()
    transport.attach(got.extend, lambda: done.done() or done.set_result(None))
    await transport.start()
    try:
        pipe = transport._proc.get_pipe_transport(1).get_extra_info("pipe")  # type: ignore[union-attr]
        assert fcntl.fcntl(pipe.fileno(), GET) >= want  # the kernel rounds up to pages
        await asyncio.wait_for(done, 30)
        assert bytes(got) == b"x" * 300_000  # every byte, in order
    finally:
        await transport.close()
