"""End to end, no agent: a real python3 kernel with a test bridge, and the SDK's MCP
client starting the server from the entry the kernel offered."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import AsyncIterator

import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

from acp_kernel.protocol import proctree


def params(entry: dict) -> StdioServerParameters:
    return StdioServerParameters(command=entry["command"], args=entry["args"],
                                 env={k: v for k, v in os.environ.items() if k in ("PYTHONPATH",)})


@contextlib.asynccontextmanager
async def mcp_session(entry: dict) -> AsyncIterator[ClientSession]:
    """The SDK's client on the server the entry starts; the server's stderr is printed
    (pytest shows it when a test fails)."""
    with tempfile.TemporaryFile("w+") as errlog:
        try:
            async with stdio_client(params(entry), errlog=errlog) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    yield session
        finally:
            errlog.seek(0)
            print("server stderr:", errlog.read())


def server_pids(token: str) -> set[int]:
    """Our descendant processes running the server for ``token``."""
    found = set()
    for pid in proctree.tree(os.getpid()):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if token.encode() in cmdline and proctree.alive(pid):
            found.add(pid)
    return found


async def wait_gone(pids: set[int], timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while any(proctree.alive(p) for p in pids):
        if time.monotonic() > deadline:
            raise AssertionError(f"the server {pids} did not exit in time")
        await asyncio.sleep(0.05)


def text(result) -> str:
    return "\n".join(c.text for c in result.content if c.type == "text")


async def test_tools_listed_with_schemas(kernel):
    entry = await kernel.offer()
    assert entry["name"] == "notebook" and entry["command"] == sys.executable and entry["env"] == []
    async with mcp_session(entry) as session:
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert list(tools) == ["execute", "variables", "cells"]
        assert tools["execute"].input_schema["required"] == ["code"]
        assert "name" in tools["variables"].input_schema["properties"]
        assert "live" in session.instructions or "kernel" in session.instructions


async def test_execute_then_variables_then_execute_again(kernel):
    entry = await kernel.offer()
    async with mcp_session(entry) as session:
        first = await session.call_tool("execute", {"code": "x = 41 + 1\nprint('hello')\nx"})
        assert not first.is_error, text(first)
        assert "hello" in text(first) and "42" in text(first)
        listed = await session.call_tool("variables", {})
        assert "x: int = 42" in text(listed)
        one = await session.call_tool("variables", {"name": "x"})
        assert "x: int" in text(one) and "42" in text(one)
        second = await session.call_tool("execute", {"code": "x * 2"})
        assert "84" in text(second)
    # the print went to the view, not into a cell
    writes = [e for e in kernel.recorded() if e["kind"] == "write"]
    assert writes and writes[0] == {"kind": "write", "name": "stdout", "text": "hello"}
    assert [e["summary"] for e in kernel.recorded() if e["kind"] == "done"] == ["42", "84"]
    # the agent's variable is the user's: the next cell sees it
    assert (await kernel.run("print(x)")).strip() == "42"
