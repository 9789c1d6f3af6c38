"""Every front-end and every transport declares each member of its protocol,
so the client and the connection use them without probing (no hasattr)."""

from __future__ import annotations

import asyncio
import sys

from acp_kernel.client.frontend import Frontend
from acp_kernel.frontends.api import IPythonFrontend
from acp_kernel.frontends.kernel_io import KernelFrontend
from acp_kernel.protocol.connection import Connection
from acp_kernel.protocol.transport import ProcessTransport, StdioTransport, Transport, memory_pair


def test_the_front_ends_are_frontends():
    for fe in (KernelFrontend(kernel=None), IPythonFrontend(render=False)):
        assert isinstance(fe, Frontend), type(fe).__name__
        assert fe.kind in ("kernel", "magics")


async def test_the_transports_are_transports():
    a, b = memory_pair()
    transports = [a, StdioTransport(stdin=sys.stdin, stdout=sys.stdout),
                  ProcessTransport([sys.executable, "-c", "pass"])]
    for t in transports:
        assert isinstance(t, Transport), type(t).__name__


async def test_a_connection_wires_its_callbacks_into_any_transport():
    a, b = memory_pair()
    conn = Connection(a, name="x")
    assert a.on_stall is not None and a.on_exit is not None
    assert a.exited is None and a.write_stall_seconds == 0.0
    await conn.start()
    await a.close()
    await asyncio.wait_for(conn.wait_closed(), 5)
