"""The demo agent's `notebook` word: a real MCP client of the server offered in mcpServers.

The demo agent runs as a real process over pipes (the Client of tests/test_demo_agent.py);
the `notebook` server is tests/demo_mcp/fake_notebook_server.py, a real MCP stdio server
(the SDK's MCPServer) that reports its life on a Unix socket, so the tests wait on events.
"""

from __future__ import annotations

import asyncio
import base64
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from acp_kernel.demo import agent as demo_agent
from acp_kernel.demo.mcp_client import ToolResult, convert_result, stdio_entries
from acp_kernel.protocol import proctree
from tests.demo_mcp import fake_notebook_server as fake
from tests.test_demo_agent import Client

FAKE = Path(fake.__file__).resolve()


class ServerEvents:
    """The fake server's reports (`started <pid>`, `sleeping`, `cancelled`, `bye`), per connection."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lines: asyncio.Queue[str] = asyncio.Queue()
        self._server: asyncio.AbstractServer | None = None
        self._writers: list[asyncio.StreamWriter] = []

    async def start(self) -> ServerEvents:
        async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self._writers.append(writer)
            while line := await reader.readline():
                await self.lines.put(line.decode().strip())
            writer.close()

        self._server = await asyncio.start_unix_server(on_connect, path=str(self.path))
        return self

    async def expect(self, prefix: str, timeout: float = 20.0) -> str:
        line = await asyncio.wait_for(self.lines.get(), timeout)
        assert line.startswith(prefix), f"expected {prefix!r} from the fake server, got {line!r}"
        return line

    async def started(self) -> int:
        return int((await self.expect("started")).split()[1])

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            for writer in self._writers:
                writer.close()
            await self._server.wait_closed()


def entry(events: ServerEvents, *, name: str = "notebook", tools: str | None = None) -> dict[str, Any]:
    env = [{"name": "FAKE_NOTEBOOK_EVENTS", "value": str(events.path)}]
    if tools is not None:
        env.append({"name": "FAKE_NOTEBOOK_TOOLS", "value": tools})
    return {"name": name, "command": sys.executable, "args": [str(FAKE)], "env": env}


class McpTestClient(Client):
    async def new_session(self, cwd: Path, servers: list[Any] | None = None) -> dict[str, Any]:  # type: ignore[override]
        return await self.conn.request("session/new", {"cwd": str(cwd), "mcpServers": servers or []}, timeout=10)

    async def close(self) -> None:
        await self.conn.close(grace=10)  # the agent stops its MCP servers itself, then exits 0
        assert self.transport.exited.done(), "the demo agent process is still running"
        assert self.transport.exited.result() == 0, self.transport.stderr.text()
        assert self.conn.noise_count == 0, "the agent wrote non-protocol lines on stdout"

    def tool_calls(self, sid: str) -> dict[str, list[dict[str, Any]]]:
        """Updates per toolCallId, in order (the tool_call first)."""
        out: dict[str, list[dict[str, Any]]] = {}
        for u in self.updates:
            up = u["update"]
            if u["sessionId"] == sid and up["sessionUpdate"] in ("tool_call", "tool_call_update"):
                out.setdefault(up["toolCallId"], []).append(up)
        return out


@pytest.fixture
def cwd(tmp_path: Path) -> Path:
    d = tmp_path / "project"
    d.mkdir()
    return d


@pytest.fixture
async def events():
    # A short path: Unix socket paths are limited to ~100 bytes.
    d = Path(tempfile.mkdtemp(prefix="m2ev-"))
    ev = await ServerEvents(d / "s").start()
    try:
        yield ev
    finally:
        await ev.stop()
        for p in d.iterdir():
            p.unlink()
        d.rmdir()


@pytest.fixture
async def client(tmp_path: Path):
    state = tmp_path / "state"
    state.mkdir()
    c = await McpTestClient(state).start()
    await c.initialize()
    try:
        yield c
    finally:
        await c.close()


def _statuses(updates: list[dict[str, Any]]) -> list[str]:
    return [u["status"] for u in updates if "status" in u]


def _texts(update: dict[str, Any]) -> list[str]:
    return [c["content"]["text"] for c in update.get("content") or [] if c["content"]["type"] == "text"]


# -- end to end -------------------------------------------------------------------


async def test_run_calls_execute_and_close_stops_the_server(client: McpTestClient, cwd: Path, events: ServerEvents) -> None:
    sid = (await client.new_session(cwd, [entry(events)]))["sessionId"]
    result = await client.prompt(sid, "notebook run x = 1", timeout=60)
    assert result["stopReason"] == "end_turn"
    pid = await events.started()
    (calls,) = client.tool_calls(sid).values()
    first, final = calls[0], calls[-1]
    assert first["title"] == "notebook: execute" and first["kind"] == "execute"
    assert first["rawInput"] == {"code": "x = 1"}
    assert _statuses(calls) == ["pending", "in_progress", "completed"]
    assert _texts(final) == ["ran: x = 1\nresult: 5 characters"]
    assert "`execute` tool" in client.text(sid) and "2 lines of text" in client.text(sid)
    assert proctree.alive(pid)

    await client.conn.request("session/close", {"sessionId": sid}, timeout=20)
    assert not proctree.alive(pid), "the notebook server outlived session/close"
    await events.expect("bye")  # it ended on stdin EOF: a clean MCP shutdown, not a kill


async def test_overview_vars_cells_and_a_fenced_block(client: McpTestClient, cwd: Path, events: ServerEvents) -> None:
    sid = (await client.new_session(cwd, [entry(events)]))["sessionId"]
    assert (await client.prompt(sid, "notebook", timeout=60))["stopReason"] == "end_turn"
    await events.started()
    calls = list(client.tool_calls(sid).values())
    assert [c[0]["title"] for c in calls] == ["notebook: cells", "notebook: variables"]
    assert [c[0]["rawInput"] for c in calls] == [{}, {}]
    assert all(_statuses(c)[-1] == "completed" for c in calls)
    report = client.text(sid)
    assert "`cells` answered 2 lines" in report and "`variables` answered 3 lines" in report
    assert "df: DataFrame (3, 2)" in report

    await client.prompt(sid, "notebook vars df", timeout=30)
    call = list(client.tool_calls(sid).values())[-1]
    assert call[0]["kind"] == "read" and call[0]["rawInput"] == {"name": "df"}
    assert _texts(call[-1])[0].startswith("df: int = 1 (detail)")

    await client.prompt(sid, "notebook cells", timeout=30)
    call = list(client.tool_calls(sid).values())[-1]
    assert call[0]["title"] == "notebook: cells" and _texts(call[-1]) == ["[1] x = 1\n[2] df.plot()"]

    await client.prompt(sid, "notebook run\n```python\nimport math\nmath.pi\n```\nplease", timeout=30)
    call = list(client.tool_calls(sid).values())[-1]
    assert call[0]["rawInput"] == {"code": "import math\nmath.pi"}
    # One server for the whole session: it started once.
    assert events.lines.empty()


async def test_a_refused_call_fails_the_tool_call(client: McpTestClient, cwd: Path, events: ServerEvents) -> None:
    sid = (await client.new_session(cwd, [entry(events)]))["sessionId"]
    assert (await client.prompt(sid, "notebook run refuse", timeout=60))["stopReason"] == "end_turn"
    (calls,) = client.tool_calls(sid).values()
    assert _statuses(calls) == ["pending", "in_progress", "failed"]
    assert "refused by the user" in _texts(calls[-1])[0]
    assert "refused" in client.text(sid)


async def test_cancel_during_a_call(client: McpTestClient, cwd: Path, events: ServerEvents) -> None:
    sid = (await client.new_session(cwd, [entry(events)]))["sessionId"]
    turn = asyncio.ensure_future(client.prompt(sid, "notebook run sleep", timeout=60))
    await events.started()
    await events.expect("sleeping")  # the call reached the server's tool
    client.conn.notify("session/cancel", {"sessionId": sid})
    assert (await asyncio.wait_for(turn, 10))["stopReason"] == "cancelled"
    await events.expect("cancelled")  # the SDK sent notifications/cancelled; the tool stopped
    (calls,) = client.tool_calls(sid).values()
    assert calls[-1]["status"] == "failed" and _texts(calls[-1]) == ["Cancelled."]
    # The server stays up for the session and saw exactly one cancelled call.
    assert (await client.prompt(sid, "notebook vars", timeout=30))["stopReason"] == "end_turn"
    call = list(client.tool_calls(sid).values())[-1]
    assert "cancelled so far: 1" in _texts(call[-1])[0]


async def test_hostile_text_is_carried_verbatim(client: McpTestClient, cwd: Path, events: ServerEvents) -> None:
    sid = (await client.new_session(cwd, [entry(events)]))["sessionId"]
    await client.prompt(sid, "notebook run hostile", timeout=60)
    (calls,) = client.tool_calls(sid).values()
    assert _texts(calls[-1]) == [fake.HOSTILE]  # data, byte for byte: the client escapes it
    assert "<img" not in client.text(sid)  # the agent's own message does not quote it


async def test_images_pass_only_when_valid(client: McpTestClient, cwd: Path, events: ServerEvents) -> None:
    sid = (await client.new_session(cwd, [entry(events)]))["sessionId"]
    await client.prompt(sid, "notebook run plot", timeout=60)
    (calls,) = client.tool_calls(sid).values()
    blocks = [c["content"] for c in calls[-1]["content"]]
    images = [b for b in blocks if b["type"] == "image"]
    assert images == [{"type": "image", "mimeType": "image/png", "data": fake.PNG}]
    notes = " ".join(b["text"] for b in blocks if b["type"] == "text")
    assert "not valid base64" in notes and "image/svg+xml" in notes
    assert "1 image" in client.text(sid)


async def test_no_notebook_server_is_said_plainly(client: McpTestClient, cwd: Path, events: ServerEvents) -> None:
    bad = [
        {"type": "http", "name": "notebook", "url": "http://127.0.0.1:1/mcp", "headers": []},
        {"name": "notebook", "args": []},  # no command
        "not an entry",
        entry(events, name="other"),
    ]
    sid = (await client.new_session(cwd, bad))["sessionId"]
    assert (await client.prompt(sid, "notebook run x = 1"))["stopReason"] == "end_turn"
    assert "did not offer a `notebook` MCP server" in client.text(sid)
    assert client.tool_calls(sid) == {}
    assert events.lines.empty()  # the "other" server was never started
    stderr = client.transport.stderr.text()
    assert "mcpServers[0]: transport 'http' is not supported" in stderr
    assert "mcpServers[1]: not a valid stdio entry" in stderr and "mcpServers[2]" in stderr


async def test_tools_the_server_does_not_offer(client: McpTestClient, cwd: Path, events: ServerEvents) -> None:
    sid = (await client.new_session(cwd, [entry(events, tools="cells")]))["sessionId"]
    await client.prompt(sid, "notebook run x = 1", timeout=60)
    assert "does not offer `execute` here; it offers `cells`" in client.text(sid)
    assert "A stand-in notebook server for tests." in client.text(sid)  # the server's instructions
    assert client.tool_calls(sid) == {}
    await client.prompt(sid, "notebook", timeout=30)
    assert [c[0]["title"] for c in client.tool_calls(sid).values()] == ["notebook: cells"]


async def test_a_server_that_dies_is_started_again(client: McpTestClient, cwd: Path, events: ServerEvents) -> None:
    sid = (await client.new_session(cwd, [entry(events)]))["sessionId"]
    assert (await client.prompt(sid, "notebook run die", timeout=60))["stopReason"] == "end_turn"
    first = await events.started()
    await events.expect("dying")
    (calls,) = client.tool_calls(sid).values()
    assert calls[-1]["status"] == "failed" and "closed the connection" in _texts(calls[-1])[0]
    assert "did not complete" in client.text(sid)
    await client.prompt(sid, "notebook cells", timeout=60)
    second = await events.started()  # a new server for the next use
    assert second != first and proctree.alive(second)
    assert _statuses(list(client.tool_calls(sid).values())[-1])[-1] == "completed"


async def test_a_server_that_cannot_start(client: McpTestClient, cwd: Path, tmp_path: Path) -> None:
    missing = {"name": "notebook", "command": str(tmp_path / "no-such-server"), "args": [], "env": []}
    sid = (await client.new_session(cwd, [missing]))["sessionId"]
    assert (await client.prompt(sid, "notebook cells", timeout=60))["stopReason"] == "end_turn"
    assert "could not reach the `notebook` MCP server" in client.text(sid)
    assert "no-such-server" in client.text(sid)

    quits = {"name": "notebook", "command": sys.executable, "args": ["-c", "pass"], "env": []}
    sid = (await client.new_session(cwd, [quits]))["sessionId"]
    assert (await client.prompt(sid, "notebook cells", timeout=60))["stopReason"] == "end_turn"
    assert "closed the connection during the MCP handshake" in client.text(sid)
    assert client.tool_calls(sid) == {}


async def test_unknown_subcommand_gives_usage(client: McpTestClient, cwd: Path) -> None:
    sid = (await client.new_session(cwd, []))["sessionId"]
    await client.prompt(sid, "notebook frobnicate")
    assert "`notebook vars [NAME]`" in client.text(sid)


async def test_load_and_resume_with_other_servers_replace_the_running_one(client: McpTestClient, cwd: Path) -> None:
    d = Path(tempfile.mkdtemp(prefix="m2ev-"))
    first, second = await ServerEvents(d / "a").start(), await ServerEvents(d / "b").start()
    try:
        sid = (await client.new_session(cwd, [entry(first)]))["sessionId"]
        await client.prompt(sid, "notebook cells", timeout=60)
        pid = await first.started()
        await client.conn.request("session/resume", {"sessionId": sid, "cwd": str(cwd), "mcpServers": [entry(second)]}, timeout=20)
        assert not proctree.alive(pid), "the replaced server outlived session/resume"
        await first.expect("bye")
        await client.prompt(sid, "notebook cells", timeout=60)
        pid2 = await second.started()
        assert pid2 != pid and proctree.alive(pid2)
        # The same servers again: the running one stays.
        await client.conn.request("session/resume", {"sessionId": sid, "cwd": str(cwd), "mcpServers": [entry(second)]}, timeout=20)
        assert proctree.alive(pid2)
        # session/load without servers: the running one stops, and the word says there is none.
        await client.conn.request("session/load", {"sessionId": sid, "cwd": str(cwd), "mcpServers": []}, timeout=20)
        assert not proctree.alive(pid2), "the replaced server outlived session/load"
        await second.expect("bye")
        await client.prompt(sid, "notebook cells", timeout=60)
        assert "did not offer a `notebook` MCP server" in client.text(sid)
        # session/delete stops a running server too.
        await client.conn.request("session/load", {"sessionId": sid, "cwd": str(cwd), "mcpServers": [entry(second)]}, timeout=20)
        await client.prompt(sid, "notebook cells", timeout=60)
        pid3 = await second.started()
        await client.conn.request("session/delete", {"sessionId": sid}, timeout=20)
        assert not proctree.alive(pid3), "the server outlived session/delete"
    finally:
        await first.stop()
        await second.stop()
        for p in d.iterdir():
            p.unlink()
        d.rmdir()


async def test_agent_exit_stops_the_server(tmp_path: Path, cwd: Path, events: ServerEvents) -> None:
    state = tmp_path / "state2"
    state.mkdir()
    c = await McpTestClient(state).start()
    await c.initialize()
    sid = (await c.new_session(cwd, [entry(events)]))["sessionId"]
    await c.prompt(sid, "notebook cells", timeout=60)
    pid = await events.started()
    await c.close()  # stdin EOF: the agent closes its MCP clients, then exits 0
    await events.expect("bye")  # a clean shutdown by the agent, not the client's tree kill
    assert not proctree.alive(pid)


# -- pure pieces ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rest", "want"),
    [
        ("", ("", {})),
        ("vars", ("variables", {})),
        ("VARIABLES df extra", ("variables", {"name": "df"})),
        ("cells", ("cells", {})),
        ("run x = 1", ("execute", {"code": "x = 1"})),
        ("run\n```python\na = 1\nb = 2\n```", ("execute", {"code": "a = 1\nb = 2"})),
        ("```py\nprint(1)\n```", ("execute", {"code": "print(1)"})),
        ("run", None),
        ("dance", None),
    ],
)
def test_notebook_request(rest: str, want: Any) -> None:
    assert demo_agent.notebook_request(rest) == want


def test_fence_cannot_be_closed_by_the_text() -> None:
    text = "a ```` b\n```\n"
    fenced = demo_agent._fence(text)
    assert fenced.startswith("`````text\n") and fenced.endswith("\n`````\n")


def test_stdio_entries_validate_with_the_acp_schema(caplog: pytest.LogCaptureFixture) -> None:
    good = {"name": "notebook", "command": "/bin/true", "args": ["-x"], "env": [{"name": "A", "value": "1"}]}
    got = stdio_entries([good, {"name": "n", "command": "c", "args": [], "env": [{"name": "A"}]}, {"type": "sse"}])
    assert [(e.name, e.command, e.args, e.env) for e in got] == [("notebook", "/bin/true", ("-x",), (("A", "1"),))]
    assert stdio_entries(None) == [] and stdio_entries([]) == []
    assert stdio_entries({"name": "x"}) == []
    assert "mcpServers is not a list" in caplog.text


def test_convert_result_bounds_text_and_checks_images() -> None:
    import mcp_types as types

    big = "x" * 100_010
    result = types.CallToolResult(
        content=[
            types.TextContent(type="text", text=big),
            types.ImageContent(type="image", data=base64.b64encode(b"png").decode(), mime_type="image/png"),
            types.ImageContent(type="image", data="%%%", mime_type="image/png"),
        ],
        is_error=True,
    )
    out = convert_result(result)
    assert isinstance(out, ToolResult) and out.is_error
    assert out.texts[0].endswith("[cut: 10 more characters]") and len(out.texts[0]) < 100_100
    assert out.images == [("image/png", base64.b64encode(b"png").decode())]
    assert out.notes == ["an image whose data is not valid base64 was left out"]


def test_help_lists_the_word() -> None:
    assert "`notebook`" in demo_agent.help_text()
    assert "notebook" in {c["name"] for c in demo_agent.available_commands()}
    assert "``notebook``" in (demo_agent.__doc__ or "")



def test_notebook_all_splits_one_command_per_line_and_keeps_fenced_code_whole() -> None:
    rest = ("insert after a1\n```\nx = 1\nedit b  # code, not a command\n```\n"
            "edit b2\n````\n```\ny = 2\n````\ndelete c3\n")
    commands = demo_agent.notebook_requests(rest)
    assert [demo_agent.notebook_request(c) for c in commands] == [
        ("insert_cell", {"source": "x = 1\nedit b  # code, not a command", "after": "a1"}),
        ("edit_cell", {"cell_id": "b2", "source": "```\ny = 2"}),
        ("delete_cell", {"cell_id": "c3"}),
    ]
    assert demo_agent.notebook_requests("nothing here") == []
