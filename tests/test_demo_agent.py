"""Wire-level tests of the demo agent: the real process, our Connection, small client fakes."""

from __future__ import annotations

import asyncio
import itertools
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from acp import schema

from acp_kernel.demo import agent as demo_agent
from acp_kernel.protocol.connection import Connection
from acp_kernel.errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    RESOURCE_NOT_FOUND,
    ConnectionClosed,
    RpcError,
)
from acp_kernel.protocol.transport import ProcessTransport

REPO = Path(__file__).resolve().parent.parent
FULL_CAPS = {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": True}


class Client:
    """A client peer with simple, real services: files on disk, terminals as subprocesses."""

    def __init__(self, state_dir: Path, caps: dict[str, Any] | None = None) -> None:
        self.state_dir = state_dir
        self.caps = FULL_CAPS if caps is None else caps
        self.updates: list[dict[str, Any]] = []
        self.calls: list[tuple[str, Any]] = []
        self.permission_kind: str | None = "allow_once"  # None = answer "cancelled"
        self.permission_asked = asyncio.Event()
        self._changed = asyncio.Event()
        self._terms: dict[str, asyncio.subprocess.Process] = {}
        self._term_out: dict[str, bytes] = {}
        self._term_readers: dict[str, asyncio.Task[None]] = {}

    async def start(self) -> Client:
        env = {
            "ACP_DEMO_STATE_DIR": str(self.state_dir),
            "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        }
        self.transport = ProcessTransport([sys.executable, "-m", "acp_kernel.demo.agent"], env=env)
        self.conn = Connection(self.transport, name="demo-agent")
        self.reports: list[tuple[str, str]] = []
        self.conn.on_report = lambda kind, text: self.reports.append((kind, text))
        self.conn.on_notification("session/update", self._on_update)
        for method, handler in {
            "session/request_permission": self._permission,
            "fs/read_text_file": self._read,
            "fs/write_text_file": self._write,
            "terminal/create": self._term_create,
            "terminal/wait_for_exit": self._term_wait,
            "terminal/output": self._term_output,
            "terminal/release": self._term_release,
            "terminal/kill": self._term_release,
        }.items():
            self.conn.on_request(method, self._recording(method, handler))
        await self.conn.start()
        return self

    def _recording(self, method: str, handler: Callable[[Any], Any]) -> Callable[[Any], Any]:
        async def wrapped(params: Any) -> Any:
            self.calls.append((method, params))
            self._changed.set()
            return await handler(params)

        return wrapped

    # -- notifications

    def _on_update(self, params: Any) -> None:
        schema.SessionNotification.model_validate(params)  # exact ACP v1 shapes
        self.updates.append(params)
        self._changed.set()

    async def wait_for(self, pred: Callable[[], Any], timeout: float = 10.0) -> Any:
        async def loop() -> Any:
            while True:
                value = pred()
                if value:
                    return value
                self._changed.clear()
                await self._changed.wait()

        return await asyncio.wait_for(loop(), timeout)

    def kinds(self, sid: str | None = None) -> list[str]:
        return [u["update"]["sessionUpdate"] for u in self.updates if sid is None or u["sessionId"] == sid]

    def of(self, kind: str, sid: str | None = None) -> list[dict[str, Any]]:
        return [u["update"] for u in self.updates if u["update"]["sessionUpdate"] == kind and (sid is None or u["sessionId"] == sid)]

    def text(self, sid: str | None = None, kind: str = "agent_message_chunk") -> str:
        return "".join(u["content"]["text"] for u in self.of(kind, sid))

    # -- requests to the agent

    async def initialize(self) -> dict[str, Any]:
        result = await self.conn.request(
            "initialize",
            {"protocolVersion": 1, "clientCapabilities": self.caps, "clientInfo": {"name": "pytest", "version": "0"}},
            timeout=10,
        )
        schema.InitializeResponse.model_validate(result)
        return result

    async def new_session(self, cwd: Path) -> dict[str, Any]:
        result = await self.conn.request("session/new", {"cwd": str(cwd), "mcpServers": []}, timeout=10)
        schema.NewSessionResponse.model_validate(result)
        return result

    async def prompt(self, sid: str, text: str, timeout: float = 15.0) -> dict[str, Any]:
        result = await self.conn.request(
            "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": text}]}, timeout=timeout
        )
        schema.PromptResponse.model_validate(result)
        return result

    async def close(self) -> None:
        for proc in self._terms.values():
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        # Each terminal's output read to its end, and its transport closed while the loop runs
        # (one left to the garbage collector closed its pipe on a closed loop: an unraisable
        # exception pytest reported under a later test).
        readers = list(self._term_readers.values())
        if readers:
            await asyncio.wait(readers, timeout=10)
        for proc in self._terms.values():
            proc._transport.close()  # type: ignore[attr-defined] # (asyncio's Process has no public close)
        await self.conn.close()
        # The agent must exit by itself once its stdin closes (within the grace period).
        assert self.transport.exited.done(), "the demo agent process is still running"
        assert self.transport.exited.result() == 0, self.transport.stderr.text()
        assert self.conn.noise_count == 0, "the agent wrote non-protocol lines on stdout"

    # -- client services

    async def _permission(self, params: Any) -> Any:
        schema.RequestPermissionRequest.model_validate(params)
        self.permission_asked.set()
        if self.permission_kind is None:
            return {"outcome": {"outcome": "cancelled"}}
        option = next(o for o in params["options"] if o["kind"] == self.permission_kind)
        return {"outcome": {"outcome": "selected", "optionId": option["optionId"]}}

    async def _read(self, params: Any) -> Any:
        schema.ReadTextFileRequest.model_validate(params)
        path = Path(params["path"])
        if not path.exists():
            raise RpcError(RESOURCE_NOT_FOUND, f"no such file: {path}")
        lines = path.read_text().splitlines(keepends=True)
        start = (params.get("line") or 1) - 1
        limit = params.get("limit") or len(lines)
        return {"content": "".join(lines[start : start + limit])}

    async def _write(self, params: Any) -> Any:
        schema.WriteTextFileRequest.model_validate(params)
        Path(params["path"]).write_text(params["content"])
        return {}

    async def _term_create(self, params: Any) -> Any:
        schema.CreateTerminalRequest.model_validate(params)
        proc = await asyncio.create_subprocess_exec(
            params["command"], *params.get("args", []), cwd=params.get("cwd"),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        )
        tid = f"term-{len(self._terms)}"
        self._terms[tid] = proc
        self._term_out[tid] = b""

        async def read() -> None:
            assert proc.stdout is not None
            while data := await proc.stdout.read(4096):
                self._term_out[tid] += data

        self._term_readers[tid] = asyncio.create_task(read())
        return {"terminalId": tid}

    async def _term_wait(self, params: Any) -> Any:
        code = await self._terms[params["terminalId"]].wait()
        await self._term_readers[params["terminalId"]]
        return {"exitCode": code, "signal": None}

    async def _term_output(self, params: Any) -> Any:
        tid = params["terminalId"]
        proc = self._terms[tid]
        out: dict[str, Any] = {"output": self._term_out[tid].decode(), "truncated": False}
        if proc.returncode is not None:
            out["exitStatus"] = {"exitCode": proc.returncode, "signal": None}
        return out

    async def _term_release(self, params: Any) -> Any:
        proc = self._terms[params["terminalId"]]
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        return {}


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    d = tmp_path / "state"
    d.mkdir()
    return d


