"""The ACP schema models are imported while an agent starts, off the event loop's
thread, so the agent's first question does not wait for them (issue 25: a question
deep in a long turn waited about a second for this import)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from tests.conftest import AGENTS

SCRIPT = textwrap.dedent(f"""
    import asyncio, json, sys, threading
    from acp_kernel.client.registry import AgentSpec
    from acp_kernel.client.session import connect

    async def main():
        assert "acp_kernel.protocol.schema" not in sys.modules
        spec = AgentSpec(name="scripted", title="scripted",
                         command=(sys.executable, {str(AGENTS / "scripted_agent.py")!r}, json.dumps({{}})))
        client = await connect(spec)
        try:
            loop_thread = threading.current_thread()
            importers = [t for t in threading.enumerate() if t.name == "acp-schema-import"]
            for t in importers:
                t.join(60)
            print(json.dumps({{"importers": len(importers), "loaded": "acp_kernel.protocol.schema" in sys.modules,
                               "main": loop_thread is threading.main_thread()}}))
        finally:
            await client.close()

    asyncio.run(main())
""")


def test_the_schema_is_imported_in_a_thread_while_the_agent_starts() -> None:
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120,
                         stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr[-3000:]
    got = out.stdout.strip().splitlines()[-1]
    # Either the thread is still there (joined above) or it has finished: the module is loaded
    # without any request having needed it, and the loop ran on the main thread meanwhile.
    assert '"loaded": true' in got and '"main": true' in got, got
