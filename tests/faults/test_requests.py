"""Agent->client requests that are wrong or hostile: invalid params, ``_meta``
that tries to override params, path traversal and symlink escapes, programs
that do not exist, session ids that do not exist. Library level, real pipes.

The scripted agent reports each answer as a chunk ``RESULT <json>`` or
``ERROR <json>`` (see ``conftest.answers``)."""

from __future__ import annotations

import pytest

from acp_kernel.protocol import proctree
from acp_kernel.client.host import ClientSettings

from .conftest import answers, notices, open_session

INVALID_PARAMS = -32602


def req(method: str, params) -> dict:
    return {"request": {"method": method, "params": params}}


def raw_req(method: str, **params) -> dict:
    return {"request_raw": {"method": method, **params}}


async def run(actions: list, tmp_path, **kwargs):
    """One turn of ``actions`` in a session whose cwd is ``tmp_path/ws``;
    returns (turn, answers); the client is closed, its processes gone."""
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    client, session = await open_session({"prompts": {"go": actions}}, cwd=str(ws), **kwargs)
    try:
        turn = await session.prompt("go")
        assert turn.stop_reason == "end_turn" and client.alive, turn
        got = answers(turn)
        assert len(got) == sum(1 for a in actions if "request" in a or "request_raw" in a), turn.text
        # the session still works after every bad request
        assert (await session.prompt("next")).stop_reason == "end_turn"
        return turn, got
    finally:
        await client.close()


async def test_invalid_params_get_minus_32602_with_a_message(tmp_path):
    actions = [
        req("fs/read_text_file", {"sessionId": "$SID"}),                       # no path
        req("fs/read_text_file", {"sessionId": "$SID", "path": 42}),
        req("fs/read_text_file", {"sessionId": "$SID", "path": "/x", "line": "one"}),
        req("fs/write_text_file", {"sessionId": "$SID", "path": str(tmp_path / "ws" / "a.txt")}),  # no content
        req("terminal/create", {"sessionId": "$SID", "command": 5}),
        req("terminal/create", {"sessionId": "$SID", "command": "echo", "args": "not a list"}),
        req("terminal/output", {"sessionId": "$SID"}),                          # no terminalId
        req("terminal/wait_for_exit", {"sessionId": "$SID", "terminalId": ["x"]}),
        req("session/request_permission", {"sessionId": "$SID", "options": "x"}),
        req("session/request_permission", {"sessionId": "$SID", "toolCall": 7, "options": []}),
        raw_req("fs/read_text_file", params=["$SID", "/etc/passwd"]),          # positional params
        raw_req("fs/read_text_file", params=None),
        raw_req("terminal/create"),                                             # params absent
        raw_req("fs/read_text_file", params="just a string"),
    ]
    turn, got = await run(actions, tmp_path)
    for (kind, err), action in zip(got, actions):
        assert kind == "ERROR", (action, err)
        assert err["code"] == INVALID_PARAMS, (action, err)
        assert len(err["message"]) > 10, err
    assert "path" in got[0][1]["message"] and "content" in got[3][1]["message"]
    assert "command" in got[4][1]["message"] and "terminalId" in got[6][1]["message"].replace("terminal_id", "terminalId")
    assert not (tmp_path / "ws" / "a.txt").exists()


async def test_meta_cannot_override_real_params(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "real.txt").write_text("the real file\n")
    outside = tmp_path / "outside.txt"
    outside.write_text("untouched\n")
    actions = [
        req("fs/read_text_file", {"sessionId": "$SID", "path": str(ws / "real.txt"),
                                  "_meta": {"path": "/etc/passwd", "sessionId": "other", "line": 5}}),
        req("fs/write_text_file", {"sessionId": "$SID", "path": str(ws / "new.txt"), "content": "mine",
                                   "_meta": {"path": str(outside), "content": "pwned"}}),
        req("terminal/create", {"sessionId": "$SID", "command": "echo", "args": ["real"],
                                "_meta": {"command": "rm", "args": ["-rf", str(ws)], "cwd": "/"}}),
    ]
    turn, got = await run(actions, tmp_path, settings=ClientSettings(permissions="allow-all"))  # the terminal runs
    assert got[0] == ("RESULT", {"content": "the real file\n"})
    assert got[1] == ("RESULT", {})
    assert (ws / "new.txt").read_text() == "mine" and outside.read_text() == "untouched\n"
    assert got[2][0] == "RESULT" and (ws / "real.txt").exists()


