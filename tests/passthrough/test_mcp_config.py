"""A passthrough CLI gets the ``notebook`` MCP server through a generated config
file (issue 16): the registry's ``mcp_args``, the private file, the bridge's
policy, and end to end the stand-in CLI (``--mcp-config FILE``) in a real
python3 kernel with the magics, reaching the server from the file it was given."""

from __future__ import annotations

import json
import os
import re
import stat
import sys

import pytest

from acp_kernel.client.registry import BUILTIN, PASSTHROUGH, ConfigError, Passthrough, PassthroughConfig, load_config
from acp_kernel.client.notebook import ALL_TOOLS, NotebookSide
from acp_kernel.passthrough import notebook
from acp_kernel.protocol import proctree
from acp_kernel.view.sink import RecordingSink
from tests.hostile.render import live, visible_text
from tests.kernel.conftest import wait_until
from tests.kernel.conftest import kernel_env, kernelspec_path  # noqa: F401 - fixtures
from tests.magics.conftest import agent_pids, ipython  # noqa: F401 - the fixture

from .standins import config_entry, events, settings

HTML = "<img src=x onerror=alert(1)>"
#: Hostile code: raw HTML, a code span across a line break, a path with a newline.
HOSTILE_CODE = f's = "{HTML}"\nt = """`span\nend`"""\np = "/tmp/dir\\nname.txt"\nprint(s, t, p)'


# -- the registry ---------------------------------------------------------------------


def test_registry_mcp_args():
    assert PASSTHROUGH["claude"].mcp_args == ("--mcp-config", "{config}", "--allowedTools", "mcp__notebook")
    assert PASSTHROUGH["kimi"].mcp_args == ("--mcp-config-file", "{config}")
    for name in ("codex", "gemini", "pi", "opencode"):  # no file flag (see the registry's notes)
        assert PASSTHROUGH[name].mcp_args == ()
    assert BUILTIN["claude"].passthrough.mcp_args[:2] == ("--mcp-config", "{config}")
    over = PassthroughConfig(mcp_args=["--extra-mcp", "{config}"]).apply(PASSTHROUGH["pi"])
    assert over.mcp_args == ("--extra-mcp", "{config}") and over.command == PASSTHROUGH["pi"].command
    assert PassthroughConfig(mcp_args=[]).apply(PASSTHROUGH["claude"]).mcp_args == ()  # turned off


def test_config_file_mcp_args_must_name_the_file(tmp_path):
    path = tmp_path / "acp_kernel.json"
    path.write_text(json.dumps({"agents": {"claude": {"passthrough": {"mcp_args": ["--mcp-config"]}}}}))
    with pytest.raises(ConfigError, match=r"agents\.claude\.passthrough\.mcp_args.*\{config\}"):
        load_config(path)


# -- the file and the offer (the kernel side faked: offer() needs a kernel) ------------


ENTRY = {"name": "notebook", "command": sys.executable,
         "args": ["-m", "acp_kernel.notebook_mcp", "--connection-file", "/k.json", "--token", "T"],
         "env": [{"name": "A", "value": "1"}]}


def test_write_config_private_file():
    path = notebook.write_config(ENTRY)
    try:
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        assert stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode) == 0o700
        assert json.loads(open(path).read()) == {"mcpServers": {"notebook": {
            "command": sys.executable, "args": ENTRY["args"], "env": {"A": "1"}}}}
    finally:
        os.remove(path)
        os.rmdir(os.path.dirname(path))


def test_mcp_argv_keeps_odd_paths_one_word():
    odd = "/tmp/a dir\nwith newline/notebook-mcp.json"
    s = Passthrough(("cli",), mcp_args=("--mcp-config", "{config}", "--x={config}"))
    assert notebook.mcp_argv(s, odd) == ("--mcp-config", odd, f"--x={odd}")


@pytest.fixture
def fake_kernel(monkeypatch):
    """offer/withdraw as a kernel would answer them, recorded."""
    import acp_kernel.notebook_mcp as mcp

    calls: dict[str, list] = {"offer": [], "withdraw": []}
    monkeypatch.setattr(mcp, "offer", lambda bridge: calls["offer"].append(bridge) or dict(ENTRY))
    monkeypatch.setattr(mcp, "withdraw", lambda entry: calls["withdraw"].append(entry))
    return calls


