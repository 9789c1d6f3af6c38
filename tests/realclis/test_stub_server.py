"""The stub model server answers each API shape with the scripted reply and logs without secrets."""

from __future__ import annotations

import json
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from stub_model_server import StubServer, last_user_text, plan  # noqa: E402


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
