"""The demo agent's ``signin`` (URL-mode elicitation), on the wire: the real agent
process, our Connection, a real HTTP request to the page it serves on 127.0.0.1."""

from __future__ import annotations

import asyncio
import urllib.request
from pathlib import Path
from typing import Any

from acp import schema

from .test_demo_agent import FULL_CAPS, Client, cwd, state_dir  # noqa: F401 - fixtures

URL_CAPS = {**FULL_CAPS, "elicitation": {"form": {}, "url": {}}}


async def _client(state_dir: Path, caps: dict[str, Any], action: str) -> tuple[Client, list[dict], list[str]]:
    c = await Client(state_dir, caps).start()
    asked: list[dict] = []
    completed: list[str] = []

    async def create(params: Any) -> dict[str, Any]:
        schema.CreateUrlSessionElicitationRequest.model_validate(params)
        asked.append(params)
        c._changed.set()
        return {"action": action}

    def complete(params: Any) -> None:
        schema.CompleteElicitationNotification.model_validate(params)
        completed.append(params["elicitationId"])
        c._changed.set()

    c.conn.on_request("elicitation/create", create)
    c.conn.on_notification("elicitation/complete", complete)
    await c.initialize()
    return c, asked, completed


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=10) as r:  # noqa: S310 - a 127.0.0.1 URL the test checked
        return r.read()


async def test_signin_completes_only_when_the_accepted_page_loads(state_dir: Path, cwd: Path) -> None:
    c, asked, completed = await _client(state_dir, URL_CAPS, "accept")
    try:
        sid = (await c.new_session(cwd))["sessionId"]
        turn = asyncio.ensure_future(c.prompt(sid, "signin", timeout=60))
        await c.wait_for(lambda: "waiting for it to load" in c.text(sid))
        (params,) = asked
        assert params["url"].startswith("http://127.0.0.1:") and params["url"].endswith("/signin/" + params["elicitationId"])
        assert completed == [] and not turn.done()
        assert b"Signed in" in await asyncio.to_thread(_get, params["url"])
        assert (await turn)["stopReason"] == "end_turn"
        assert completed == [params["elicitationId"]] and "Signed in" in c.text(sid)
        assert b"Nothing to sign in to" in await asyncio.to_thread(_get, params["url"])  # once only
    finally:
        await c.close()


async def test_signin_declined_or_not_offered(state_dir: Path, cwd: Path, tmp_path: Path) -> None:
    c, asked, completed = await _client(state_dir, URL_CAPS, "decline")
    try:
        sid = (await c.new_session(cwd))["sessionId"]
        assert (await c.prompt(sid, "signin"))["stopReason"] == "end_turn"
        assert len(asked) == 1 and completed == [] and "not signed in" in c.text(sid)
    finally:
        await c.close()
    other = tmp_path / "other-state"
    other.mkdir()
    c, asked, completed = await _client(other, FULL_CAPS, "accept")
    try:
        sid = (await c.new_session(cwd))["sessionId"]
        assert (await c.prompt(sid, "signin"))["stopReason"] == "end_turn"
        assert asked == [] and "did not offer to open pages" in c.text(sid)
    finally:
        await c.close()
