"""A finished turn keeps its record in the output's metadata, and ``acp-kernel report`` reads it
(issue 24 §3): a notebook run by nbclient against a scripted agent that names itself, its model
and mode with hostile strings, makes tool calls, writes a file through the client and reports
usage; saved, then reported by the real CLI, as text and as JSON."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

import nbformat
from nbclient import NotebookClient
from tests.kernels import IpcKernelManager

from .conftest import use_scripted_agent

HOSTILE = "<img src=x onerror=alert(1)> $x$ `a\nb` \x1b[31mred\x1b]8;;http://evil\x1b\\"
CONTENT = "hello from the agent\n"


def _scenario(path: str) -> dict:
    return {
        "init": {"agentInfo": {"name": "scripted " + HOSTILE, "version": "9.9\n" + HOSTILE}},
        "new_session": {"modes": {"currentModeId": "code", "availableModes": [{"id": "code", "name": "Code"}]},
                        "models": {"currentModelId": "stub-model " + HOSTILE,
                                   "availableModels": [{"modelId": "stub-model " + HOSTILE, "name": "Stub"}]}},
        "prompt": [
            {"update": {"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "Read " + HOSTILE, "kind": "read",
                        "status": "completed"}},
            {"update": {"sessionUpdate": "tool_call", "toolCallId": "t2", "title": "Run tests", "kind": "execute",
                        "status": "failed"}},
            {"request": {"method": "fs/write_text_file", "params": {"sessionId": "$SID", "path": path,
                                                                    "content": CONTENT}}},
            {"update": {"sessionUpdate": "usage_update", "used": 1234, "size": 200000,
                        "cost": {"amount": 0.25, "currency": "USD"}}},
            {"chunk": "Done writing.\n"},
        ],
    }


def test_the_record_is_saved_with_the_turn_and_the_report_reads_it(headless_env, tmp_path, monkeypatch):
    work = tmp_path / "work"
    target = work / "notes.txt"
    use_scripted_agent(headless_env, _scenario(str(target)))
    monkeypatch.setenv("ACP_KERNEL_PERMISSIONS", "allow-all")  # the kernel nbclient starts inherits it
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "acp", "display_name": "ACP", "language": "markdown"}})
    nb.cells = [nbformat.v4.new_code_cell("Write the notes")]
    NotebookClient(nb, timeout=60, kernel_name="acp", kernel_manager_class=IpcKernelManager,
                   resources={"metadata": {"path": str(work)}}).execute()
    path = tmp_path / "saved.ipynb"
    nbformat.write(nb, path)
    assert target.read_text() == CONTENT

    records = [o["metadata"]["acp_kernel"] for o in nbformat.read(path, as_version=4).cells[0].outputs
               if "acp_kernel" in o.get("metadata", {})]
    assert len(records) == 1
    r = records[0]
    assert r["version"] == 1 and r["agent"]["name"] == "scripted" and r["agent"]["info"]["name"] == "scripted " + HOSTILE
    assert r["model"] == "stub-model " + HOSTILE and r["mode"] == "code" and r["policy"] == "allow-all"
    assert r["stop_reason"] == "end_turn" and r["error"] is None and r["seconds"] >= 0
    assert r["usage"] == {"used": 1234, "size": 200000, "cost": {"amount": 0.25, "currency": "USD"}}
    assert [(c["kind"], c["status"]) for c in r["tool_calls"]][:2] == [("read", "completed"), ("execute", "failed")]
    assert r["tool_calls_total"] == len(r["tool_calls"])
    (written,) = r["files_written"]
    assert written == {"path": str(target), "bytes": len(CONTENT), "created": True,
                       "sha256": hashlib.sha256(CONTENT.encode()).hexdigest()}

    cli = [sys.executable, "-m", "acp_kernel", "report", str(path)]
    text = subprocess.run(cli, capture_output=True, text=True, timeout=60, check=True).stdout
    assert "1 turn" in text and "scripted 9.9␊<img src=x onerror=alert(1)>" in text
    assert "ended: end_turn 1" in text and "0.25 USD" in text and "context up to 1,234 tokens" in text
    assert "completed 1" in text and "failed 1" in text
    assert f"{target}  {len(CONTENT)} bytes  sha256 {written['sha256'][:12]}…  (cell 1)" in text
    assert "\x1b" not in text and "stub-model <img" in text
    assert all(line.startswith(("  ", str(path))) for line in text.splitlines())  # no agent string broke a line
    report = json.loads(subprocess.run(cli + ["--format", "json"], capture_output=True, text=True, timeout=60,
                                       check=True).stdout)
    assert report["totals"]["turns"] == 1 and report["turns"][0]["record"] == r
    assert report["totals"]["files_written"][0]["sha256"] == written["sha256"]


def test_the_report_says_what_is_wrong_with_a_file_and_goes_on(tmp_path):
    empty = tmp_path / "empty.ipynb"
    nbformat.write(nbformat.v4.new_notebook(), empty)
    bad = tmp_path / "bad.ipynb"
    bad.write_text("{not json")
    done = subprocess.run([sys.executable, "-m", "acp_kernel", "report", str(bad), str(tmp_path / "missing.ipynb"),
                           str(empty)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert f"acp-kernel: {bad} is not a notebook" in done.stderr and "cannot read" in done.stderr
    assert "no agent turns with a record" in done.stdout
