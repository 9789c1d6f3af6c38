"""The kernel status JupyterLab shows while a turn streams and while a question waits:
busy, as for any running cell (the widget comm traffic of a turn must not make it read idle).

Sampled in the page every 100 ms: the notebook's execution indicator, and the running
cell's prompt (``[*]:`` while it runs), so only samples taken while the cell ran count."""

from __future__ import annotations

from playwright.sync_api import expect

from .conftest import TURN, Notebook, skip_unless_browser

skip_unless_browser()

START_SAMPLING = """(i) => {
  window.__acpSamples = [];
  clearInterval(window.__acpSampler);
  window.__acpSampler = setInterval(() => {
    const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
    const status = panel && panel.querySelector('.jp-Notebook-ExecutionIndicator');
    const prompt = panel && panel.querySelectorAll('.jp-Notebook .jp-Cell')[i]?.querySelector('.jp-InputPrompt');
    window.__acpSamples.push([status ? status.dataset.status : 'none', prompt ? prompt.textContent.trim() : '']);
  }, 100);
}"""
STOP_SAMPLING = "() => { clearInterval(window.__acpSampler); return window.__acpSamples; }"


def _while_running(samples: list[list[str]]) -> list[str]:
    return [status for status, prompt in samples if prompt == "[*]:"]


def test_the_kernel_reads_busy_while_a_turn_streams_and_while_a_question_waits(nb: Notebook) -> None:
    page = nb.page
    out = nb.run(0, "slow")
    expect(out).to_contain_text("Streaming 100 chunks", timeout=TURN)  # streaming has begun
    page.evaluate(START_SAMPLING, 0)
    nb.wait_ran(0)
    streaming = _while_running(page.evaluate(STOP_SAMPLING))
    assert len(streaming) >= 10, streaming
    print(f"streaming: {len(streaming)} samples, {streaming.count('busy')} busy")
    assert set(streaming) == {"busy"}, f"{streaming.count('idle')} of {len(streaming)} samples read idle"

    out1 = nb.run(1, "permission")
    allow = out1.get_by_role("button", name="Allow once")
    expect(allow).to_be_visible(timeout=TURN)
    page.evaluate(START_SAMPLING, 1)
    page.wait_for_function("() => window.__acpSamples.length >= 30", timeout=TURN)
    waiting = _while_running(page.evaluate(STOP_SAMPLING))
    assert len(waiting) >= 30, waiting
    print(f"question waiting: {len(waiting)} samples, {waiting.count('busy')} busy")
    assert set(waiting) == {"busy"}, f"{waiting.count('idle')} of {len(waiting)} samples read idle"
    allow.click()
    expect(out1).to_contain_text("Permission granted", timeout=TURN)
    nb.wait_ran(1)