@pytest.mark.parametrize("policy", ["ask", "allow-all"])
async def test_traversal_and_symlink_escapes_are_refused(tmp_path, policy):
    ws = tmp_path / "ws"
    ws.mkdir()
    secret_dir = tmp_path / "secret"
    secret_dir.mkdir()
    secret = secret_dir / "key.txt"
    secret.write_text("TOP SECRET\n")
    (ws / "link").symlink_to(secret_dir)                # directory symlink out of the workspace
    (ws / "alias.txt").symlink_to(secret)               # file symlink out of the workspace
    (ws / "dangling").symlink_to(secret_dir / "new.txt")  # would create a file outside
    actions = [
        req("fs/read_text_file", {"sessionId": "$SID", "path": f"{ws}/../secret/key.txt"}),
        req("fs/read_text_file", {"sessionId": "$SID", "path": f"{ws}/link/key.txt"}),
        req("fs/read_text_file", {"sessionId": "$SID", "path": f"{ws}/alias.txt"}),
        req("fs/read_text_file", {"sessionId": "$SID", "path": "../secret/key.txt"}),
        req("fs/write_text_file", {"sessionId": "$SID", "path": f"{ws}/../secret/key.txt", "content": "x"}),
        req("fs/write_text_file", {"sessionId": "$SID", "path": f"{ws}/link/key.txt", "content": "x"}),
        req("fs/write_text_file", {"sessionId": "$SID", "path": f"{ws}/alias.txt", "content": "x"}),
        req("fs/write_text_file", {"sessionId": "$SID", "path": f"{ws}/dangling", "content": "x"}),
        req("fs/write_text_file", {"sessionId": "$SID", "path": f"{ws}/link/../../secret/new2.txt", "content": "x"}),
        req("fs/read_text_file", {"sessionId": "$SID", "path": f"{ws}/a\u0000b"}),
        req("fs/write_text_file", {"sessionId": "$SID", "path": f"{ws}/a\u0000b", "content": "x"}),
    ]
    turn, got = await run(actions, tmp_path, settings=ClientSettings(permissions=policy))
    for (kind, err), action in zip(got, actions):
        assert kind == "ERROR" and err["code"] == INVALID_PARAMS, (action, kind, err)
    messages = [err["message"] for _, err in got]
    assert all("outside the workspace" in m for m in messages[:3] + messages[4:9]), messages
    assert "really" in messages[1] and str(secret_dir) in messages[1]  # the symlink is named for what it is
    assert "absolute" in messages[3]
    assert "nul byte" in messages[9].lower() and "nul byte" in messages[10].lower()
    # everything intact, nothing created outside
    assert secret.read_text() == "TOP SECRET\n"
    assert sorted(p.name for p in secret_dir.iterdir()) == ["key.txt"]
    assert (ws / "alias.txt").is_symlink() and (ws / "dangling").is_symlink()
    assert "TOP SECRET" not in turn.text


async def test_terminal_create_for_a_program_that_does_not_exist(tmp_path):
    actions = [
        req("terminal/create", {"sessionId": "$SID", "command": "/no/such/program", "args": ["--x"]}),
        req("terminal/create", {"sessionId": "$SID", "command": "no-such-program-zz9"}),
        req("terminal/create", {"sessionId": "$SID", "command": "no-such-program-zz9 --flag | wc -l"}),
        req("terminal/create", {"sessionId": "$SID", "command": "echo", "args": ["x"], "cwd": "/no/such/dir"}),
        req("terminal/create", {"sessionId": "$SID", "command": "echo", "args": ["x"], "cwd": "relative/dir"}),
        req("terminal/create", {"sessionId": "$SID", "command": str(tmp_path / "ws")}),  # a directory
        req("terminal/create", {"sessionId": "$SID", "command": "   "}),
        req("terminal/output", {"sessionId": "$SID", "terminalId": "term-never"}),
        req("terminal/create", {"sessionId": "$SID", "command": "echo", "args": ["works"]}),
    ]
    turn, got = await run(actions, tmp_path, settings=ClientSettings(permissions="allow-all"))
    kinds = [k for k, _ in got]
    # a whole shell line runs through the shell (then fails inside it, with its exit status)
    assert kinds == ["ERROR", "ERROR", "RESULT"] + ["ERROR"] * 5 + ["RESULT"], got
    msgs = [e.get("message", "") for _, e in got]
    assert "/no/such/program" in msgs[0] and "not found" in msgs[0]
    assert "no-such-program-zz9" in msgs[1] and "not found" in msgs[1]
    assert "/no/such/dir" in msgs[3] and "absolute" in msgs[4] and "not found" in msgs[5] and "empty" in msgs[6]
    assert "term-never" in msgs[7]
    assert "/no/such/program" in notices(turn, "error")  # shown in the turn too


