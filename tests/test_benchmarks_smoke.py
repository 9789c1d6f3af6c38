"""``python -m benchmarks --quick``, as a smoke run: every section below runs
(small sizes, one round) and prints its figures. What they are is not judged
here (speed lives in benchmarks/, and CI's machine is shared); that each
section still runs is: a benchmark nobody ran since a change is a benchmark
that no longer works.

The sections that drive JupyterLab in Chromium (``shell-flood``,
``longturn-browser``, ``proposals-browser``) are left out: each starts a
JupyterLab and a browser of its own beside the browser tests' (tests/browser
runs the same pages), and they would double this run's time. ``--no-acpx``:
no npm install of acpx (a comparison, not our code).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SECTIONS = ["chunks", "tools", "files", "latency", "startup", "terminal", "kernel", "iopub", "passthrough", "hostile",
            "longturn", "widget-state", "notebook-mcp"]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_quick_benchmarks_run_and_print_their_figures(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--quick", "--no-acpx", "--no-write", "--only", ",".join(SECTIONS)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=840)
    report = proc.stdout
    assert proc.returncode == 0, proc.stderr[-3000:]
    ran = re.findall(r"^== (\S+)$", proc.stderr, re.M)
    assert ran == SECTIONS, proc.stderr[-3000:]
    # Each section is a table with at least one row of figures, and none says it failed.
    tables = re.findall(r"^### .+\n\n\|.+\|\n\|[-| ]+\|\n((?:\|.+\|\n)+)", report, re.M)
    assert len(tables) >= len(SECTIONS), report
    failed = [line for line in report.splitlines() if re.search(r"\bfailed\b", line, re.I)]
    assert failed == [], "\n".join(failed)
    assert re.search(r"^- command: `python -m benchmarks --quick ", report, re.M), report
