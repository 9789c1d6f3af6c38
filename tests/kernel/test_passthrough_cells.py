"""Passthrough cells in the notebook: each prompt cell keeps its own exchange as
text once a later cell shows the live terminal; terminal data travels as text
(a kernel gateway's relay carries no binary frames); xterm.js comes on request
and is never saved with the notebook; a stopped terminal says "stopped"."""

from __future__ import annotations

import json

import nbformat
import pytest
from nbclient import NotebookClient

from tests.hostile.render import live
from tests.kernels import IpcKernelManager

from .terminal_frontend import TerminalFrontend

pytestmark = pytest.mark.slow

WIDGET = "application/vnd.jupyter.widget-view+json"
STATE = "application/vnd.jupyter.widget-state+json"
HOSTILE = "<img src=x onerror=alert(1)> and `a code span\nacross a line` and /tmp/a\nb.txt"


def _displays(res, kind: str) -> list[dict]:
    return [m["content"] for m in res.outputs if m["msg_type"] == kind]


async def test_each_prompt_cell_keeps_its_own_exchange_and_one_view_is_live(acp_kernel):
    k, front = acp_kernel, TerminalFrontend(acp_kernel.kc)
    res = await k.execute("%passthrough demo", on_output=front.feed)
    assert res.status == "ok", res.text()

    first = await k.execute("hello from cell one", on_output=front.feed)
    assert first.status == "ok", first.text()
    [shown] = [d for d in _displays(first, "display_data") if WIDGET in d["data"]]
    first_id = shown["transient"]["display_id"]
    # While it is the newest cell: the live view, with the exchange as text beside it.
    [done] = [u for u in _displays(first, "update_display_data") if u["transient"]["display_id"] == first_id]
    assert WIDGET in done["data"]
    assert "You said: hello from cell one" in done["data"]["text/plain"]
    assert done["data"]["text/plain"].startswith("› hello from cell one")

    second = await k.execute("and from cell two", on_output=front.feed)
    assert second.status == "ok"
    # The first cell's output becomes its own exchange, without the live view.
    [retired] = [u for u in _displays(second, "update_display_data") if u["transient"]["display_id"] == first_id]
    assert WIDGET not in retired["data"]
    assert "You said: hello from cell one" in retired["data"]["text/markdown"]
    assert "cell two" not in retired["data"]["text/plain"]
    # The second holds the one live view, of the same widget.
    [live_view] = [d for d in _displays(second, "display_data") if WIDGET in d["data"]]
    assert live_view["data"][WIDGET]["model_id"] == front.comm_id
    assert live_view["transient"]["display_id"] != first_id
    # Widget state now carries the screen as text, for readers without a kernel.
    await front.pump_until(lambda: "You said: and from cell two" in front.state.get("screen", ""))


async def test_an_exchange_with_hostile_text_is_inert_markdown(acp_kernel):
    k, front = acp_kernel, TerminalFrontend(acp_kernel.kc)
    await k.execute("%passthrough demo", on_output=front.feed)
    first = await k.execute(HOSTILE, on_output=front.feed)
    assert first.status == "ok", first.text()
    second = await k.execute("next", on_output=front.feed)
    [retired] = [u["data"] for u in _displays(second, "update_display_data") if WIDGET not in u["data"]]
    md = retired["text/markdown"]
    assert live(md) == [], md
    assert "<img" in md  # shown as text, inside a code block
    assert "onerror" in retired["text/plain"] and "\x1b" not in retired["text/plain"]


async def test_terminal_data_is_text_only_and_xterm_comes_on_request(acp_kernel):
    k, front = acp_kernel, TerminalFrontend(acp_kernel.kc)
    await k.execute("%passthrough demo", on_output=front.feed)
    assert "_xterm_js" not in front.state and "_fit_js" not in front.state
    assert len(json.dumps(front.state)) < 40_000, "the widget's synced state should not carry xterm.js"
    front.hello(rows=front.state["rows"], cols=100)  # as a browser view: the widget's rows, its own width
    await front.pump_until(lambda: front.replayed)
    await k.execute("ünïcödé → text frames", on_output=front.feed)
    await front.pump_until(lambda: "You said: ünïcödé → text frames" in front.view_text())
    front.ask_assets()
    await front.pump_until(lambda: front.assets is not None)
    assert "Terminal" in front.assets["xterm"] and "FitAddon" in front.assets["fit"]
    assert front.assets["version"]
    assert front.binary_messages == 0  # nothing a kernel gateway's relay would choke on


async def test_stop_says_stopped(acp_kernel):
    k, front = acp_kernel, TerminalFrontend(acp_kernel.kc)
    await k.execute("%passthrough demo", on_output=front.feed)
    await k.execute("a prompt", on_output=front.feed)
    res = await k.execute("%passthrough stop demo", on_output=front.feed)
    assert res.status == "ok", res.text()
    await front.pump_until(lambda: front.state.get("status") == "stopped")
    assert "You said: a prompt" in front.state["screen"]


def test_a_saved_passthrough_notebook_is_small_and_keeps_each_exchange(kernel_env, tmp_path, monkeypatch):
    for name in ("ACP_KERNEL_STATE", "ACP_KERNEL_CONFIG", "ACP_DEMO_STATE_DIR"):
        monkeypatch.setenv(name, kernel_env[name])
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "acp", "display_name": "ACP", "language": "markdown"}})
    cells = ["%passthrough demo", "first prompt", "second prompt", "%passthrough stop demo"]
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    NotebookClient(nb, timeout=60, kernel_name="acp", kernel_manager_class=IpcKernelManager, store_widget_state=True,
                   resources={"metadata": {"path": str(tmp_path / "work")}}).execute()
    path = tmp_path / "saved.ipynb"
    nbformat.write(nb, path)
    saved = nbformat.read(path, as_version=4)
    for cell, word in zip(saved.cells[1:3], ("first", "second")):
        text = "\n".join(o.get("data", {}).get("text/plain", "") for o in cell.outputs)
        assert f"You said: {word} prompt" in text, cell.outputs
    state = saved.metadata.get("widgets", {}).get(STATE, {}).get("state", {})
    terminals = {mid: s for mid, s in state.items() if s["state"].get("_anywidget_id") == "acp_kernel.TerminalWidget"}
    assert len(terminals) == 1
    [model] = terminals.values()
    # The widget state a notebook saves per terminal: its script and styles, title,
    # status and last screen; not xterm.js (345 KB), which comes from the kernel.
    assert len(json.dumps(model)) < 40_000
    assert model["state"]["status"] == "stopped"
    assert "You said: second prompt" in model["state"]["screen"]
    assert path.stat().st_size < 80_000