@pytest.fixture
def cwd(tmp_path: Path) -> Path:
    d = tmp_path / "project"
    d.mkdir()
    return d


@pytest.fixture
async def client(state_dir: Path):
    c = await Client(state_dir).start()
    await c.initialize()
    try:
        yield c
    finally:
        await c.close()


async def _session(client: Client, cwd: Path) -> str:
    return (await client.new_session(cwd))["sessionId"]


# -- tests ----------------------------------------------------------------------


async def test_initialize_and_new_session(state_dir: Path, cwd: Path) -> None:
    c = await Client(state_dir).start()
    try:
        init = await c.initialize()
        assert init["protocolVersion"] == 1
        assert "script" in init["agentInfo"]["title"] and "no model" in init["agentInfo"]["title"]
        caps = init["agentCapabilities"]
        assert caps["loadSession"] is True
        assert caps["sessionCapabilities"]["list"] == {} and caps["sessionCapabilities"]["resume"] == {}
        assert caps["promptCapabilities"]["embeddedContext"] is True
        assert caps["promptCapabilities"]["image"] is False
        assert init["authMethods"] == []

        new = await c.new_session(cwd)
        sid = new["sessionId"]
        modes = new["modes"]
        assert modes["currentModeId"] in {m["id"] for m in modes["availableModes"]}
        assert {"ask", "code", "plan"} <= {m["id"] for m in modes["availableModes"]}
        model = next(o for o in new["configOptions"] if o["category"] == "model")
        assert {o["value"] for o in model["options"]} == {"demo-fast", "demo-thorough"}
        commands = await c.wait_for(lambda: c.of("available_commands_update", sid))
        names = {cmd["name"] for cmd in commands[0]["availableCommands"]}
        assert {"help", "tour", "plan", "diff", "shell", "files", "permission", "think", "long"} <= names
        assert (state_dir / f"{sid}.json").exists()

        with pytest.raises(RpcError) as err:
            await c.conn.request("no/such_method", {}, timeout=5)
        assert err.value.code == METHOD_NOT_FOUND
        with pytest.raises(RpcError) as err:
            await c.prompt("demo-nope", "hello")
        assert err.value.code == INVALID_PARAMS
    finally:
        await c.close()


