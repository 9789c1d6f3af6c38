"""The demo notebooks run top to bottom through nbclient, and read well saved."""

from __future__ import annotations

import shutil
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from tests.kernels import IpcKernelManager

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


def _markdown_outputs(nb) -> str:
    parts = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            parts.append(data.get("text/markdown", "") or out.get("text", "") or data.get("text/plain", ""))
    return "\n".join(parts)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["01-acp-kernel-tour.ipynb", "02-magics.ipynb"])
def test_demo_notebook_runs_headless_and_saves_a_markdown_transcript(name, kernel_env, tmp_path, monkeypatch):
    for key, value in kernel_env.items():
        monkeypatch.setenv(key, value)
    work = tmp_path / "nb"
    work.mkdir()
    shutil.copy(NOTEBOOKS / name, work / name)
    nb = nbformat.read(work / name, as_version=4)
    NotebookClient(nb, timeout=120, kernel_manager_class=IpcKernelManager, resources={"metadata": {"path": str(work)}}).execute()
    nbformat.write(nb, work / name)

    saved = nbformat.read(work / name, as_version=4)
    nbformat.validate(saved)
    text = _markdown_outputs(saved)
    assert "Traceback" not in text
    if name.startswith("01"):
        assert "Hello! I am the acp-kernel demo agent" in text
        assert "Read README.md (simulated) · ✓ done" in text  # a tool call row's fallback
        assert "```diff" in text  # the diff, as markdown
        assert "- [x] " in text  # the plan as a checklist
        assert "nobody can answer" in text  # the headless permission policy said why
        assert "nobody can open a link here" in text and "not signed in" in text  # the page to open, declined
        assert '{"command": "/bin/bash", "args": ["-c"' in text or '"args": ["-c"' in text
        # the passthrough terminal's replies, kept as text where no terminal was on screen
        assert "You said: What does a passthrough terminal do?\nIt keeps a multi-line prompt together.\n(" in text
        assert "line 5 of 5" in text and "Stopped `demo`" in text
        # a session's whole life: the title, the added root read through the client unasked, logout
        assert "- `demo-" in text and " hello · updated " in text
        assert "it begins: `notes shared with the agent`" in text and "- additional directories: `" in text
        assert "*Logged out of **" in text
    else:
        assert "I would like to hear about tool calls and [1, 2, 3]" in text
        assert "<Turn end_turn" in text
        assert "python:items" in text
        assert "You said: Tell me about tool calls" in text
        assert "('idle', ['You said: Tell me about tool calls', '(24 characters, 1 line)'])" in text
