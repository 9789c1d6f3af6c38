"""A session's whole life through the ACP kernel and the magics, against the
scripted agent over real pipes: ``%new`` closes the old session, ``%sessions``
shows the titles the agent pushed (inert), ``%sessions delete``, ``%logout``
and ``%cwd add``, each where the agent offers it and said clearly where not."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

from tests.frontends.conftest import Front
from tests.hostile.render import visible_text
from tests.hostile.test_kernel_outputs import assert_inert
from tests.kernel.conftest import scripted_command
from tests.magics.conftest import start, stop
from tests.wire import test_session_life as wire
from tests.wire.test_session_life import OFFERS, WHEN



def scenario(record: Path, offers: dict) -> dict:
    """The wire test's scenario, with an older session listed and a ``read`` prompt."""
    base = wire.scenario(record, offers)
    listed = {"sessions": [{"sessionId": "old-1", "cwd": "/tmp", "title": "older"}]}
    read = [{"request": {"method": "fs/read_text_file",
                         "params": {"sessionId": "$SID", "path": str(record.parent / "lib" / "a.txt")}}}]
    # A %%acp cell's prompt keeps the cell's last newline.
    return {**base, "responses": {**base["responses"], "session/list": listed},
            "prompts": {"read": read, "read\n": read}}


async def connect(front, spec: dict) -> None:
    verb = "agent" if front.kind == "kernel" else "connect"
    await front.ok(f"{verb} --command {scripted_command(spec)}")


def sent(record: Path) -> list[dict]:
    return [m for m in map(json.loads, record.read_text().splitlines()) if "method" in m and "id" in m]


async def prompt(front, text: str):
    """A prompt cell no one can answer a question in (a headless run)."""
    return await front.harness.ok(text if front.kind == "kernel" else f"%%acp\n{text}", allow_stdin=False)


async def test_titles_close_delete_and_logout(front, tmp_path):
    record = tmp_path / "wire.jsonl"
    await connect(front, scenario(record, OFFERS))
    await prompt(front, "hi")
    first = [m for m in sent(record) if m["method"] == "session/new"][0]

    listed = await front.ok("sessions")
    assert_inert(listed)
    shown = " ".join(visible_text(m["content"]["data"]["text/html"]) for m in listed.displays()
                     if "text/html" in m["content"].get("data", {}))
    assert "<img src=x onerror=alert(1)>" in shown and "$x$ $$y$$" in shown and WHEN in shown, shown
    assert "older" in shown and "delete ID" in shown

    current = [m for m in sent(record) if m["method"] == "session/prompt"][0]["params"]["sessionId"]
    refused = front.error(await front.cmd(f"sessions delete {current}"))
    assert "current session" in refused and "\n" not in refused
    # This agent's list is fixed: it answers the delete and lists the session still, which is said.
    assert "but still lists it" in (await front.ok("sessions delete old-1")).text()
    assert "Logged out of" in (await front.ok("logout")).text()

    await front.ok("new")
    methods = [(m["method"], m["params"].get("sessionId")) for m in sent(record)]
    assert methods[-2:] == [("session/close", current), ("session/new", None)], methods
    assert ("session/delete", "old-1") in methods and ("logout", None) in methods
    assert ("session/delete", current) not in methods
    assert first["params"].get("additionalDirectories") is None


async def test_an_agent_that_offers_none_of_it(front, tmp_path):
    record = tmp_path / "wire.jsonl"
    await connect(front, scenario(record, {"sessionCapabilities": {"list": {}}}))
    await prompt(front, "hi")
    for line, says in (("logout", "does not offer logout"), ("sessions delete old-1", "does not delete sessions")):
        reason = front.error(await front.cmd(line))
        assert says in reason and "\n" not in reason, reason
    await front.ok("new")
    methods = [m["method"] for m in sent(record)]
    assert not {"session/close", "session/delete", "logout"} & set(methods), methods
    assert await front.harness.km.is_alive()


async def test_cwd_add_gives_the_agent_a_root_and_the_file_policy_exactly_that(front, tmp_path):
    record = tmp_path / "wire.jsonl"
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "a.txt").write_text("from lib\n")
    await connect(front, scenario(record, OFFERS))
    # Not given yet: the read is outside the workspace, and nobody can answer here.
    refused = (await prompt(front, "read")).text()
    assert "outside the workspace" in refused and "from lib" not in refused

    added = (await front.ok(f"cwd add {shlex.quote(str(lib))}")).text()
    assert f"Additional directories for new sessions: `{lib}`" in added
    assert "not given to the agent (for new sessions)" in (await front.ok("status")).text()
    await front.ok("new")
    assert f"- additional directories: `{lib}`" in (await front.ok("status")).text()
    assert "from lib" in (await prompt(front, "read")).text()
    news = [m for m in sent(record) if m["method"] == "session/new"]
    assert news[-1]["params"]["additionalDirectories"] == [str(lib)]

    assert "Additional directories" not in (await front.ok(f"cwd remove {shlex.quote(str(lib))}")).text()
    for line in ("cwd sideways /tmp", "cwd add"):
        assert "usage:" in front.error(await front.cmd(line)), line


async def test_cwd_add_with_an_agent_that_takes_no_directories(front, tmp_path):
    record = tmp_path / "wire.jsonl"
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "a.txt").write_text("from lib\n")
    await connect(front, scenario(record, {"sessionCapabilities": {"list": {}}}))
    await prompt(front, "hi")
    assert "takes none" in (await front.ok(f"cwd add {shlex.quote(str(lib))}")).text()
    said = (await front.ok("new")).text()
    assert "takes no additional directories" in said
    status = (await front.ok("status")).text()
    assert "not given to the agent (the agent takes none)" in status
    refused = (await prompt(front, "read")).text()
    assert "outside the workspace" in refused and "from lib" not in refused
    assert all("additionalDirectories" not in m["params"] for m in sent(record))


async def test_the_acp_kernel_closes_its_session_when_it_shuts_down(kernel_env, tmp_path):
    record = tmp_path / "wire.jsonl"
    harness = await start("acp", kernel_env, str(tmp_path))
    try:
        front = Front("kernel", harness)
        await connect(front, scenario(record, OFFERS))
        await prompt(front, "hi")
    finally:
        await stop(harness)  # a shutdown request: the kernel's do_shutdown, then its exit
    methods = [(m["method"], m["params"].get("sessionId")) for m in sent(record)]
    current = [sid for method, sid in methods if method == "session/prompt"][0]
    assert methods[-1] == ("session/close", current), methods


async def test_the_demo_agent_deletes_an_old_session(front):
    await prompt(front, "hello")
    first = re.search(r"session: `([^`]+)`", (await front.ok("status")).text()).group(1)
    assert " hello · updated " in (await front.ok("sessions")).text()  # its title, from session_info_update
    await front.ok("new")
    assert f"*Deleted session `{first}`.*" in (await front.ok(f"sessions delete {first}")).text()
    assert first not in (await front.ok("sessions")).text()