async def test_hello_help_and_echo(client: Client, cwd: Path) -> None:
    sid = await _session(client, cwd)
    result = await client.prompt(sid, "Hello!")
    assert result["stopReason"] == "end_turn"
    assert "a script" in client.text(sid)
    assert client.of("session_info_update", sid)[0]["title"] == "Hello!"
    assert client.kinds(sid)[-1] == "usage_update"  # sent before the prompt's answer

    n = len(client.updates)
    await client.prompt(sid, "/help")
    help_text = "".join(u["update"]["content"]["text"] for u in client.updates[n:] if u["update"]["sessionUpdate"] == "agent_message_chunk")
    assert "`tour`" in help_text and "`permission`" in help_text

    n = len(client.updates)
    await client.prompt(sid, "what is the weather?")
    echo = "".join(u["update"]["content"]["text"] for u in client.updates[n:] if u["update"]["sessionUpdate"] == "agent_message_chunk")
    assert "what is the weather?" in echo and "script" in echo and "`hello`" in echo


async def test_long_markdown_in_many_chunks(client: Client, cwd: Path) -> None:
    sid = await _session(client, cwd)
    assert (await client.prompt(sid, "long"))["stopReason"] == "end_turn"
    chunks = [u["content"]["text"] for u in client.of("agent_message_chunk", sid)]
    assert len(chunks) > 100
    assert all(1 <= len(c) <= 20 for c in chunks)
    assert "".join(chunks) == demo_agent.LONG_MARKDOWN
    for needle in ("\n# ", "\n## ", "```python", "| word", "\n- "):
        assert needle in "\n" + demo_agent.LONG_MARKDOWN


async def test_think_streams_thoughts(client: Client, cwd: Path) -> None:
    sid = await _session(client, cwd)
    await client.prompt(sid, "think")
    assert len(client.of("agent_thought_chunk", sid)) > 3
    assert client.text(sid, "agent_thought_chunk") == demo_agent.THOUGHT
    kinds = client.kinds(sid)
    assert kinds.index("agent_thought_chunk") < kinds.index("agent_message_chunk")


