"""The text CLI's tool call renderers (``view.transcript``) are imported while the agent
starts (``Client.start(meanwhile=...)``, the client idle then), not in the first tool call
of the turn: that import was 9 ms (3 ms now that ``acp_kernel.view`` imports its parts on
first use) of a 2,000-call turn's 26. Real processes: the CLI and a scripted agent."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys

import pytest

from acp_kernel.client.session import Client

from ..conftest import scripted_spec

HOSTILE = "<img src=x onerror=alert(1)> `a\nb` $x$ /tmp/a\nb.py"
SPY = """
import sys
from acp_kernel.client import session as s
from acp_kernel.frontends import cli as c
order = []
real_parts, real_begin = c._detail_parts, s.Session.begin
c._detail_parts = lambda: (order.append("renderers"), real_parts())[1]
def begin(self, *a, **k):
    order.append("turn")
    return real_begin(self, *a, **k)
s.Session.begin = begin
try:
    c.main(sys.argv[1:])
finally:
    print("ORDER", *order, file=sys.__stderr__)
"""


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_the_text_cli_imports_its_renderers_while_the_agent_starts(fmt):
    spec = scripted_spec({"prompt": [
        {"update": {"sessionUpdate": "tool_call", "toolCallId": "t1", "title": HOSTILE, "kind": "read", "status": "pending"}},
        {"update": {"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "completed",
                    "content": [{"type": "content", "content": {"type": "text", "text": HOSTILE}}]}}]})
    res = subprocess.run([sys.executable, "-c", SPY, "prompt", "--format", fmt, "--agent-command", shlex.join(spec.command),
                          "go"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    (said,) = [ln.split()[1:] for ln in res.stderr.splitlines() if ln.startswith("ORDER")]
    if fmt == "text":  # before the turn (then each tool call asks the cached ones: the spy sees those too)
        assert said[:2] == ["renderers", "turn"], said
        assert "<img" in res.stderr and "\x1b" not in res.stderr  # the call's detail shown, as text
    else:  # json needs none
        assert said == ["turn"]
        assert any(json.loads(ln).get("type") == "tool_call" for ln in res.stdout.splitlines())


async def test_meanwhile_runs_once_the_agent_is_spawned_before_it_answers_initialize():
    client = Client(scripted_spec({}))
    seen: list[tuple[bool, dict]] = []
    await client.start(meanwhile=lambda: seen.append((client.transport.pid is not None, dict(client.init))))
    try:
        assert seen == [(True, {})] and client.init  # spawned, not yet initialized; then initialized
    finally:
        await client.close()
