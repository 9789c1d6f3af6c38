"""``do_execute``'s last resort: an exception nobody expected becomes an error
reply whose error output says it once, and the kernel keeps answering.

The kernel here is the real one, started by jupyter_client from a kernelspec
whose argv runs :mod:`tests.kernel.faulty_kernel` (the ACP kernel with
``Controller.prompt`` made to raise). Before the fix, the branch itself raised
``TypeError`` (``safe.code`` shadowed by the cell's source), so the error
escaped ``do_execute`` and the cell never got an error reply."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from .conftest import KernelHarness, running_kernel
from .faulty_kernel import MARKER

HERE = Path(__file__).resolve().parent


def _faulty_spec(root: Path) -> Path:
    spec = root / "kernels" / "acp"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, str(HERE / "faulty_kernel.py"), "-f", "{connection_file}"],
        "display_name": "ACP Agent (a fault put in)",
        "language": "markdown",
        "interrupt_mode": "signal",
    }))
    return root


async def test_internal_error_is_an_error_reply_and_the_kernel_lives(kernel_env, tmp_path, monkeypatch):
    root = _faulty_spec(tmp_path / "faulty")
    monkeypatch.setenv("JUPYTER_PATH", str(root))
    env = dict(kernel_env, JUPYTER_PATH=str(root), PYTHONPATH=str(HERE.parent.parent))
    async with running_kernel(env, tmp_path / "work") as (km, kc):
        k = KernelHarness(km, kc)
        await k.announce_widgets()
        r = await k.execute(f"please {MARKER} now", timeout=60)

        content = r.reply["content"]
        assert content["status"] == "error"
        assert content["ename"] == "RuntimeError"
        # One line, as nbclient and papermill show a reason: the newline did not split it.
        assert "\n" not in content["evalue"] and content["evalue"].startswith("<img src=x")
        errors = [m for m in r.outputs if m["msg_type"] == "error"]
        assert [e["content"]["ename"] for e in errors] == ["RuntimeError"]
        # Said once: the error output alone (no display saying it again), its traceback
        # (shown as text) with the rest of the message, escape sequences removed, and the note.
        assert [m["msg_type"] for m in r.outputs if m["msg_type"] in ("display_data", "stream")] == []
        shown = "\n".join(errors[0]["content"]["traceback"])
        assert shown.startswith("RuntimeError: <img src=x") and "the kernel is still alive" in shown
        assert "\x1b" not in shown and "\x07" not in shown

        # The kernel still answers: a command and a plain cell both get replies.
        after = await k.execute("%help", timeout=60)
        assert after.status == "ok" and "%agent" in after.text()
        again = await k.execute(f"{MARKER} again", timeout=60)
        assert again.status == "error" and again.reply["content"]["ename"] == "RuntimeError"
