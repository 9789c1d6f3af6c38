"""The ACP schema models are imported while an agent starts, off the event loop's
thread, so the agent's first question does not wait for them (issue 25: a question
deep in a long turn waited about a second for this import); and the client is
started only once that import has ended, so it never shares the GIL with a turn
(issue 25: a fast agent's first turn streamed at 0.75 of the floor beside it)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from tests.conftest import AGENTS

SCRIPT = textwrap.dedent(f"""
    import asyncio, json, sys, threading
    from acp_kernel.client.registry import AgentSpec
    from acp_kernel.client.session import connect

    importers = []

    class Spy:
        # Records which thread imports the schema module; finds nothing itself.
        def find_spec(self, name, path=None, target=None):
            if name == "acp_kernel.protocol.schema":
                importers.append(threading.current_thread().name)
            return None

    sys.meta_path.insert(0, Spy())

    async def main():
        assert "acp_kernel.protocol.schema" not in sys.modules
        spec = AgentSpec(name="scripted", title="scripted",
                         command=(sys.executable, {str(AGENTS / "scripted_agent.py")!r}, json.dumps({{}})))
        client = await connect(spec)
        try:
            # The thread may not have exited yet, but its import has ended: the module is whole
            # (it is in sys.modules from the import's start; ``__all__`` is its last line).
            module = sys.modules.get("acp_kernel.protocol.schema")
            import gc
            print(json.dumps({{"importers": importers, "loaded": hasattr(module, "__all__"),
                               "frozen": gc.get_freeze_count()}}))
        finally:
            await client.close()

    asyncio.run(main())
""")


def test_the_schema_is_imported_in_a_thread_while_the_agent_starts_and_done_when_the_client_is() -> None:
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120,
                         stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr[-3000:]
    got = out.stdout.strip().splitlines()[-1]
    # A user's process (the library, the magics): its collector is left alone.
    assert got == '{"importers": ["acp-schema-import"], "loaded": true, "frozen": 0}', got


WAIT = textwrap.dedent("""
    import asyncio, sys, time
    from acp_kernel.protocol import warm

    async def main():
        t0 = time.perf_counter()
        await warm.schema_imported(5)  # none started: at once
        none = time.perf_counter() - t0
        assert "acp_kernel.protocol.schema" not in sys.modules
        warm.schema_in_background()
        await warm.schema_imported(60)
        print(none < 1, hasattr(sys.modules.get("acp_kernel.protocol.schema"), "__all__"))
        await warm.schema_imported(5)  # ended: at once

    asyncio.run(main())
""")


def test_waiting_for_the_import_returns_when_it_ends_or_at_once_when_none_runs() -> None:
    out = subprocess.run([sys.executable, "-c", WAIT], capture_output=True, text=True, timeout=120,
                         stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == ["True", "True"], out.stdout


CLI = textwrap.dedent("""
    import sys
    from acp_kernel.frontends.cli import main

    code = main(sys.argv[1:])
    import gc
    print("FROZEN", gc.get_freeze_count() > 1000)
    print("SCHEMA", hasattr(sys.modules.get("acp_kernel.protocol.schema"), "__all__"), code)
""")


def _cli(tmp_path, scenario: dict) -> list[str]:
    agent = f"{sys.executable} {AGENTS / 'scripted_agent.py'} {tmp_path / 'scenario.json'}"
    (tmp_path / "scenario.json").write_text(json.dumps(scenario))
    out = subprocess.run([sys.executable, "-c", CLI, "prompt", "--permissions", "allow-all", "--agent-command", agent,
                          "go"], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL, cwd=tmp_path)
    return out.stdout.splitlines()


def test_the_cli_imports_the_schema_only_when_the_agent_asks_something_that_needs_it(tmp_path) -> None:
    # One turn and exit: warming the import up would make every run pay for it.
    lines = _cli(tmp_path, {"prompt": [{"chunk": "plain answer"}]})
    assert "plain answer" in "\n".join(lines) and lines[-1] == "SCHEMA False 0", lines
    # A process of ours: what start-up made is out of the collector's sight once the agent started.
    assert lines[-2] == "FROZEN True", lines
    # A request the models validate: imported then, and the turn goes on.
    lines = _cli(tmp_path, {"prompt": [
        {"request": {"method": "fs/write_text_file",
                     "params": {"sessionId": "$SID", "path": str(tmp_path / "f.txt"), "content": "x"}}},
        {"chunk": "after the write"}]})
    assert "after the write" in "\n".join(lines) and lines[-1] == "SCHEMA True 0", lines
    assert (tmp_path / "f.txt").read_text() == "x"


async def test_a_start_cancelled_while_it_waits_for_the_import_ends_the_agent(monkeypatch) -> None:
    """Client.start waits for the import after ``initialize``; cancelled there (an interrupted
    connect), it closes what it started: nobody else holds the client yet."""
    import asyncio
    import os

    from acp_kernel.client import session as session_mod
    from acp_kernel.client.registry import AgentSpec

    waiting = asyncio.Event()

    async def never(timeout: float) -> None:
        waiting.set()
        await asyncio.Event().wait()

    monkeypatch.setattr(session_mod, "schema_imported", never)
    spec = AgentSpec(name="scripted", title="scripted",
                     command=(sys.executable, str(AGENTS / "scripted_agent.py"), json.dumps({})))
    client = session_mod.Client(spec)
    task = asyncio.create_task(client.start())
    await asyncio.wait_for(waiting.wait(), 60)
    pid = client.transport.pid
    task.cancel()
    try:
        await asyncio.wait_for(task, 60)
    except asyncio.CancelledError:
        pass
    assert not client.alive
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        pass  # gone, as it should be
    else:
        raise AssertionError(f"the agent {pid} outlived the cancelled start")