def test_offer_terminal_adds_the_flag_and_close_removes_the_file(fake_kernel):
    s = Passthrough(("cli", "--continue"), mcp_args=("--mcp-config", "{config}"))
    offered = notebook.offer_terminal("cli", s, enabled=True, policy=lambda: "ask")
    assert offered.note is None and offered.link is not None
    path = offered.link.path
    assert offered.settings.command == ("cli", "--continue", "--mcp-config", path)
    assert os.path.isfile(path)
    assert fake_kernel["offer"] == [offered.link.bridge]
    offered.link.close()
    offered.link.close()  # idempotent
    assert not os.path.exists(path) and not os.path.exists(os.path.dirname(path))
    assert fake_kernel["withdraw"] == [ENTRY]


def test_no_offer_without_a_flag_or_when_off(fake_kernel):
    plain = Passthrough(("cli",))
    assert notebook.offer_terminal("cli", plain, enabled=True, policy=lambda: "ask").settings is plain
    flagged = Passthrough(("cli",), mcp_args=("--mcp-config", "{config}"))
    off = notebook.offer_terminal("cli", flagged, enabled=False, policy=lambda: "ask")
    assert off.settings is flagged and off.link is None and off.note is None
    assert fake_kernel["offer"] == []


def test_outside_a_kernel_nothing_is_offered():
    flagged = Passthrough(("cli",), mcp_args=("--mcp-config", "{config}"))
    offered = notebook.offer_terminal("cli", flagged, enabled=True, policy=lambda: "ask")
    assert offered.settings is flagged and offered.link is None and offered.note is None


def test_a_file_that_cannot_be_written_opens_the_terminal_with_a_note(fake_kernel, monkeypatch):
    def refuse(entry):
        raise OSError(f"no space left in /tmp/x\n{HTML}")

    monkeypatch.setattr(notebook, "write_config", refuse)
    flagged = Passthrough(("cli",), mcp_args=("--mcp-config", "{config}"))
    offered = notebook.offer_terminal("cli", flagged, enabled=True, policy=lambda: "ask")
    assert offered.settings is flagged and offered.link is None
    assert fake_kernel["withdraw"] == [ENTRY]  # the offer is taken back
    assert "notebook MCP server is off" in offered.note and "no space left" in offered.note
    assert live(offered.note) == [] and "\n" not in offered.note


# -- the bridge (policy, the cell) ----------------------------------------------------------


async def test_bridge_policies():
    sink = RecordingSink()
    policy = ["allow-all"]
    bridge = notebook.PassthroughBridge("cli", lambda: policy[0],
                                        side=NotebookSide(ALL_TOOLS, namespace=lambda: {"x": 1}))
    assert bridge.tools == ALL_TOOLS
    assert await bridge.authorize("x = 2") == (True, "")
    policy[0] = "deny"
    bridge.cell = notebook.Cell(sink, interactive=True, widgets=True, live=True)
    assert await bridge.authorize("x = 2") == (False, "refused by policy deny")
    assert "permissions: deny" in sink.markdown()
    for p in ("ask", "allow-reads"):
        policy[0] = p
        bridge.cell = notebook.Cell(sink, interactive=False, live=True)  # headless
        allowed, why = await bridge.authorize("x = 2")
        assert not allowed and "headless" in why and '"permissions": "allow-all"' in why
    bridge.cell = None
    allowed, why = await bridge.authorize("x = 2")
    assert not allowed and "no cell is typing" in why
    assert live(sink.markdown()) == []


def test_acp_kernel_offers_cells_only():
    bridge = notebook.PassthroughBridge("cli", lambda: "allow-all", side=NotebookSide(frozenset({"cells"})))
    assert bridge.tools == {"cells"} and bridge.namespace() is None
    bridge.prompts.append("hello")
    assert bridge.history() == ["hello"]


def test_run_view_shows_hostile_code_and_output_safely():
    sink = RecordingSink()
    run = notebook.CellRun(sink, "cli <b>", HOSTILE_CODE)
    run.write("stdout", f"{HTML} `a\nb` /tmp/p\nq.txt\n")
    run.done(True, f"{HTML}\n")
    md = sink.markdown()
    assert len(sink.outputs()) == 1 and "done" in md
    assert live(md) == [], md
    # A backslash in code is a reference in the markdown (JupyterLab's math pre-pass sees none); the HTML shows it.
    page = visible_text(sink.outputs()[0]["text/html"])
    assert "`span" in md and "/tmp/dir&#92;nname.txt" in md and "\\" not in md and "/tmp/dir\\nname.txt" in page


def test_run_view_keeps_the_tail():
    sink = RecordingSink()
    run = notebook.CellRun(sink, "cli", "print('x' * 10**6)")
    for _ in range(10):
        run.write("stdout", "y" * 10_000)
    run.done(True, "")
    md = sink.markdown()
    assert "output cut" in md and len(md) < 3 * notebook.RUN_SHOWN


