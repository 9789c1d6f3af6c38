"""The demo agent's side of a session's whole life, through the real client
over real pipes: its title update, additional directories (read through the
client's file policy), session/list reporting them, logout, close and delete."""

from __future__ import annotations

import asyncio
import sys

from acp_kernel.client.host import ClientSettings
from acp_kernel.client.registry import AgentSpec
from acp_kernel.client.session import Client


def demo(state_dir: str) -> AgentSpec:
    return AgentSpec(name="demo", title="demo", command=(sys.executable, "-m", "acp_kernel.demo.agent"),
                     env={"ACP_DEMO_STATE_DIR": state_dir})


async def test_the_demo_offers_and_answers_every_method_of_a_session_life(tmp_path):
    ws, lib, other = tmp_path / "ws", tmp_path / "lib", tmp_path / "other"
    for d in (ws, lib, other):
        d.mkdir()
    (lib / "a.txt").write_text("from lib\n")
    (other / "b.txt").write_text("not given\n")
    settings = ClientSettings(permissions="allow-all", extra_roots=[str(lib)])
    client = await Client(demo(str(tmp_path / "state")), cwd=str(ws), settings=settings).start()
    try:
        for feature in ("close", "delete", "additionalDirectories", "logout", "list", "resume"):
            assert client.can(feature), feature
        session = await client.new_session()
        assert session.additional_directories == [str(lib)]
        turn = await asyncio.wait_for(session.prompt("workspace"), 30)
        assert session.title == "workspace" and session.updated_at, session
        assert f"`{lib}` (an additional directory)" in turn.text
        assert "it begins: `from lib`" in turn.text, turn.text

        listed = await client.list_sessions(str(ws))
        assert [s.get("additionalDirectories") for s in listed if s["sessionId"] == session.id] == [[str(lib)]]

        # A new session gets the roots as they are then, and only those.
        settings.extra_roots[:] = [str(other)]
        assert await client.close_session(session.id) is None
        second = await client.new_session()
        turn = await asyncio.wait_for(second.prompt("workspace"), 30)
        assert "it begins: `not given`" in turn.text and "from lib" not in turn.text

        await client.logout()
        assert await client.close_session(second.id) is None
        await client.delete_session(session.id)
        assert session.id not in {s["sessionId"] for s in await client.list_sessions(str(ws))}
    finally:
        await client.close()