async def test_plan_progresses(client: Client, cwd: Path) -> None:
    sid = await _session(client, cwd)
    await client.prompt(sid, "plan")
    plans = [[e["status"] for e in p["entries"]] for p in client.of("plan", sid)]
    n = len(demo_agent.PLAN_STEPS)
    assert plans[0] == ["pending"] * n
    assert plans[-1] == ["completed"] * n
    for i in range(n):
        assert any(p[i] == "in_progress" for p in plans)
    order = {"pending": 0, "in_progress": 1, "completed": 2}
    for before, after in itertools.pairwise(plans):
        assert all(order[a] >= order[b] for a, b in zip(after, before))


async def test_tool_calls_with_diff(client: Client, cwd: Path) -> None:
    sid = await _session(client, cwd)
    await client.prompt(sid, "tools")
    starts = client.of("tool_call", sid)
    assert {"read", "search", "edit", "fetch"} <= {s["kind"] for s in starts}
    for start in starts:
        assert start["status"] == "pending" and "rawInput" in start
        statuses = [u["status"] for u in client.of("tool_call_update", sid) if u["toolCallId"] == start["toolCallId"] and "status" in u]
        assert statuses[0] == "in_progress" and statuses[-1] in {"completed", "failed"}
    edit = next(s for s in starts if s["kind"] == "edit")
    final = [u for u in client.of("tool_call_update", sid) if u["toolCallId"] == edit["toolCallId"] and "content" in u][-1]
    diff = final["content"][0]
    assert diff["type"] == "diff" and os.path.isabs(diff["path"])
    assert diff["oldText"] and diff["newText"] and diff["oldText"] != diff["newText"]
    assert all(os.path.isabs(loc["path"]) for s in starts for loc in s.get("locations", []))
    assert not (cwd / "demo").exists()  # simulated: nothing touched


async def test_shell_uses_bash_argv_and_terminal_content(client: Client, cwd: Path) -> None:
    sid = await _session(client, cwd)
    assert (await client.prompt(sid, "shell"))["stopReason"] == "end_turn"
    methods = [m for m, _ in client.calls]
    assert methods[:3] == ["terminal/create", "terminal/wait_for_exit", "terminal/output"]
    await client.wait_for(lambda: "terminal/release" in [m for m, _ in client.calls])
    create = client.calls[0][1]
    assert create["command"] == "/bin/bash"
    assert create["args"][0] == "-c" and len(create["args"]) == 2
    assert create["cwd"] == str(cwd) and create["sessionId"] == sid
    tid = next(u for u in client.of("tool_call_update", sid) if u.get("content"))["content"][0]
    assert tid == {"type": "terminal", "terminalId": "term-0"}
    call = client.of("tool_call", sid)[0]
    assert call["kind"] == "execute"
    assert client.of("tool_call_update", sid)[-1]["status"] == "completed"
    assert "code 0" in client.text(sid) and "`done`" in client.text(sid)


async def test_files_write_then_read(client: Client, cwd: Path) -> None:
    sid = await _session(client, cwd)
    await client.prompt(sid, "files")
    assert [m for m, _ in client.calls] == ["fs/write_text_file", "fs/read_text_file"]
    assert (cwd / "acp-demo-notes.md").read_text() == demo_agent.FILE_NOTE
    assert "matches" in client.text(sid)
    assert [s["kind"] for s in client.of("tool_call", sid)] == ["edit", "read"]


async def test_without_client_capabilities_it_says_so(state_dir: Path, cwd: Path) -> None:
    c = await Client(state_dir, caps={}).start()
    try:
        await c.initialize()
        sid = await _session(c, cwd)
        await c.prompt(sid, "shell")
        await c.prompt(sid, "files")
        await c.prompt(sid, "permission")
        assert c.calls == [("session/request_permission", c.calls[0][1])]
        text = c.text(sid)
        assert "did not advertise `terminal: true`" in text
        assert "did not advertise `fs.readTextFile` or `fs.writeTextFile`" in text
        assert "nothing was written" in text
        assert not any(cwd.iterdir())
    finally:
        await c.close()