# -- end to end: the stand-in in a python3 kernel with the magics -----------------------------


async def _open_standin(ipython, tmp_path, permissions: str):  # noqa: F811
    log = tmp_path / "standin.jsonl"
    entry = config_entry("mcp", log)
    (tmp_path / "acp_kernel.json").write_text(json.dumps({"permissions": permissions, "agents": {"standin": entry}}))
    await ipython.ok("%load_ext acp_kernel")
    await ipython.ok("%acp passthrough standin")
    await wait_until(lambda: any(e["event"] == "mcp-ready" for e in events(log)), timeout=60)
    start = next(e for e in events(log) if e["event"] == "start")
    i = start["argv"].index("--mcp-config")
    return log, start["argv"][i + 1], next(e for e in events(log) if e["event"] == "mcp-ready")


def _results(log) -> list[dict]:
    return [e for e in events(log) if e["event"] == "mcp-result"]


async def _reply_text(ipython) -> str:  # noqa: F811
    return eval(await ipython.value("_acp.text"))


@pytest.mark.slow
async def test_standin_reaches_the_server_from_the_generated_file(ipython, tmp_path):  # noqa: F811
    log, path, ready = await _open_standin(ipython, tmp_path, "allow-all")
    # The file the stand-in got: private, the notebook server, with its token.
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    server = json.loads(open(path).read())["mcpServers"]["notebook"]
    assert server["args"][:2] == ["-m", "acp_kernel.notebook_mcp"] and "--token" in server["args"]
    assert ready["tools"] == sorted(ALL_TOOLS)
    servers = set(ready["pids"])
    assert servers and all(proctree.alive(p) for p in servers)

    await ipython.ok("x = 5")
    await ipython.ok("%%acp\nmcp variables")
    lines = _results(log)[-1]["lines"]
    assert lines[0] == "mcp variables -> ok" and "x: int = 5" in lines, lines
    assert "x: int = 5" in await _reply_text(ipython)  # on the CLI's screen, so in the cell's reply

    res = await ipython.ok("%%acp\nmcp run y = x + 1; print('printed', y)")
    lines = _results(log)[-1]["lines"]
    assert lines[0] == "mcp execute -> ok", _results(log)[-1]
    assert await ipython.value("y") == "6"
    # The model gets what the code printed, not the cell's own view of the run (drawn as it printed).
    assert any("printed 6" in line for line in lines), lines
    assert not any("runs code in this kernel" in line for line in lines), lines
    run = [m for m in res.outputs if "runs code in this kernel" in m["content"].get("data", {}).get("text/markdown", "")]
    assert run and "y = x + 1" in run[-1]["content"]["data"]["text/markdown"]

    # Hostile code and output: shown in the cell (fenced), printed back on the CLI's screen.
    res = await ipython.ok("%%acp\nmcp run " + HOSTILE_CODE)
    lines = _results(log)[-1]["lines"]
    assert lines[0] == "mcp execute -> ok" and any(HTML in line for line in lines), lines
    shown = [m["content"] for m in res.outputs if m["msg_type"] in ("display_data", "update_display_data")]
    for content in shown:
        md = content.get("data", {}).get("text/markdown")
        if md:
            assert live(md) == [], md
    assert any("runs code in this kernel" in c.get("data", {}).get("text/markdown", "") and "`span" in
               c["data"]["text/markdown"] for c in shown)
    reply = await _reply_text(ipython)
    assert HTML in reply  # the reply is the CLI's text; how the cell shows it is the exchange's (escaped)

    pids = agent_pids(ipython.descendants(), "standin.py")
    await ipython.ok("%acp disconnect standin-cli")
    await wait_until(lambda: not any(proctree.alive(p) for p in pids | servers), timeout=20)
    assert not os.path.exists(path) and not os.path.exists(os.path.dirname(path))
    assert not agent_pids(ipython.descendants(), "acp_kernel.notebook_mcp")


@pytest.mark.slow
async def test_deny_refuses_and_the_code_does_not_run(ipython, tmp_path):  # noqa: F811
    log, path, ready = await _open_standin(ipython, tmp_path, "deny")
    res = await ipython.ok("%%acp\nmcp run z = 1")
    lines = _results(log)[-1]["lines"]
    assert lines[0] == "mcp execute -> error" and any("refused by policy deny" in line for line in lines), lines
    assert "permissions: deny" in res.text()
    assert (await ipython.value("'z' in globals()")) == "False"
    await ipython.ok("%%acp\nmcp variables")  # reads are not asked
    assert _results(log)[-1]["lines"][0] == "mcp variables -> ok"
    servers = set(ready["pids"])
    await ipython.ok("%acp disconnect standin-cli")
    await wait_until(lambda: not any(proctree.alive(p) for p in servers), timeout=20)
    assert not os.path.exists(path)


