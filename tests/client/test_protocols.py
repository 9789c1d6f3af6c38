"""Every front-end and every transport declares each member of its protocol,
so the client and the connection use them without probing (no hasattr)."""

from __future__ import annotations

import ast
import asyncio
import sys
from pathlib import Path

import acp_kernel

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


def test_no_attribute_probing_on_front_ends_or_transports():
    """What a front-end or transport can do is declared in its protocol, not probed for."""
    root = Path(acp_kernel.__file__).parent
    probes = []
    for path in [*(root / "client").rglob("*.py"), *(root / "protocol").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
                continue
            if node.func.id == "hasattr" or (node.func.id == "getattr" and node.args and any(
                    word in ast.unparse(node.args[0]) for word in ("frontend", "transport", "asker"))):
                probes.append(f"{path.relative_to(root)}:{node.lineno}: {ast.unparse(node)}")
    assert probes == []