async def test_terminal_shell_line_with_missing_program_reports_its_exit(tmp_path):
    actions = [
        req("terminal/create", {"sessionId": "$SID", "command": "no-such-program-zz9 --flag; echo done"}),
        {"sleep": 0.5},
    ]
    ws = tmp_path / "ws"
    ws.mkdir()
    client, session = await open_session({"prompts": {"go": actions}}, cwd=str(ws),
                                         settings=ClientSettings(permissions="allow-all"))
    try:
        turn = await session.prompt("go")
        assert answers(turn)[0][0] == "RESULT"
        term = client.services.terminals.terminals()[0]
        await term.wait()
        out, _ = term.output()
        assert "no-such-program-zz9" in out and "not found" in out and "done" in out
        started = [e for e in turn.events if type(e).__name__ == "TerminalStarted"]
        assert started[0].via_shell and "shell line" in started[0].note  # shown: it ran through the shell
    finally:
        await client.close()


async def test_unknown_session_ids_are_named_in_the_error(tmp_path):
    bad = "sess-does-not-exist"
    actions = [
        req("fs/read_text_file", {"sessionId": bad, "path": "/etc/hostname"}),
        req("fs/write_text_file", {"sessionId": bad, "path": str(tmp_path / "ws" / "x"), "content": "x"}),
        req("terminal/create", {"sessionId": bad, "command": "echo", "args": ["x"]}),
        req("terminal/output", {"sessionId": bad, "terminalId": "t"}),
        req("terminal/release", {"sessionId": bad, "terminalId": "t"}),
        req("session/request_permission", {"sessionId": bad, "toolCall": {"toolCallId": "t1"}, "options": [
            {"optionId": "ok", "name": "OK", "kind": "allow_once"}]}),
        req("elicitation/create", {"sessionId": bad, "message": "name?", "mode": "form",
                                   "requestedSchema": {"type": "object", "properties": {}}}),
        req("fs/read_text_file", {"sessionId": 12345, "path": "/etc/hostname"}),
    ]
    turn, got = await run(actions, tmp_path)
    for (kind, err), action in zip(got[:-1], actions):
        assert kind == "ERROR" and err["code"] == INVALID_PARAMS, (action, err)
        assert repr(bad) in err["message"], err
    # a session id of the wrong type is invalid params, named by its field
    assert got[-1][1]["code"] == INVALID_PARAMS and "sessionId" in got[-1][1]["message"]
    assert not (tmp_path / "ws" / "x").exists()


async def test_terminal_ids_of_another_session_are_not_reachable(tmp_path):
    # A terminal created in this session, addressed with a wrong session id.
    actions = [
        req("terminal/create", {"sessionId": "$SID", "command": "sleep", "args": ["600"]}),
    ]
    ws = tmp_path / "ws"
    ws.mkdir()
    client, session = await open_session({"prompts": {"go": actions}}, cwd=str(ws),
                                         settings=ClientSettings(permissions="allow-all"))
    try:
        turn = await session.prompt("go")
        tid = answers(turn)[0][1]["terminalId"]
        term = client.services.terminals.terminals()[0]
        other = await client.new_session()
        client2_actions = [req("terminal/kill", {"sessionId": other.id, "terminalId": tid})]
        # reuse the same agent: it answers prompts per text; send the kill from the second session
        from acp_kernel.errors import RpcError

        with pytest.raises(RpcError) as info:
            await client.services.terminals.kill({"sessionId": other.id, "terminalId": tid})
        assert tid in info.value.message and info.value.code == -32002
        assert term.running
        del client2_actions
    finally:
        await client.close()
    assert not proctree.alive(term.pid)


async def test_unknown_methods_and_handler_crashes_answer_once(tmp_path):
    actions = [
        req("fs/delete_everything", {"sessionId": "$SID"}),
        req("_vendor/extension", {}),
        raw_req("", params={}),
    ]
    turn, got = await run(actions, tmp_path)
    assert [e["code"] for _, e in got] == [-32601, -32601, -32601]
    assert "fs/delete_everything" in got[0][1]["message"]