@pytest.mark.parametrize("kind", ["allow_once", "reject_once"])
async def test_permission_allow_and_reject(client: Client, cwd: Path, kind: str) -> None:
    client.permission_kind = kind
    sid = await _session(client, cwd)
    result = await client.prompt(sid, "permission")
    assert result["stopReason"] == "end_turn"
    request = next(p for m, p in client.calls if m == "session/request_permission")
    assert request["toolCall"]["kind"] == "edit"
    assert {o["kind"] for o in request["options"]} == {"allow_once", "allow_always", "reject_once", "reject_always"}
    target = cwd / "demo-permission.txt"
    last = client.of("tool_call_update", sid)[-1]
    if kind == "allow_once":
        assert target.read_text() == demo_agent.PERMISSION_TEXT
        assert last["status"] == "completed"
        assert "granted" in client.text(sid)
    else:
        assert not target.exists()
        assert last["status"] == "failed"
        assert "rejected" in client.text(sid)


async def test_permission_cancelled_outcome_ends_cancelled(client: Client, cwd: Path) -> None:
    client.permission_kind = None
    sid = await _session(client, cwd)
    assert (await client.prompt(sid, "permission"))["stopReason"] == "cancelled"
    assert not (cwd / "demo-permission.txt").exists()


async def test_cancel_mid_slow(client: Client, cwd: Path) -> None:
    sid = await _session(client, cwd)
    turn = asyncio.create_task(client.prompt(sid, "slow", timeout=30))
    await client.wait_for(lambda: len(client.of("agent_message_chunk", sid)) >= 4)
    client.conn.notify("session/cancel", {"sessionId": sid})
    result = await asyncio.wait_for(turn, 60)
    assert result["stopReason"] == "cancelled"
    assert len(client.of("agent_message_chunk", sid)) < 50  # of ~100: it stopped, not ran out
    # the session is usable again
    assert (await client.prompt(sid, "hello"))["stopReason"] == "end_turn"


async def test_cancel_while_waiting_for_permission(client: Client, cwd: Path) -> None:
    withdrawn = asyncio.Event()

    async def hang(params: Any) -> Any:
        client.permission_asked.set()
        try:
            await asyncio.Event().wait()  # a person who never clicks
        except asyncio.CancelledError:
            withdrawn.set()  # the agent sent $/cancel_request
            raise

    client.conn.on_request("session/request_permission", hang)
    sid = await _session(client, cwd)
    turn = asyncio.create_task(client.prompt(sid, "permission"))
    await asyncio.wait_for(client.permission_asked.wait(), 5)
    client.conn.notify("session/cancel", {"sessionId": sid})
    assert (await asyncio.wait_for(turn, 3))["stopReason"] == "cancelled"
    await asyncio.wait_for(withdrawn.wait(), 3)
    assert client.of("tool_call_update", sid)[-1]["status"] == "failed"
    assert not (cwd / "demo-permission.txt").exists()


async def test_cancel_mid_shell_releases_the_terminal(client: Client, cwd: Path) -> None:
    sid = await _session(client, cwd)
    turn = asyncio.create_task(client.prompt(sid, "shell"))
    await client.wait_for(lambda: "terminal/wait_for_exit" in [m for m, _ in client.calls])
    client.conn.notify("session/cancel", {"sessionId": sid})
    assert (await asyncio.wait_for(turn, 3))["stopReason"] == "cancelled"
    await client.wait_for(lambda: "terminal/release" in [m for m, _ in client.calls], timeout=3)
    await asyncio.wait_for(client._terms["term-0"].wait(), 3)  # released = killed
    assert client.of("tool_call_update", sid)[-1]["status"] == "failed"  # no call left in flight


