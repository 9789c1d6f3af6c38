"""Real ACP adapters close and resume a session (issue 27), offline against the stub model.

Through the client itself (no kernel): a turn, ``session/close`` (where the adapter
advertises it, and answered without an error), ``session/resume`` of the closed
session and a second turn in it; then ``session/delete`` and ``logout`` where
advertised. Run on request only (``ACP_REALCLIS=1``, see conftest.py).

Seen (2026-12): claude-agent-acp 0.49.0 offers list, resume, close, delete, fork and
additionalDirectories, no logout, and still lists a session it answered the delete of;
codex-acp 0.16.0 offers list, resume, close and logout.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from clis import ROOT, prepare  # noqa: E402
from notebook_mcp_real import ACP_AGENTS  # noqa: E402
from stub_model_server import StubServer  # noqa: E402

from acp_kernel.client.host import ClientSettings  # noqa: E402
from acp_kernel.client.registry import AgentSpec  # noqa: E402
from acp_kernel.client.session import Client  # noqa: E402

pytestmark = pytest.mark.realcli


@pytest.mark.parametrize("name", ["claude-agent-acp", "codex-acp"])
async def test_a_real_adapter_closes_and_resumes(name, tmp_path):
    agent = ACP_AGENTS[name]
    if not agent.installed():
        pytest.skip(f"{name}: {agent.package} is not installed under {ROOT} (run: bash tests/realclis/install.sh)")
    server = StubServer(0, tmp_path / "stub.jsonl").start()
    try:
        setup = prepare(agent.profile, server.url, tmp_path / "home", tmp_path / "cwd")
        spec = AgentSpec(name=name, title=name, command=tuple(agent.argv()), env={**setup.env, **dict(agent.env)})
        cwd = str(tmp_path / "cwd")
        client = await Client(spec, cwd=cwd, settings=ClientSettings(permissions="allow-all")).start()
        try:
            assert client.can("close") and client.can("resume"), client.capabilities
            session = await client.new_session()
            turn = await asyncio.wait_for(session.prompt("say hello"), 120)
            assert turn.stop_reason == "end_turn", turn.error
            assert await client.close_session(session.id) is None  # sent, and answered without an error
            resumed = await client.load_session(session.id, cwd)
            turn = await asyncio.wait_for(resumed.prompt("say hello again"), 120)
            assert turn.stop_reason == "end_turn", turn.error
            if client.can("delete"):
                assert await client.close_session(resumed.id) is None
                await client.delete_session(session.id)
            if client.can("logout"):
                await client.logout()
        finally:
            await client.close()
    finally:
        server.stop()
