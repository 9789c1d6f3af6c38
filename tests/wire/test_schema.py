"""Every message the client sends, recorded on the wire and checked against the ACP schema."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from acp_kernel.client.content import embedded_resource, resource_link, text_block
from acp_kernel.client.host import ClientSettings
from acp_kernel.services.events import ElicitationCompleted, ElicitationPrompt, PermissionPrompt, UrlElicitationPrompt
from acp_kernel.client.session import Client

from ..conftest import scripted_spec
from .recording import NOTIFICATIONS, RECEIVED, REQUESTS, RESPONSES, UNSTABLE, check, load
from .test_modes_models import MODE_OPTION, MODEL_OPTION
from .test_session_life import LIFE

HOSTILE = "<img src=x onerror=alert(1)> `span\nacross` a line"
PACKAGE = Path(__file__).resolve().parents[2] / "acp_kernel"


def req(method: str, params: dict) -> dict:
    return {"request": {"method": method, "params": params}}


def scenario(ws: Path, record: Path) -> dict:
    term = {"sessionId": "$SID", "terminalId": "$TERM"}
    ask = req("session/request_permission", {"sessionId": "$SID", "toolCall": {
        "toolCallId": "tc1", "title": f"Run {HOSTILE}", "kind": "execute"}, "options": [
        {"optionId": "yes", "name": "Yes", "kind": "allow_once"},
        {"optionId": "no", "name": "No", "kind": "reject_once"}]})
    return {
        "record": str(record),
        "load": True,
        "resume": True,
        "init": {"agentCapabilities": {
            "loadSession": True,
            "promptCapabilities": {"image": True, "audio": False, "embeddedContext": True},
            "sessionCapabilities": {"list": {}, "resume": {}}},
            "authMethods": [{"id": "token", "name": "Token"}]},
        "responses": {"authenticate": {}, "session/list": {"sessions": []}},
        "config_options": [MODE_OPTION, MODEL_OPTION,
                           {"id": "fast", "name": "Fast", "type": "boolean", "currentValue": False}],
        "modes": {"currentModeId": "build", "availableModes": [{"id": "build", "name": "Build"},
                                                               {"id": "legacy", "name": "Legacy"}]},
        "models": {"currentModelId": "m1", "availableModels": [{"modelId": "m1", "name": "One"}]},
        "prompts": {
            "work": [
                ask,
                req("fs/read_text_file", {"sessionId": "$SID", "path": str(ws / "in.txt"), "line": 1, "limit": 2}),
                req("fs/read_text_file", {"sessionId": "$SID", "path": str(ws / "missing.txt")}),
                req("fs/write_text_file", {"sessionId": "$SID", "path": str(ws / "out.txt"), "content": HOSTILE}),
                req("terminal/create", {"sessionId": "$SID", "command": "/bin/sh", "args": ["-c", "echo hi"],
                                        "cwd": str(ws), "outputByteLimit": 1000}),
                # $TERM: the id the client gave the terminal just created.
                req("terminal/wait_for_exit", term),
                req("terminal/output", term),
                req("terminal/kill", term),
                req("terminal/release", term),
                req("elicitation/create", {"sessionId": "$SID", "mode": "form", "message": "Name?",
                                           "requestedSchema": {"type": "object",
                                                               "properties": {"name": {"type": "string"}},
                                                               "required": ["name"]}}),
                req("elicitation/create", {"sessionId": "$SID", "mode": "form", "message": "Again?",
                                           "requestedSchema": {"type": "object", "properties": {}}}),
                req("elicitation/create", {"sessionId": "$SID", "mode": "url", "elicitationId": "w1",
                                           "url": "https://example.com/signin?x=1", "message": HOSTILE}),
                {"send": {"jsonrpc": "2.0", "method": "elicitation/complete", "params": {"elicitationId": "w1"}}},
            ],
            "hold": [ask, {"wait_cancel": True}],
        },
    }


async def test_every_client_message_matches_the_schema(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "in.txt").write_text("one\ntwo\nthree\n")
    record = tmp_path / "wire.jsonl"
    spec = scenario(ws, record)
    client = await Client(scripted_spec(spec), cwd=str(ws),
                          settings=ClientSettings(permissions="ask", url_elicitation=True), interactive=True).start()
    answer = {"on": True}

    def person(event: Any) -> None:
        if isinstance(event, PermissionPrompt) and answer["on"]:
            event.allow()
        elif isinstance(event, ElicitationPrompt):
            if event.message == "Name?":
                event.accept({"name": HOSTILE})
            else:
                event.decline()
        elif isinstance(event, UrlElicitationPrompt):
            event.open()

    try:
        await client.authenticate("token")
        session = await client.new_session()
        session.links = True  # as the controller sets it for a notebook's turn widget
        turn = session.begin([text_block("work"), resource_link(str(ws / "in.txt")),
                              embedded_resource("file:///tmp/a\nb.py", HOSTILE, "text/x-python"),
                              {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}])
        turn.subscribe(person)
        await asyncio.wait_for(session.finish(turn), 30)
        assert turn.stop_reason == "end_turn", turn
        assert turn.text.count("RESULT") + turn.text.count("ERROR") == 12, turn.text
        assert [type(e) for e in turn.events if isinstance(e, (UrlElicitationPrompt, ElicitationCompleted))] == [
            UrlElicitationPrompt, ElicitationCompleted]
        assert (ws / "out.txt").read_text() == HOSTILE

        await session.set_mode("plan")      # a config option's value
        await session.set_mode("legacy")    # only in the modes state
        await session.set_model("anthropic/opus")
        await session.set_model("m1")       # only in the unstable models state
        await session.set_config_option("fast", True)

        answer["on"] = False
        turn = session.begin("hold")
        turn.subscribe(lambda e: isinstance(e, PermissionPrompt) and asyncio.get_running_loop().create_task(
            session.cancel()))
        await asyncio.wait_for(session.finish(turn), 30)
        assert turn.stop_reason == "cancelled"

        await client.list_sessions(str(ws))
        await client.load_session(session.id, str(ws), resume=False)
        client.sessions.pop(session.id, None)
        await client.load_session(session.id, str(ws), resume=True)
    finally:
        await client.close()

    sent = load(record)
    checked = [(s.kind, s.method, check(s)) for s in sent]
    methods = {(kind, method) for kind, method, _ in checked}
    # The session drove every kind of message the client can send (a session's
    # end, deletion and logout: test_session_life.py).
    assert {("request", m) for m in REQUESTS if m not in LIFE} <= methods
    assert {("notification", m) for m in NOTIFICATIONS} <= methods
    assert {("response", m) for m in RESPONSES} <= methods
    assert ("request", "session/set_model") in methods
    models = {name for _, _, name in checked}
    assert {"SetSessionConfigOptionBooleanRequest", "SetSessionConfigOptionSelectRequest", "Error",
            "AcceptElicitationResponse", "DeclineElicitationResponse"} <= models
    # Both permission outcomes went out: selected, and cancelled by the cancel.
    outcomes = [s.message["result"]["outcome"]["outcome"] for s in sent
                if s.kind == "response" and s.method == "session/request_permission"]
    assert outcomes == ["selected", "cancelled"]


def test_every_method_the_package_names_has_a_schema_entry():
    """Every ACP method named in the package (what the client sends, and what
    it answers) is in the tables above, so a new one fails here until the
    recorded session covers it."""
    pattern = re.compile(r"""["']((?:session|fs|terminal|elicitation)/[a-z_]+|initialize|authenticate|logout)["']""")
    used: set[str] = set()
    for path in [*PACKAGE.rglob("*.py"), *(PACKAGE.parent / "magics").rglob("*.py")]:
        if "demo" in path.relative_to(PACKAGE.parent).parts:
            continue  # the demo agent and CLI (acp_kernel/demo/) are the other side
        used |= set(pattern.findall(path.read_text()))
    assert {"session/prompt", "fs/read_text_file", "terminal/create"} <= used, used
    known = set(REQUESTS) | set(NOTIFICATIONS) | set(UNSTABLE) | set(RESPONSES) | set(RECEIVED)
    assert used <= known, f"not in the schema tables: {sorted(used - known)}"


@pytest.mark.parametrize("bad", [
    {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/", "mcpServers": [], "extra": 1}},
    {"jsonrpc": "2.0", "id": 1, "method": "session/prompt", "params": {"sessionId": "s", "prompt": "hi"}},
    {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "1"}},
    {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": 5}},
    {"jsonrpc": "2.0", "id": 1, "method": "session/set_model", "params": {"sessionId": "s", "model": "x"}},
])
def test_the_check_catches_wrong_messages(bad):
    from .recording import Sent

    kind = "request" if "id" in bad else "notification"
    with pytest.raises((AssertionError, KeyError, ValidationError)):
        check(Sent(kind, bad["method"], bad))