async def test_refuse_and_fail(client: Client, cwd: Path) -> None:
    sid = await _session(client, cwd)
    assert (await client.prompt(sid, "refuse"))["stopReason"] == "refusal"
    with pytest.raises(RpcError) as err:
        await client.prompt(sid, "fail")
    assert err.value.code == INTERNAL_ERROR


async def test_modes_and_config_options(client: Client, cwd: Path, state_dir: Path) -> None:
    sid = await _session(client, cwd)
    assert await client.conn.request("session/set_mode", {"sessionId": sid, "modeId": "plan"}, timeout=5) == {}
    update = await client.wait_for(lambda: client.of("current_mode_update", sid))
    assert update[0]["currentModeId"] == "plan"

    result = await client.conn.request(
        "session/set_config_option", {"sessionId": sid, "configId": "model", "value": "demo-thorough"}, timeout=5
    )
    schema.SetSessionConfigOptionResponse.model_validate(result)
    assert next(o for o in result["configOptions"] if o["id"] == "model")["currentValue"] == "demo-thorough"
    upd = await client.wait_for(lambda: client.of("config_option_update", sid))
    assert next(o for o in upd[0]["configOptions"] if o["id"] == "model")["currentValue"] == "demo-thorough"

    await client.conn.request("session/set_model", {"sessionId": sid, "modelId": "demo-fast"}, timeout=5)
    await client.wait_for(lambda: len(client.of("config_option_update", sid)) >= 2)
    upd = client.of("config_option_update", sid)
    assert next(o for o in upd[1]["configOptions"] if o["id"] == "model")["currentValue"] == "demo-fast"

    with pytest.raises(RpcError) as err:
        await client.conn.request("session/set_mode", {"sessionId": sid, "modeId": "yolo"}, timeout=5)
    assert err.value.code == INVALID_PARAMS
    with pytest.raises(RpcError) as err:
        await client.conn.request("session/set_config_option", {"sessionId": sid, "configId": "model", "value": "gpt"}, timeout=5)
    assert err.value.code == INVALID_PARAMS

    await client.conn.request("session/set_config_option", {"sessionId": sid, "configId": "thinking", "value": "brief"}, timeout=5)
    n = len(client.updates)
    await client.prompt(sid, "hello")
    kinds = [u["update"]["sessionUpdate"] for u in client.updates[n:]]
    assert "agent_thought_chunk" in kinds and "`plan`" in client.text(sid)


async def test_load_list_resume_in_new_processes(state_dir: Path, cwd: Path, tmp_path: Path) -> None:
    first = await Client(state_dir).start()
    try:
        await first.initialize()
        sid = await _session(first, cwd)
        await first.prompt(sid, "hello")
        await first.prompt(sid, "echo second message")
        await first.conn.request("session/set_mode", {"sessionId": sid, "modeId": "ask"}, timeout=5)
        expected = [("user", "hello"), ("agent", None), ("user", "echo second message"), ("agent", "second message\n")]
        greeting = first.text(sid).replace("second message\n", "")
        other = await first.new_session(tmp_path)
    finally:
        await first.close()

    second = await Client(state_dir).start()
    try:
        await second.initialize()
        listed = await second.conn.request("session/list", {"cwd": str(cwd)}, timeout=5)
        schema.ListSessionsResponse.model_validate(listed)
        assert [s["sessionId"] for s in listed["sessions"]] == [sid]
        assert listed["sessions"][0]["title"] == "hello"
        everything = await second.conn.request("session/list", {}, timeout=5)
        assert {s["sessionId"] for s in everything["sessions"]} == {sid, other["sessionId"]}

        loaded = await second.conn.request("session/load", {"sessionId": sid, "cwd": str(cwd), "mcpServers": []}, timeout=5)
        schema.LoadSessionResponse.model_validate(loaded)
        assert loaded["modes"]["currentModeId"] == "ask"
        replay = [(("user" if u["sessionUpdate"] == "user_message_chunk" else "agent"), u["content"]["text"])
                  for u in [x["update"] for x in second.updates if x["update"]["sessionUpdate"].endswith("message_chunk")]]
        assert len(replay) == 4  # whole messages, one chunk each
        expected[1] = ("agent", greeting)
        assert replay == expected
        # the session lives on in the new process
        assert (await second.prompt(sid, "hi"))["stopReason"] == "end_turn"

        with pytest.raises(RpcError) as err:
            await second.conn.request("session/load", {"sessionId": "demo-" + "0" * 32, "cwd": str(cwd), "mcpServers": []}, timeout=5)
        assert err.value.code == RESOURCE_NOT_FOUND
        with pytest.raises(RpcError) as err:
            await second.conn.request("session/load", {"sessionId": "../../etc/passwd", "cwd": str(cwd), "mcpServers": []}, timeout=5)
        assert err.value.code == INVALID_PARAMS
    finally:
        await second.close()

    third = await Client(state_dir).start()
    try:
        await third.initialize()
        resumed = await third.conn.request("session/resume", {"sessionId": sid, "cwd": str(cwd)}, timeout=5)
        schema.ResumeSessionResponse.model_validate(resumed)
        assert resumed["modes"]["currentModeId"] == "ask"
        assert not third.of("user_message_chunk") and not third.of("agent_message_chunk")
        assert (await third.prompt(sid, "hello"))["stopReason"] == "end_turn"
        await third.conn.request("session/delete", {"sessionId": sid}, timeout=5)
        assert not (state_dir / f"{sid}.json").exists()
    finally:
        await third.close()


