"""Fakes and a wire harness for the client-service tests."""

from __future__ import annotations

import asyncio
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from acp_kernel.protocol.connection import Connection
from acp_kernel.errors import INVALID_PARAMS, RpcError
from acp_kernel.client.host import ClientSettings
from acp_kernel.services import Services, install
from acp_kernel.protocol.transport import ProcessTransport

AGENT = Path(__file__).resolve().parents[1] / "agents" / "requester_agent.py"


@dataclass
class FakeContext:
    id: str
    cwd: str
    settings: ClientSettings
    interactive: bool = True
    #: The view can show a page to open (a notebook's turn widget).
    links: bool = True
    turn_running: bool = True
    #: The other workspace roots the agent was given (``additionalDirectories``).
    additional_directories: list[str] = field(default_factory=list)
    kinds: dict[str, str] = field(default_factory=dict)
    #: tool call id -> (rawInput, content) the agent announced for it
    announced: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    events: list[Any] = field(default_factory=list)
    waiters: list[tuple[type, asyncio.Future[Any]]] = field(default_factory=list)

    counters: list[tuple[type, int, asyncio.Future[Any]]] = field(default_factory=list)

    def emit(self, event: Any) -> None:
        self.events.append(event)
        for typ, fut in list(self.waiters):
            if isinstance(event, typ) and not fut.done():
                fut.set_result(event)
                self.waiters.remove((typ, fut))
        for typ, n, fut in list(self.counters):
            if not fut.done() and len(self.of(typ)) >= n:
                fut.set_result(self.of(typ))

    async def until(self, typ: type, n: int = 1, timeout: float = 10) -> list[Any]:
        """Wait until at least ``n`` events of ``typ`` were emitted (ever)."""
        if len(self.of(typ)) >= n:
            return self.of(typ)
        fut = asyncio.get_running_loop().create_future()
        self.counters.append((typ, n, fut))
        return await asyncio.wait_for(fut, timeout)

    def tool_call_kind(self, tool_call_id: str) -> str | None:
        return self.kinds.get(tool_call_id)

    def tool_call_input(self, tool_call_id: str) -> tuple[Any, Any]:
        return self.announced.get(tool_call_id, (None, None))

    def next_event(self, typ: type) -> asyncio.Future[Any]:
        """A future for the next event of ``typ`` (emitted after this call)."""
        fut = asyncio.get_running_loop().create_future()
        self.waiters.append((typ, fut))
        return fut

    def of(self, typ: type) -> list[Any]:
        return [e for e in self.events if isinstance(e, typ)]


class FakeHost:
    def __init__(self, *contexts: FakeContext) -> None:
        self.contexts = {c.id: c for c in contexts}

    def session_context(self, session_id: Any) -> FakeContext:
        try:
            return self.contexts[session_id]
        except (KeyError, TypeError):
            raise RpcError(INVALID_PARAMS, f"unknown session {session_id!r}") from None


@pytest.fixture
def ctx(tmp_path: Path) -> FakeContext:
    ws = tmp_path / "ws"
    ws.mkdir()
    return FakeContext("s1", str(ws), ClientSettings())


@pytest.fixture
def host(ctx: FakeContext) -> FakeHost:
    return FakeHost(ctx)


class Wire:
    """A requester agent over real pipes, our services on the client side."""

    def __init__(self, conn: Connection, services: Services) -> None:
        self.conn = conn
        self.services = services
        self.responses: dict[str, asyncio.Future[Any]] = {}
        self.done = asyncio.get_running_loop().create_future()
        conn.on_notification("_test/response", self._on_response)
        conn.on_notification("_test/done", lambda p: self.done.done() or self.done.set_result(True))

    def _fut(self, key: str) -> asyncio.Future[Any]:
        if key not in self.responses:
            self.responses[key] = asyncio.get_running_loop().create_future()
        return self.responses[key]

    def _on_response(self, params: Any) -> None:
        fut = self._fut(params["key"])
        if not fut.done():
            fut.set_result(params["response"])

    async def response(self, key: str, timeout: float = 15) -> dict[str, Any]:
        return await asyncio.wait_for(asyncio.shield(self._fut(key)), timeout)

    async def result(self, key: str, timeout: float = 15) -> Any:
        msg = await self.response(key, timeout)
        assert "result" in msg, f"{key}: expected a result, got {msg}"
        return msg["result"]

    async def error(self, key: str, timeout: float = 15) -> dict[str, Any]:
        msg = await self.response(key, timeout)
        assert "error" in msg, f"{key}: expected an error, got {msg}"
        return msg["error"]

    def go(self, name: str) -> None:
        self.conn.notify("_test/go", {"name": name})


@pytest.fixture
async def wire(tmp_path: Path, host: FakeHost):
    """``await wire(steps)`` starts an agent running ``steps``; all are closed after."""
    started: list[Wire] = []

    async def start(steps: list[dict[str, Any]]) -> Wire:
        script = tmp_path / f"script{len(started)}.json"
        script.write_text(json.dumps({"steps": steps}))
        conn = Connection(ProcessTransport([sys.executable, str(AGENT), str(script)]), name="requester")
        services = install(conn, host)
        w = Wire(conn, services)
        await conn.start()
        started.append(w)
        return w

    yield start
    for w in started:
        await w.services.shutdown()
        await w.conn.close(grace=0.2)
