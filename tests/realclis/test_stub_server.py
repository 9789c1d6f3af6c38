"""The stub model server answers each API shape with the scripted reply and logs without secrets."""

from __future__ import annotations

import json
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from stub_model_server import (MAX_WAITS, StubServer, last_user_text, match_tool, plan, tool_marker, wait_calls,  # noqa: E402
                               tool_names, tool_result)


def _post(url: str, body: dict) -> str:
    req = urllib.request.Request(url, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json", "x-api-key": "sk-secret"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return resp.read().decode()


def _sse_text(raw: str, pick) -> str:
    out = []
    for line in raw.splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            out.append(pick(json.loads(line[6:])) or "")
    return "".join(out)


def test_each_api_streams_the_scripted_reply_and_logs_no_secret(tmp_path):
    log = tmp_path / "log.jsonl"
    with StubServer(0, log) as stub:
        anth = _post(stub.url + "/v1/messages", {"model": "m", "stream": True, "messages": [
            {"role": "user", "content": [{"type": "text", "text": "<system-reminder>x</system-reminder>"},
                                         {"type": "text", "text": "hello <b>there</b>"}]}]})
        chat = _post(stub.url + "/v1/chat/completions", {"model": "m", "stream": True,
                                                         "messages": [{"role": "user", "content": "two\nlines"}]})
        resp = _post(stub.url + "/v1/responses", {"model": "m", "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "codex hi"}]}]})
        gem = _post(stub.url + "/v1beta/models/g:streamGenerateContent?alt=sse",
                    {"contents": [{"role": "user", "parts": [{"text": "gem hi"}]}]})
        # the handler logs the stream's end just after its last write: wait for the 4th entry
        deadline = time.monotonic() + 5
        while log.read_text().count('"stream_end"') < 4 and time.monotonic() < deadline:
            time.sleep(0.02)
    assert _sse_text(anth, lambda d: d.get("delta", {}).get("text")) == "stub reply to: hello <b>there</b>"
    assert _sse_text(chat, lambda d: (d["choices"] or [{}])[0].get("delta", {}).get("content")) \
        == "stub reply to: two lines"
    assert _sse_text(resp, lambda d: d.get("delta") if d["type"] == "response.output_text.delta" else "") \
        == "stub reply to: codex hi"
    assert '"type": "response.completed"' in resp
    assert _sse_text(gem, lambda d: d["candidates"][0]["content"]["parts"][0]["text"]) == "stub reply to: gem hi"
    text = log.read_text()
    assert "sk-secret" not in text and "<redacted>" in text
    ends = [json.loads(line) for line in text.splitlines() if '"stream_end"' in line]
    assert len(ends) == 4 and all(e["completed"] for e in ends)


def test_slow_and_think_prompts_are_paced():
    slow, think, echo = plan("SLOW now", slow_seconds=20), plan("THINK hard", think_seconds=8), plan("hi")
    assert slow.mode == "slow" and len(slow.chunks) > 20 and slow.chunk_delay * len(slow.chunks) >= 19
    assert think.mode == "think" and think.first_delay == 8
    assert echo.first_delay == 0 and echo.text == "stub reply to: hi"
    assert last_user_text({"contents": [{"role": "user", "parts": [{"text": "a"}]},
                                        {"role": "model", "parts": [{"text": "b"}]}]}) == "a"


def _events(raw: str) -> list[dict]:
    return [json.loads(line[6:]) for line in raw.splitlines() if line.startswith("data: ") and line != "data: [DONE]"]


MARKER = 'please TOOL:mcp__notebook__variables {"name": "x"}'
RESULT = "1 user variables (name: type = preview)\n  x: int = 5   " + "y" * 300


def test_a_tool_marker_is_a_tool_call_in_each_api_and_its_result_is_quoted(tmp_path):
    log = tmp_path / "log.jsonl"
    with StubServer(0, log) as stub:
        anth = _events(_post(stub.url + "/v1/messages", {"model": "m", "stream": True, "tools": [
            {"name": "Bash", "input_schema": {}}, {"name": "mcp__notebook__variables", "input_schema": {}}],
            "messages": [{"role": "user", "content": MARKER}]}))
        anth_whole = json.loads(_post(stub.url + "/v1/messages", {"model": "m", "tools": [
            {"name": "mcp__notebook__variables", "input_schema": {}}],
            "messages": [{"role": "user", "content": MARKER}]}))
        anth_back = _events(_post(stub.url + "/v1/messages", {"model": "m", "stream": True, "messages": [
            {"role": "user", "content": MARKER},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "x", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                          "content": [{"type": "text", "text": RESULT}]}]}]}))
        chat = _events(_post(stub.url + "/v1/chat/completions", {"model": "m", "stream": True, "tools": [
            {"type": "function", "function": {"name": "notebook_variables"}},
            {"type": "function", "function": {"name": "read"}}], "messages": [{"role": "user", "content": MARKER}]}))
        chat_back = _events(_post(stub.url + "/v1/chat/completions", {"model": "m", "stream": True, "messages": [
            {"role": "user", "content": MARKER}, {"role": "assistant", "content": None, "tool_calls": []},
            {"role": "tool", "tool_call_id": "c", "content": RESULT}]}))
        resp = _events(_post(stub.url + "/v1/responses", {"model": "m", "tools": [
            {"type": "function", "name": "notebook__variables"}], "input": [
            {"role": "user", "content": [{"type": "input_text", "text": MARKER}]}]}))
        resp_back = _events(_post(stub.url + "/v1/responses", {"model": "m", "input": [
            {"role": "user", "content": [{"type": "input_text", "text": MARKER}]},
            {"type": "function_call", "call_id": "c", "name": "notebook__variables", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c", "output": RESULT}]}))
        gem = _events(_post(stub.url + "/v1beta/models/g:streamGenerateContent?alt=sse", {
            "tools": [{"functionDeclarations": [{"name": "variables"}, {"name": "run_shell_command"}]}],
            "contents": [{"role": "user", "parts": [{"text": MARKER}]}]}))
        gem_back = _events(_post(stub.url + "/v1beta/models/g:streamGenerateContent?alt=sse", {"contents": [
            {"role": "user", "parts": [{"text": MARKER}]},
            {"role": "model", "parts": [{"functionCall": {"name": "variables", "args": {}}}]},
            {"role": "user", "parts": [{"functionResponse": {"name": "variables", "response": {"output": RESULT}}}]}]}))
    quoted = "tool result: " + " ".join(RESULT.split())[:200]
    # Anthropic: a tool_use block whose input streams as JSON, stop_reason tool_use; the result quoted
    start = next(e for e in anth if e["type"] == "content_block_start")["content_block"]
    assert start["type"] == "tool_use" and start["name"] == "mcp__notebook__variables"
    delta = next(e for e in anth if e["type"] == "content_block_delta")["delta"]
    assert json.loads(delta["partial_json"]) == {"name": "x"}
    assert next(e for e in anth if e["type"] == "message_delta")["delta"]["stop_reason"] == "tool_use"
    assert anth_whole["content"][0]["input"] == {"name": "x"} and anth_whole["stop_reason"] == "tool_use"
    assert "".join(e.get("delta", {}).get("text", "") for e in anth_back) == quoted
    assert len(quoted) == len("tool result: ") + 200
    # OpenAI chat: tool_calls deltas, finish_reason tool_calls
    calls = [c for e in chat for c in (e["choices"] or [{}])[0].get("delta", {}).get("tool_calls", [])]
    assert calls[0]["function"]["name"] == "notebook_variables"
    assert json.loads("".join(c["function"]["arguments"] for c in calls)) == {"name": "x"}
    assert chat[-1]["choices"][0]["finish_reason"] == "tool_calls"
    assert "".join((e["choices"] or [{}])[0].get("delta", {}).get("content") or "" for e in chat_back) == quoted
    # Responses: a function_call item
    done = next(e for e in resp if e["type"] == "response.output_item.done")["item"]
    assert done["type"] == "function_call" and done["name"] == "notebook__variables"
    assert json.loads(done["arguments"]) == {"name": "x"}
    assert "".join(e.get("delta", "") for e in resp_back if e["type"] == "response.output_text.delta") == quoted
    # Gemini: a functionCall part
    call = gem[0]["candidates"][0]["content"]["parts"][0]["functionCall"]
    assert call == {"name": "variables", "args": {"name": "x"}}
    assert "".join(e["candidates"][0]["content"]["parts"][0].get("text", "") for e in gem_back) == quoted
    entries = [json.loads(line) for line in log.read_text().splitlines() if '"method"' in line]
    assert [e["mode"] for e in entries] == ["tool_call", "tool_call", "tool_result", "tool_call", "tool_result",
                                            "tool_call", "tool_result", "tool_call", "tool_result"]
    assert entries[0]["tools"] == ["Bash", "mcp__notebook__variables"]
    assert entries[0]["call"] == {"name": "mcp__notebook__variables", "args": {"name": "x"}}


def test_tool_names_match_by_suffix_and_a_missing_tool_or_no_tools_is_text():
    assert match_tool("variables", ["mcp__notebook__variables", "notebook_variables"]) == "notebook_variables"
    assert match_tool("mcp__notebook__execute", ["notebook_execute", "execute_x"]) == "notebook_execute"
    assert match_tool("execute", ["nonexecute"]) is None  # a whole name part, not any suffix
    assert tool_marker("TOOL:execute {\"code\": \"x = 41 + 1\"} and more") == ("execute", {"code": "x = 41 + 1"})
    assert tool_marker("TOOL:cells") == ("cells", {}) and tool_marker("TOOL:cells {broken") == ("cells", {})
    missing = plan("TOOL:variables {}", tools=["Bash", "Read"])
    assert missing.mode == "no_tool" and "Bash, Read" in missing.text and missing.call is None
    # a request without tools (a CLI's title request quoting the prompt) gets the plain echo
    assert plan("TOOL:variables {}").mode == "echo" and plan("TOOL:variables {}", tools=[]).mode == "echo"
    assert plan("hi", tools=["variables"]).mode == "echo"
    assert plan("x", want_json=True, tools=["variables"], result="r").mode == "json"
    assert tool_result({"messages": [{"role": "user", "content": "TOOL:x"}]}) is None
    assert tool_names({"tools": [{"function_declarations": [{"name": "a"}]}, {"name": "b"}]}) == ["a", "b"]


def test_while_claude_codes_mcp_servers_connect_the_stub_waits_for_them_first():
    """A prompt typed before Claude Code's MCP servers are connected: the request offers
    ``WaitForMcpServers`` instead of the notebook's tools, and a model calls it first."""
    early = ["Bash", "Read", "WaitForMcpServers"]
    wait = plan("TOOL:mcp__notebook__variables {}", tools=early)
    assert wait.mode == "wait_for_mcp" and (wait.call.name, wait.call.args) == ("WaitForMcpServers", {})
    ready = "ready: true\nConnected (their tools are now available \u2014 call them directly): notebook"
    then = plan("TOOL:mcp__notebook__variables {}", tools=["Bash", "mcp__notebook__variables"], result=ready)
    assert then.mode == "tool_call" and then.call.name == "mcp__notebook__variables"
    # Still connecting after a wait: wait again, as a model does, up to MAX_WAITS in all; then
    # the wait's answer is the reply (no endless loop). Without the wait tool, no wait.
    late = "ready: false\nStill connecting: notebook"
    tools = ["Bash", "WaitForMcpServers"]
    again = plan("TOOL:mcp__notebook__variables {}", tools=tools, result=late, waits=1)
    assert again.mode == "wait_for_mcp" and again.call.name == "WaitForMcpServers"
    given_up = plan("TOOL:mcp__notebook__variables {}", tools=tools, result=late, waits=MAX_WAITS)
    assert given_up.mode == "tool_result" and "Still connecting" in given_up.text
    no_tool = plan("TOOL:mcp__notebook__variables {}", tools=["Bash"], result=late, waits=1)
    assert no_tool.mode == "tool_result"
    history = {"messages": [{"role": "user", "content": "TOOL:x"},
                            {"role": "assistant", "content": [{"type": "tool_use", "name": "WaitForMcpServers", "id": "a", "input": {}}]},
                            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": late}]}]}
    assert wait_calls(history) == 1 and wait_calls({"contents": []}) == 0
    # The wanted tool's own result ends the turn as before.
    done = plan("TOOL:mcp__notebook__variables {}", tools=["mcp__notebook__variables"], result="x: int = 5")
    assert done.mode == "tool_result" and done.text == "tool result: x: int = 5"


def test_a_tool_of_a_responses_namespace_is_called_with_its_namespace():
    """Codex puts an MCP server's tools in one Responses ``namespace`` entry."""
    body = {"model": "m", "tools": [{"type": "function", "name": "exec_command"}, {
        "type": "namespace", "name": "mcp__notebook", "tools": [{"type": "function", "name": "variables"},
                                                                {"type": "function", "name": "execute"}]}],
            "input": [{"role": "user", "content": [{"type": "input_text", "text": "TOOL:execute {}"}]}]}
    assert tool_names(body) == ["exec_command", "mcp__notebook.variables", "mcp__notebook.execute"]
    with StubServer(0) as stub:
        events = _events(_post(stub.url + "/v1/responses", body))
    item = next(e for e in events if e["type"] == "response.output_item.done")["item"]
    assert item["type"] == "function_call" and (item["namespace"], item["name"]) == ("mcp__notebook", "execute")
    assert plan("TOOL:variables {}", tools=["variables_x", "ns.variables"]).call.namespace == "ns"


def test_a_client_that_hangs_up_while_the_model_thinks_is_logged_at_once(tmp_path):
    """A cancelled request shows in the log when the client closes the connection, also in
    a silent phase (a write into a closed socket can still succeed once: a short reply after
    the silence could read as taken in full)."""
    import http.client

    log = tmp_path / "log.jsonl"
    with StubServer(0, log, think_seconds=5.0) as stub:
        host, port = stub.url.split("//")[1].split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=10)
        conn.request("POST", "/v1/chat/completions", json.dumps(
            {"model": "m", "stream": True, "messages": [{"role": "user", "content": "THINK hard"}]}),
            {"Content-Type": "application/json"})
        conn.getresponse()  # the headers: the stream has begun, silent for 5 s
        time.sleep(0.5)
        conn.close()
        deadline = time.monotonic() + 4
        while '"stream_end"' not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.02)
    ends = [json.loads(line) for line in log.read_text().splitlines() if '"stream_end"' in line]
    assert len(ends) == 1 and ends[0]["completed"] is False and 0.4 < ends[0]["hung_up_after"] < 2.0, ends