async def test_tour(client: Client, cwd: Path) -> None:
    sid = await _session(client, cwd)
    result = await client.prompt(sid, "tour", timeout=30)
    assert result["stopReason"] == "end_turn"
    kinds = set(client.kinds(sid))
    assert {"agent_message_chunk", "agent_thought_chunk", "plan", "tool_call", "tool_call_update", "usage_update"} <= kinds
    methods = {m for m, _ in client.calls}
    assert {"terminal/create", "fs/write_text_file", "fs/read_text_file", "session/request_permission"} <= methods
    assert client.of("plan", sid)[-1]["entries"][-1]["status"] == "completed"
    assert (cwd / "demo-permission.txt").exists()


async def test_allow_always_is_remembered(client: Client, cwd: Path) -> None:
    client.permission_kind = "allow_always"
    sid = await _session(client, cwd)
    await client.prompt(sid, "permission")
    (cwd / "demo-permission.txt").unlink()
    await client.prompt(sid, "/permission")
    assert [m for m, _ in client.calls].count("session/request_permission") == 1
    assert (cwd / "demo-permission.txt").exists()
    assert "not asking again" in client.text(sid)


async def test_embedded_resources_are_acknowledged(client: Client, cwd: Path) -> None:
    sid = await _session(client, cwd)
    prompt = [
        {"type": "text", "text": "Hello? "},
        {"type": "resource", "resource": {"uri": "file:///x/notes.md", "text": "abc", "mimeType": "text/markdown"}},
        {"type": "resource_link", "uri": "file:///x/data.csv", "name": "data.csv"},
    ]
    result = await client.conn.request("session/prompt", {"sessionId": sid, "prompt": prompt}, timeout=10)
    assert result["stopReason"] == "end_turn"
    text = client.text(sid)
    assert "file:///x/notes.md" in text and "file:///x/data.csv" in text and "a script" in text


async def test_agent_exits_when_stdin_closes_mid_turn(state_dir: Path, cwd: Path) -> None:
    c = await Client(state_dir).start()
    await c.initialize()
    sid = await _session(c, cwd)
    turn = asyncio.create_task(c.prompt(sid, "slow", timeout=30))
    await c.wait_for(lambda: len(c.of("agent_message_chunk", sid)) >= 2)
    await c.close()  # asserts a clean exit within the grace period
    with pytest.raises(ConnectionClosed):
        await turn
    # what was said so far is saved with the session
    saved = (state_dir / f"{sid}.json").read_text()
    assert "Streaming 100 chunks" in saved
