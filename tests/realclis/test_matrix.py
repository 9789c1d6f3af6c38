"""Issue 12's acceptance check against the real agent CLIs, one test per CLI.

Each test runs tests/realclis/run_matrix.py's sequence for one CLI (Run All of
``%passthrough NAME`` + three cells + a two-line cell, an interrupted SLOW reply,
one more cell, ``%passthrough stop``) in a real acp kernel, the CLI pointed at the
stub model server. It runs on request only (``ACP_REALCLIS=1``, see conftest.py) and skips,
saying why, when the CLI is not installed: run ``bash tests/realclis/install.sh`` first.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from clis import PROFILES, ROOT  # noqa: E402

pytestmark = pytest.mark.realcli


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_real_cli_through_passthrough(name, tmp_path):
    profile = PROFILES[name]
    if not profile.installed():
        pytest.skip(f"{name}: {profile.package} is not installed under {ROOT} "
                    f"(run: bash tests/realclis/install.sh; REALCLIS_HOME moves it)")
    from run_matrix import run_one

    row = run_one(name, tmp_path, float(os.environ.get("REALCLI_CELL_TIMEOUT", "60")), {})
    problems = []
    if row.replies != "3/3 sent, 3/3 shown":
        problems.append(f"replies: {row.replies}")
    if not row.two_line_one_message:
        problems.append("the two-line cell was not one message")
    if not row.interrupt_stops:
        problems.append(f"interrupt did not stop the reply (cell said: {row.interrupt_says!r})")
    if row.next_cell != "sent, shown":
        problems.append(f"the cell after the interrupt: {row.next_cell}")
    if row.processes_left:
        problems.append(f"processes left after %passthrough stop: {row.processes_left}")
    assert not problems, f"{name} {row.version}: " + "; ".join(problems + row.notes)
