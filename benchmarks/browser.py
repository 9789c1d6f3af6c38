"""Browser benchmarks' shared harness: JupyterLab on 127.0.0.1 (the browser tests'
server and Chromium settings) and rounds of one measurement, each in a page of its own."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any


def lab_rounds(prefix: str, rounds: int, one: Callable[[Any, Any, int, Path], dict[str, Any]]) -> dict[str, Any]:
    """Start JupyterLab, run ``one(lab, context, i, base)`` (``base``: the run's temp dir) for each round in a persistent
    Chromium context, end every session, stop JupyterLab; ``{"rounds": [...]}``."""
    from playwright.sync_api import expect, sync_playwright

    from tests.browser import conftest as bc

    if bc.SKIP_REASON:
        raise RuntimeError(bc.SKIP_REASON)
    base = tempfile.mkdtemp(prefix=prefix)
    gen = bc._serve(Path(base), "jupyterlab", [
        "--LabApp.news_url=", "--LabServerApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"])
    lab = next(gen)
    done: list[dict[str, Any]] = []
    try:
        with sync_playwright() as pw:
            context = pw.chromium.launch_persistent_context(
                os.path.join(base, "profile"), executable_path=bc.CHROMIUM, headless=True,
                args=bc.CHROMIUM_ARGS, viewport={"width": 1280, "height": 900})
            context.set_default_timeout(bc.WAIT)
            expect.set_options(timeout=bc.WAIT)
            try:
                for i in range(rounds):
                    done.append(one(lab, context, i, Path(base)))
            finally:
                context.close()
            end_sessions(lab, bc.TURN / 1000)
    finally:
        gen.close()  # stops JupyterLab's process group
        shutil.rmtree(base, ignore_errors=True)
    return {"rounds": done}


def end_sessions(lab: Any, timeout: float = 60) -> None:
    """Shut every notebook session's kernel down (a round's, or the run's)."""
    for sess in lab.api("GET", "/api/sessions"):
        lab.api("DELETE", f"/api/sessions/{sess['id']}", timeout=timeout)


def run_and_print(what: str, measure: Callable[[], dict[str, Any]]) -> int:
    """A browser worker's end: the figures as one JSON line on stdout, or the failure as the
    last line of stderr (the runner shows it)."""
    try:
        result = measure()
    except Exception as exc:  # noqa: BLE001 - the runner shows stderr's last line: make it the reason
        print(f"\n{what} failed: {(str(exc).strip().splitlines() or [type(exc).__name__])[0]}", file=sys.stderr)
        return 1
    sys.stdout.write(json.dumps(result) + "\n")
    return 0
