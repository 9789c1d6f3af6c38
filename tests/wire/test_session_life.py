"""A session's whole life on the wire (new with additional directories, a
prompt with a title update, close, resume, delete, logout), every message
the client sent checked against the ACP schema; and what the client sends
when the agent offers none of it."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

from acp_kernel.client.host import ClientSettings, Limits
from acp_kernel.client.session import Client
from acp_kernel.errors import AcpError

from ..conftest import scripted_spec
from .recording import check, load

#: The methods of a session's end and of signing out, driven here.
LIFE = {"session/close", "session/delete", "logout"}
#: A title is agent text: raw HTML, a code span across a line break, math delimiters, a newline.
TITLE = "<img src=x onerror=alert(1)> `a\nb` $x$ $$y$$ \\(z\\) second\nline"
WHEN = "2026-12-02T13:00:00Z"
OFFERS = {"loadSession": False,
          "sessionCapabilities": {"list": {}, "resume": {}, "close": {}, "delete": {}, "additionalDirectories": {}},
          "auth": {"logout": {}}}


def scenario(record: Path, offers: dict) -> dict:
    return {
        "record": str(record),
        "resume": True,
        "init": {"agentCapabilities": offers},
        "responses": {"session/list": {"sessions": []}, "session/close": {}, "session/delete": {}, "logout": {}},
        "prompt": [{"update": {"sessionUpdate": "session_info_update", "title": TITLE, "updatedAt": WHEN}},
                   {"chunk": "ok"}],
    }


async def test_a_sessions_whole_life_matches_the_schema(tmp_path):
    ws, lib, record = tmp_path / "ws", tmp_path / "lib", tmp_path / "wire.jsonl"
    ws.mkdir()
    lib.mkdir()
    client = await Client(scripted_spec(scenario(record, OFFERS)), cwd=str(ws),
                          settings=ClientSettings(extra_roots=[str(lib)])).start()
    try:
        session = await client.new_session()
        assert session.additional_directories == [str(lib)]
        turn = await asyncio.wait_for(session.prompt("hi"), 30)
        assert turn.stop_reason == "end_turn"
        assert (session.title, session.updated_at) == (TITLE, WHEN)
        assert await client.close_session(session.id) is None
        resumed = await client.load_session(session.id, str(ws))
        assert resumed.additional_directories == [str(lib)]
        try:
            await client.delete_session(session.id)
            raise AssertionError("deleting the open session was not refused")
        except AcpError as exc:
            assert "open here" in str(exc)
        other = await client.new_session()
        assert await client.close_session(resumed.id) is None
        await client.delete_session(session.id)
        await client.logout()
    finally:
        await client.close()  # closes `other` too

    sent = load(record)
    for s in sent:
        check(s)
    requests = [(s.method, s.message["params"]) for s in sent if s.kind == "request"]
    assert [m for m, _ in requests] == [
        "initialize", "session/new", "session/prompt", "session/close", "session/resume", "session/new",
        "session/close", "session/delete", "logout", "session/close"]
    params = dict(requests[1:6])
    for method in ("session/new", "session/resume"):
        assert params[method]["additionalDirectories"] == [str(lib)], params[method]
    closed = [p["sessionId"] for m, p in requests if m == "session/close"]
    assert closed == [session.id, session.id, other.id]
    assert requests[7][1] == {"sessionId": session.id}


async def test_nothing_is_sent_that_the_agent_does_not_offer(tmp_path):
    ws, lib, record = tmp_path / "ws", tmp_path / "lib", tmp_path / "wire.jsonl"
    ws.mkdir()
    lib.mkdir()
    offers = {"sessionCapabilities": {"resume": {}}}
    client = await Client(scripted_spec(scenario(record, offers)), cwd=str(ws),
                          settings=ClientSettings(extra_roots=[str(lib)])).start()
    try:
        session = await client.new_session()
        assert session.additional_directories == []
        assert await client.close_session(session.id) is None
        for call, says in ((client.delete_session(session.id), "does not delete sessions"),
                           (client.logout(), "does not offer logout")):
            try:
                await call
                raise AssertionError(says)
            except AcpError as exc:
                assert says in str(exc)
        await client.load_session(session.id, str(ws))
    finally:
        await client.close()
    requests = [json.loads(line) for line in record.read_text().splitlines()]
    methods = [r.get("method") for r in requests if "id" in r and "method" in r]
    assert methods == ["initialize", "session/new", "session/resume"]
    assert all("additionalDirectories" not in (r.get("params") or {}) for r in requests)


async def test_a_close_the_agent_fails_or_never_answers_is_said_and_passed(tmp_path):
    """The user's action goes on: an agent's error, or silence past
    ``limits.close_seconds``, is a returned note, and the client still closes."""
    record = tmp_path / "wire.jsonl"
    for broken, says in (({"errors": {"session/close": {"code": -32603, "message": "<b>no</b>"}}},
                          "session/close failed"),
                         ({"never_answer": ["session/close"]}, "limits.close_seconds")):
        spec = {**scenario(record, OFFERS), **broken}
        settings = ClientSettings(limits=Limits(close_seconds=0.2))
        client = await Client(scripted_spec(spec), cwd=str(tmp_path), settings=settings).start()
        try:
            session = await client.new_session()
            why = await asyncio.wait_for(client.close_session(session.id), 30)
            assert why is not None and says in why, why
            assert session.id not in client.sessions
            await client.new_session()
        finally:
            await asyncio.wait_for(client.close(), 30)  # the second close is bounded as well
        assert not client.alive


def test_the_cli_closes_its_session_at_the_end_of_the_run(tmp_path):
    """``acp-kernel prompt``: the config file's ``extra_roots`` go out as
    ``additionalDirectories``, and the run ends with ``session/close``."""
    ws, lib, record = tmp_path / "ws", tmp_path / "lib", tmp_path / "wire.jsonl"
    ws.mkdir()
    lib.mkdir()
    config = tmp_path / "acp_kernel.json"
    config.write_text(json.dumps({"extra_roots": [str(lib)]}))
    spec = scripted_spec(scenario(record, OFFERS))
    res = subprocess.run([sys.executable, "-m", "acp_kernel", "prompt", "--agent-command", shlex.join(spec.command),
                          "--cwd", str(ws), "hi"], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "ACP_KERNEL_CONFIG": str(config)})
    assert res.returncode == 0, res.stderr
    sent = load(record)
    for s in sent:
        check(s)
    requests = [(s.method, s.message["params"]) for s in sent if s.kind == "request"]
    assert [m for m, _ in requests] == ["initialize", "session/new", "session/prompt", "session/close"]
    assert requests[1][1]["additionalDirectories"] == [str(lib)]
    assert requests[3][1] == {"sessionId": requests[2][1]["sessionId"]}


async def test_trace_context_from_the_environment_goes_in_meta_and_a_malformed_one_does_not(tmp_path, monkeypatch):
    """ACP's _meta propagation: W3C traceparent, tracestate and baggage, from OpenTelemetry's
    environment carriers, at the root of params._meta of session/new and session/prompt."""
    parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    cases = [({"TRACEPARENT": parent, "TRACESTATE": "vendor=x", "BAGGAGE": "user=1"},
              {"traceparent": parent, "tracestate": "vendor=x", "baggage": "user=1"}),
             ({"TRACEPARENT": parent.upper(), "TRACESTATE": "vendor=x"}, None),  # upper-case hex is invalid
             ({"TRACEPARENT": "00-" + "0" * 32 + "-00f067aa0ba902b7-01"}, None),  # all-zero trace id
             ({"TRACEPARENT": parent, "TRACESTATE": "a=b\n<img src=x onerror=alert(1)>", "BAGGAGE": "x" * 9000},
              {"traceparent": parent})]
    for n, (env, want) in enumerate(cases):
        for key in ("TRACEPARENT", "TRACESTATE", "BAGGAGE"):
            monkeypatch.delenv(key, raising=False)
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        record = tmp_path / f"wire{n}.jsonl"
        client = await Client(scripted_spec({"record": str(record)}), cwd=str(tmp_path)).start()
        try:
            session = await client.new_session()
            assert (await asyncio.wait_for(session.prompt("hi"), 30)).stop_reason == "end_turn"
        finally:
            await client.close()
        sent = load(record)
        for s in sent:
            check(s)
        metas = {s.method: s.message["params"].get("_meta") for s in sent
                 if s.kind == "request" and s.method in ("session/new", "session/prompt")}
        assert metas == {"session/new": want, "session/prompt": want}, (env, metas)