@pytest.mark.slow
async def test_mcp_off_in_the_config_starts_the_cli_without_the_flag(ipython, tmp_path):  # noqa: F811
    log = tmp_path / "standin.jsonl"
    (tmp_path / "acp_kernel.json").write_text(json.dumps({"mcp": False, "agents": {"standin": config_entry("mcp", log)}}))
    await ipython.ok("%load_ext acp_kernel")
    await ipython.ok("%acp passthrough standin")
    await ipython.ok("%%acp\nmcp variables")
    start = next(e for e in events(log) if e["event"] == "start")
    assert "--mcp-config" not in start["argv"]
    assert await _reply_text(ipython) == "mcp: no --mcp-config given"
    await ipython.ok("%acp disconnect standin-cli")


def test_standin_settings_carry_mcp_args():
    assert settings("mcp").mcp_args == ("--mcp-config", "{config}")
    assert re.search(r"standin\.py$", settings("mcp").command[1])


def clicker(harness, label: str):
    """An ``on_output`` hook that clicks the first ipywidgets Button named ``label``, as the page does."""
    clicked: list[str] = []

    async def on_output(msg: dict) -> None:
        if clicked or msg["msg_type"] != "comm_open":
            return
        state = (msg["content"].get("data") or {}).get("state") or {}
        if state.get("_model_name") == "ButtonModel" and state.get("description") == label:
            comm_id = msg["content"]["comm_id"]
            harness.kc.shell_channel.send(harness.kc.session.msg("comm_msg", {"comm_id": comm_id, "data": {
                "method": "custom", "content": {"event": "click"}}}))
            clicked.append(comm_id)

    return clicked, on_output


@pytest.mark.slow
async def test_ask_puts_the_buttons_in_the_typing_cell(ipython, tmp_path):  # noqa: F811
    log, path, ready = await _open_standin(ipython, tmp_path, "ask")
    clicked, hook = clicker(ipython, "Allow once")
    res = await ipython.ok("%%acp\nmcp run w = 7", on_output=hook)
    assert clicked and _results(log)[-1]["lines"][0] == "mcp execute -> ok"
    assert "Permission requested" in res.text() and await ipython.value("w") == "7"

    clicked, hook = clicker(ipython, "Reject")
    await ipython.ok("%%acp\nmcp run w = 8", on_output=hook)
    lines = _results(log)[-1]["lines"]
    assert clicked and lines[0] == "mcp execute -> error" and any("refused by the user" in s for s in lines), lines
    assert await ipython.value("w") == "7"

    # Headless (no allow_stdin, as nbclient runs): nobody to ask, refused with how to allow it.
    await ipython.ok("%%acp\nmcp run w = 9", allow_stdin=False)
    lines = _results(log)[-1]["lines"]
    assert lines[0] == "mcp execute -> error" and any("headless" in s for s in lines), lines
    assert any('"permissions": "allow-all"' in s for s in lines)
    assert await ipython.value("w") == "7"
    await ipython.ok("%acp disconnect standin-cli")


@pytest.mark.slow
async def test_interrupt_stops_the_code_and_the_cli_turn(ipython, tmp_path):  # noqa: F811
    import asyncio

    log, path, ready = await _open_standin(ipython, tmp_path, "allow-all")
    running = asyncio.Event()

    async def watch(msg: dict) -> None:
        data = msg["content"].get("data") or {}
        if "running" in str(data.get("text/markdown", "")) and "time.sleep" in str(data.get("text/markdown", "")):
            running.set()

    cell = asyncio.ensure_future(ipython.execute("%%acp\nmcp run import time; time.sleep(60)", on_output=watch,
                                                 timeout=60))
    await asyncio.wait_for(running.wait(), 30)
    await ipython.km.interrupt_kernel()
    res = await asyncio.wait_for(cell, 30)
    assert res.status == "ok", res.text()
    await wait_until(lambda: bool(_results(log)) and _results(log)[-1]["tool"] == "execute", timeout=10)
    lines = _results(log)[-1]["lines"]
    assert lines[0] == "mcp execute -> error" and any("interrupt" in s.lower() for s in lines), lines
    # The CLI's cancel key went too (the Esc is in its PTY when the cell ends; the CLI reads it
    # after). The stand-in ends its turn on the tool's result, so that Esc may find it idle.
    await wait_until(lambda: any(e["event"] in ("cancel", "esc-idle") for e in events(log)), timeout=10)
    assert await ipython.value("1 + 1") == "2"
    await ipython.ok("%acp disconnect standin-cli")


