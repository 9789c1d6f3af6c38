"""The ACP kernel as the Jupyter protocol sees it: errors, exit, kernel_info,
is_complete, and a restart that resumes where the notebook was."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from acp_kernel.protocol import proctree
from tests.kernel.conftest import KernelHarness, wait_until
from tests.magics.conftest import agent_pids
from tests.kernels import IpcKernelManager

AGENTS = Path(__file__).resolve().parent.parent / "agents"


def recording(log: Path, caps: str = "resume") -> str:
    return shlex.join([sys.executable, str(AGENTS / "recording_agent.py"), str(log), caps])


def requests(log: Path, method: str) -> list[dict]:
    rows = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return [r for r in rows if r["method"] == method]


async def test_kernel_info_advertises_no_debugger(acp_kernel):
    content = (await acp_kernel.kc.kernel_info(reply=True))["content"]
    assert "debugger" not in content.get("supported_features", [])
    assert content.get("debugger") is False


async def test_is_complete_for_shell_cells(acp_kernel):
    async def status(code: str) -> str:
        return (await acp_kernel.kc.is_complete(code, reply=True))["content"]["status"]

    assert await status("%%shell") == "incomplete"
    assert await status("%%shell --timeout 5\n") == "incomplete"
    assert await status("%%shell\necho hi") == "complete"
    assert await status("exit") == "complete"
    assert await status("%nonsense") == "invalid"


@pytest.mark.parametrize("word", ["exit", "quit", "exit()"])
async def test_exit_asks_the_frontend_to_exit_and_never_reaches_an_agent(acp_kernel, word):
    res = await acp_kernel.execute(word)
    assert res.status == "ok"
    assert res.reply["content"]["payload"] == [{"source": "ask_exit", "keepkernel": False}]
    kernel_pid = acp_kernel.km.provisioner.pid
    assert not agent_pids(proctree.tree(kernel_pid), "demo_agent")  # no agent was started for it
    assert "demo agent" not in res.text()


async def test_errors_are_error_messages_with_one_line(acp_kernel):
    bad = await acp_kernel.execute("%nonsense")
    errors = [m["content"] for m in bad.outputs if m["msg_type"] == "error"]
    assert bad.reply["content"]["ename"] == "UsageError"
    assert errors == [{"ename": "UsageError", "evalue": "unknown command 'nonsense'; try %help",
                       "traceback": ["UsageError: unknown command 'nonsense'; try %help"]}]
    await acp_kernel.execute("%agent --command /no/such/agent-binary")
    failed = await acp_kernel.execute("hello")
    content = failed.reply["content"]
    assert content["ename"] == "AgentUnavailable" and "not found" in content["evalue"]
    assert "\n" not in content["evalue"] and content["traceback"] == [f"AgentUnavailable: {content['evalue']}"]
    # Said once (issue 24): the error's line, and displayed beside it only what the line leaves out.
    assert failed.text().count("Cannot start") == 1 and "Cannot start" in content["evalue"]
    assert "Hint:" in "".join(m["content"]["data"]["text/markdown"] for m in failed.outputs
                              if m["msg_type"] == "display_data")


def test_headless_runs_stop_at_a_failing_cell_with_its_reason(kernel_env, tmp_path, monkeypatch):
    for key, value in kernel_env.items():
        monkeypatch.setenv(key, value)
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "acp", "display_name": "ACP", "language": "markdown"}})
    nb.cells = [nbformat.v4.new_code_cell("%status"), nbformat.v4.new_code_cell("%mode a b"),
                nbformat.v4.new_code_cell("never run")]
    client = NotebookClient(nb, timeout=60, kernel_name="acp", kernel_manager_class=IpcKernelManager, resources={"metadata": {"path": str(tmp_path / "work")}})
    with pytest.raises(CellExecutionError) as info:
        client.execute()
    assert info.value.ename == "UsageError" and info.value.evalue == "usage: %mode [ID]"
    assert "UsageError: usage: %mode [ID]" in str(info.value)
    assert nb.cells[1].outputs[-1]["output_type"] == "error"
    assert nb.cells[2].get("outputs") == []


async def _restart(harness: KernelHarness) -> None:
    pids = proctree.tree(harness.km.provisioner.pid)
    await harness.km.restart_kernel(now=False)
    await harness.kc.wait_for_ready(timeout=60)
    await wait_until(lambda: not any(proctree.alive(p) for p in pids))


async def test_restart_resumes_in_the_remembered_directory_with_the_remembered_agent(acp_kernel, tmp_path):
    log = tmp_path / "requests.jsonl"
    sub = tmp_path / "work" / "project"
    sub.mkdir()
    assert (await acp_kernel.execute(f"%agent --command {recording(log)}\n%cwd project")).status == "ok"
    first = await acp_kernel.execute("hello")
    (new,) = requests(log, "session/new")
    assert new["params"]["cwd"] == str(sub) and f"in {sub}" in first.text()
    sid = first.text().split("recorded ", 1)[1].split(" ", 1)[0]

    await _restart(acp_kernel)
    again = await acp_kernel.execute("hello again")
    assert again.status == "ok", again.text()
    (resume,) = requests(log, "session/resume")
    assert resume["params"]["sessionId"] == sid and resume["params"]["cwd"] == str(sub)
    assert f"Resumed session `{sid}` in `{sub}`" in again.text()
    assert f"recorded {sid} in {sub}" in again.text()  # the recording agent again, not the demo agent
    assert len(requests(log, "initialize")) == 2


async def test_an_agent_chosen_by_command_survives_a_restart_before_any_prompt(acp_kernel, tmp_path):
    log = tmp_path / "requests.jsonl"
    await acp_kernel.execute(f"%agent --command {recording(log)}")
    await _restart(acp_kernel)
    res = await acp_kernel.execute("hello")
    assert "recorded rec-" in res.text() and "demo agent" not in res.text()


async def test_a_session_that_cannot_be_reopened_is_said_so(acp_kernel, tmp_path):
    log = tmp_path / "requests.jsonl"
    await acp_kernel.execute(f"%agent --command {recording(log, 'none')}")
    first = await acp_kernel.execute("hello")
    sid = first.text().split("recorded ", 1)[1].split(" ", 1)[0]
    await _restart(acp_kernel)
    res = await acp_kernel.execute("hello")
    assert f"Session `{sid}` cannot be reopened" in res.text() and "offers neither resume nor load" in res.text()
    assert len(requests(log, "session/new")) == 2 and not requests(log, "session/resume")


async def test_load_shows_only_the_last_answer_and_hostile_strings_stay_inert(acp_kernel):
    from tests.hostile.render import live
    from tests.kernel.conftest import scripted_command

    evil = "<img src=x onerror=alert(1)> \x1b]52;c;ZXZpbA==\x07 `a\nb`"
    scenario = {
        "load": True,
        "replay_after": 0.01,  # answered first, replayed after (Gemini CLI): the load waits for it
        "history": [
            {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "first question"}},
            {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "FIRST ANSWER"}},
            {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "second "}},
            {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "question"}},  # one prompt
            {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "second answer " + evil}},
        ],
        "new_session": {"modes": {"currentModeId": "m", "availableModes": [{"id": "m", "name": evil, "description": evil}]},
                        "configOptions": [{"id": "c", "name": evil, "type": "select", "currentValue": "v",
                                           "options": [{"value": "v", "name": evil}]}]},
        "prompts": {"fail": [{"reply_prompt": {"error": {"code": -32603, "message": evil}}}]},
    }
    await acp_kernel.execute(f"%agent --command {scripted_command(scenario)}")
    loaded = await acp_kernel.execute("%load old-session")
    assert loaded.status == "ok", loaded.text()
    text = loaded.text()
    assert "2 earlier prompts. The last answer:" in text and "second answer" in text and "FIRST ANSWER" not in text
    for cell in ("%mode", "%config", "fail"):
        res = await acp_kernel.execute(cell)
        for msg in res.outputs:
            data = msg["content"].get("data", {})
            if "text/markdown" in data:
                assert live(data["text/markdown"]) == [], data["text/markdown"]
            assert "\x1b" not in data.get("text/plain", "") and "\x1b" not in str(msg["content"].get("traceback", ""))
    assert res.status == "error" and "\x1b" not in res.reply["content"]["evalue"]
    assert "\n" not in res.reply["content"]["evalue"]


EVIL = "<img src=x onerror=alert(1)>"


async def test_set_values_fill_later_prompts_and_bad_lines_are_one_line_errors(acp_kernel):
    from tests.hostile.render import live
    from tests.kernel.conftest import scripted_command

    want = f'Fix flaky "tests" {EVIL} `a\nb` 3 [1, {{"k": null}}] {{other}}'
    scenario = {"prompts": {want: [{"chunk": "Fixed."}]}, "prompt": [{"chunk": "WRONG PROMPT"}]}
    await acp_kernel.execute(f"%agent --command {scripted_command(scenario)}")
    res = await acp_kernel.execute('%set topic "flaky \\"tests\\" ' + EVIL + ' `a\\nb`"\n%set n 3\n'
                                   '%set items [1, {"k": null}]\nFix {topic} {n} {items} {other}')
    assert res.status == "ok" and "Fixed." in res.text() and "WRONG PROMPT" not in res.text(), res.text()
    for msg in res.outputs:
        data = msg["content"].get("data", {})
        if "text/markdown" in data:
            assert live(data["text/markdown"]) == [], data["text/markdown"]
    said = [m["content"]["data"] for m in res.outputs if "topic" in m["content"].get("data", {}).get("text/plain", "")]
    # The value as its JSON, in text: no markdown escapes or code fences in text/plain.
    assert said and said[0]["text/plain"].startswith('topic = "flaky \\"tests\\" ' + EVIL + ' `a\\nb`"; prompts put')
    for line, says in (("%set 1x 2", "'1x' is not a name"), ("%set alone", "usage: %set alone VALUE"),
                       ("%set", "usage: %set NAME VALUE")):
        bad = await acp_kernel.execute(line + "\nnever sent")
        assert bad.reply["content"]["ename"] == "UsageError" and says in bad.reply["content"]["evalue"], bad.reply
        assert "WRONG PROMPT" not in bad.text() and "Fixed." not in bad.text()
    assert "%set NAME VALUE" in (await acp_kernel.execute("%help")).text()


async def test_a_session_refused_at_start_shows_the_agent_stderr_and_one_line(acp_kernel):
    from tests.hostile.render import live
    from tests.kernel.conftest import scripted_command

    scenario = {"init_actions": [{"stderr": f"config: no model set\n{EVIL}\n`a\nb`\n"}],
                "new_session": {"error": {"code": -32603, "message": f"no model {EVIL}"}}}
    await acp_kernel.execute(f"%agent --command {scripted_command(scenario)}")
    res = await acp_kernel.execute("hello")
    content = res.reply["content"]
    assert content["ename"] == "AgentUnavailable" and "answered with an error: no model" in content["evalue"]
    assert "\n" not in content["evalue"]
    assert res.text().count("answered with an error") == 1  # said once, by the error
    shown = [m["content"]["data"] for m in res.outputs if m["msg_type"] == "display_data"]
    md = "\n".join(d.get("text/markdown", "") for d in shown)
    plain = "\n".join(d.get("text/plain", "") for d in shown)
    assert "config: no model set" in md and live(md) == [], md
    assert "agent stderr (last lines):" in plain and f"| {EVIL}" in plain
    assert not agent_pids(proctree.tree(acp_kernel.km.provisioner.pid), "scripted_agent")  # closed, not left running
    assert (await acp_kernel.execute("%status")).status == "ok"


async def test_kernel_messages_carry_their_text_as_plain(acp_kernel, tmp_path):
    odd = tmp_path / "work" / "a&b_[x]"
    odd.mkdir()
    res = await acp_kernel.execute(f"%cwd '{odd}'")
    data = [m["content"]["data"] for m in res.outputs if m["msg_type"] == "display_data"][0]
    assert "\\&" in data["text/markdown"] or "`" in data["text/markdown"]
    assert data["text/plain"].startswith(f"Working directory: {odd} (for new sessions;")
    assert "`" not in data["text/plain"] and "*" not in data["text/plain"]
