"""Real agents use the ``notebook`` MCP server (issue 16), offline against the stub model.

Each test runs one of tests/realclis/notebook_mcp_real.py's sequences in a real kernel: the stub
model tells the real CLI to call the server's tool (``TOOL:<name> <json>``), the CLI calls it
over stdio, and the stub quotes the result back, so the turn shows it:

- a real ACP agent in a python3 kernel with the magics: ``variables`` shows ``x`` after ``x = 5``,
  ``execute`` of ``x = 41 + 1`` makes ``x`` 42 in the next cell, and the server is gone after
  ``%acp disconnect``;
- the same agent as the ACP kernel's agent: it is offered ``cells`` and the edit tools (no execute,
  no variables), and the reply of ``cells`` quotes the cells run before;
- Claude Code in a passthrough terminal, from the generated ``--mcp-config`` file.

Run on request only (``ACP_REALCLIS=1``, see conftest.py); skipped, saying why, when the CLI is not
installed: run ``bash tests/realclis/install.sh`` first (it also installs the Claude Agent ACP adapter).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from clis import PROFILES, ROOT  # noqa: E402
from notebook_mcp_real import (ACP_AGENTS, NOTEBOOK_TOOLS, McpRow, run_acp_kernel, run_passthrough,  # noqa: E402
                               run_python3, tool_of)

pytestmark = pytest.mark.realcli
TIMEOUT = float(os.environ.get("REALCLI_CELL_TIMEOUT", "90"))


def _need(installed: bool, name: str, package: str) -> None:
    if not installed:
        pytest.skip(f"{name}: {package} is not installed under {ROOT} "
                    f"(run: bash tests/realclis/install.sh; REALCLIS_HOME moves it)")


def _explain(row: McpRow) -> str:
    return (f"{row.agent} in {row.kernel}: tools {row.tools_seen}, calls {row.calls}, results {row.results}, "
            f"notes {row.notes}")


@pytest.mark.parametrize("name", sorted(ACP_AGENTS))
def test_a_real_acp_agent_calls_variables_and_execute_in_a_python3_kernel(name, tmp_path):
    agent = ACP_AGENTS[name]
    _need(agent.installed(), name, agent.package)
    row = run_python3(name, tmp_path, TIMEOUT)
    why = _explain(row)
    assert row.connected, why
    # the agent got our server from session/new, started it, and offered its tools to the model
    assert row.servers_started == 1, why
    assert sorted(tool_of(n) for n in row.tools_seen) == sorted(NOTEBOOK_TOOLS), why
    # (Codex names a tool of a Responses namespace: the stub lists it as "<namespace>.<tool>")
    assert [".".join(filter(None, (c.get("namespace"), c["name"]))) for c in row.calls] == [
        n for t in ("variables", "execute") for n in row.tools_seen if n.endswith(t)], why
    assert row.variables_ok, f"the reply did not show x: {row.variables_reply!r}; " + why
    assert row.execute_ok, "x is not 42 after the execute turn; " + why
    assert not row.servers_left, f"server processes left after %acp disconnect: {row.servers_left}; " + why


@pytest.mark.parametrize("name", sorted(ACP_AGENTS))
def test_a_real_acp_agent_in_the_acp_kernel_gets_cells_and_the_edit_tools(name, tmp_path):
    """No Python namespace: no execute, no variables (the edit tools: test_edit_tools_real.py)."""
    agent = ACP_AGENTS[name]
    _need(agent.installed(), name, agent.package)
    row = run_acp_kernel(name, tmp_path, TIMEOUT)
    why = _explain(row)
    assert row.connected, why
    assert row.servers_started == 1, why
    assert sorted(tool_of(n) for n in row.tools_seen) == ["cells", "delete_cell", "edit_cell", "insert_cell"], why
    assert row.cells_ok, f"the reply did not quote the first cell: {row.cells_reply!r}; " + why
    assert not row.servers_left, f"server processes left after the kernel shut down: {row.servers_left}; " + why


def test_claude_code_passthrough_calls_the_server_from_the_generated_config(tmp_path):
    profile = PROFILES["claude"]
    _need(profile.installed(), "claude", profile.package)
    row = run_passthrough("claude", tmp_path, TIMEOUT)
    why = _explain(row)
    assert row.connected, why
    assert any(n.startswith("argv: --mcp-config ") for n in row.notes), why
    assert row.servers_started == 1, why
    assert sorted(row.tools_seen) == sorted(f"mcp__notebook__{t}" for t in NOTEBOOK_TOOLS), why
    assert row.variables_ok, f"the screen did not show x: {row.variables_reply!r}; " + why
    assert row.execute_ok, "x is not 42 after the execute prompt; " + why
    assert not row.servers_left, f"server processes left after %acp disconnect: {row.servers_left}; " + why