@pytest.mark.slow
async def test_acp_kernel_offers_the_document_tools_only_to_the_cli(kernel_env, tmp_path):
    from tests.kernel.conftest import KernelHarness, running_kernel

    log = tmp_path / "standin.jsonl"
    (tmp_path / "acp_kernel.json").write_text(json.dumps({"permissions": "allow-all",
                                                          "agents": {"standin": config_entry("mcp", log)}}))
    async with running_kernel(kernel_env, tmp_path / "work") as (km, kc):
        harness = KernelHarness(km, kc)
        await harness.announce_widgets()
        res = await harness.execute("%passthrough standin")
        assert res.reply["content"]["status"] == "ok", res.text()
        await wait_until(lambda: any(e["event"] == "mcp-ready" for e in events(log)), timeout=60)
        ready = next(e for e in events(log) if e["event"] == "mcp-ready")
        assert ready["tools"] == ["cells", "delete_cell", "edit_cell", "insert_cell"]  # no execute, no variables
        await harness.execute(f"first prompt {HTML}")
        await harness.execute("mcp cells")
        lines = _results(log)[-1]["lines"]
        assert lines[0] == "mcp cells -> ok" and any(f"first prompt {HTML}" in s for s in lines), lines
        await harness.execute("mcp run x = 1")
        assert "unknown tool: 'execute'" in _results(log)[-1]["lines"][0]  # not offered here
        path = next(e for e in events(log) if e["event"] == "start")["argv"][-1]
        assert os.path.isfile(path)
        await harness.execute("%passthrough stop")
        await wait_until(lambda: not any(proctree.alive(p) for p in ready["pids"]), timeout=20)
        assert not os.path.exists(path)


async def test_a_question_is_cancelled_when_its_cell_ends():
    import asyncio

    sink = RecordingSink()
    bridge = notebook.PassthroughBridge("cli", lambda: "ask", side=NotebookSide(ALL_TOOLS, namespace=dict))
    cell = bridge.cell = notebook.Cell(sink, interactive=True, widgets=True, live=True)
    asked = asyncio.ensure_future(bridge.authorize(HOSTILE_CODE))
    await wait_until(lambda: bool(cell.pending))
    assert "Permission requested" in sink.markdown() and live(sink.markdown()) == []
    cell.end()
    allowed, why = await asyncio.wait_for(asked, 5)
    assert not allowed and "cancelled" in why and "did not run" in why
    assert "cancelled" in sink.markdown()


async def test_terminals_open_without_the_server_when_the_file_fails_and_say_why(fake_kernel, monkeypatch, tmp_path):
    """Through ptycell.Terminals (in-process, the kernel side faked): the CLI starts
    without the flag, and the first prompt's cell carries the note."""
    from acp_kernel.client.registry import Config
    from acp_kernel.passthrough.ptycell import Target, Terminals

    def refuse(entry):
        raise OSError("read-only file system")

    monkeypatch.setattr(notebook, "write_config", refuse)
    log = tmp_path / "standin.jsonl"
    terminals = Terminals(config=Config(agents={}))
    panel = terminals.open(Target("standin", settings("mcp", log)), str(tmp_path))
    try:
        assert "--mcp-config" not in panel.terminal.settings.command
        sink = RecordingSink()
        reply = await terminals.prompt("standin", "mcp variables", sink)
        assert reply.text == "mcp: no --mcp-config given"
        assert "notebook MCP server is off for `standin`: its config file could not be written" in sink.markdown()
        assert terminals.note("standin") is None  # said once
    finally:
        await terminals.close_all()


async def test_terminals_close_withdraws_and_deletes(fake_kernel, tmp_path):
    from acp_kernel.client.registry import Config
    from acp_kernel.passthrough.ptycell import Target, Terminals

    log = tmp_path / "standin.jsonl"
    terminals = Terminals(config=Config(agents={}))
    target = Target("standin", settings("mcp", log))
    panel = terminals.open(target, str(tmp_path))
    link = terminals.link("standin")
    assert link is not None and panel.terminal.settings.command[-2:] == ("--mcp-config", link.path)
    assert terminals.open(target, str(tmp_path)) is panel  # the same target: the running terminal again
    await terminals.close("standin")
    assert link.closed and not os.path.exists(link.path) and fake_kernel["withdraw"] == [ENTRY]
