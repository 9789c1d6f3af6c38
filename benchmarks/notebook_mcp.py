"""The ``notebook`` MCP server's cost: what a tool call adds to a kernel round trip.

``python benchmarks/notebook_mcp.py [run] [--calls N]`` starts a real python3 kernel through
jupyter_client, offers the server there for a bridge that allows everything and shows
nothing (so the figures are the server's path: MCP over stdio, the kernel client, the comm,
the code run on the kernel's main thread), connects the official ``mcp`` SDK's client to it,
and prints one JSON object on its last stdout line:

- ``start``: from spawning the server to its tools listed (the agent's first use);
- per call (p50 / p95 over ``N``): a plain ``execute_request`` of ``pass`` through
  jupyter_client (the floor: any client of the kernel pays it), ``variables``, ``execute``
  of ``pass``, ``cells``;
- ``execute`` printing 1 MB (the output bounded to 20,000 characters for the agent);
- the live ``cells`` of a 500-cell notebook, in-process (:func:`cells_500`): the page's
  snapshot validated, then laid out within its budget.

The section (``notebook_mcp(ctx)``, ``--only notebook-mcp``) runs it once.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from typing import Any

#: Runs in the kernel: a bridge that allows everything and discards the view.
BRIDGE = '''
from acp_kernel.notebook_mcp import offer as _offer
class _View:
    def write(self, name, text): pass
    def done(self, ok, summary): pass
class _Bridge:
    tools = frozenset({"execute", "variables", "cells"})
    def namespace(self): return get_ipython().user_ns
    def notebook_path(self): return None
    def history(self): return ["x = 1"] * 20
    async def authorize(self, code): return True, ""
    def started(self, code): return _View()
    def interrupted(self): pass
import json as _json
df_like = list(range(1000)); name = "benchmark"; x = 42
print(_json.dumps(_offer(_Bridge())))
'''


def _pcts(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {"p50_ms": round(statistics.median(ordered) * 1000, 2),
            "p95_ms": round(ordered[int(0.95 * (len(ordered) - 1))] * 1000, 2)}


async def _cell(kc: Any, code: str) -> str:
    msg_id = kc.execute(code)
    out = []
    while True:
        msg = await kc.get_iopub_msg(timeout=60)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] == "stream":
            out.append(msg["content"]["text"])
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            break
    reply = await kc.get_shell_msg(timeout=60)
    while reply["parent_header"].get("msg_id") != msg_id:
        reply = await kc.get_shell_msg(timeout=60)
    return "".join(out)


async def measure(calls: int) -> dict[str, Any]:
    from jupyter_client.manager import AsyncKernelManager
    from mcp import ClientSession, StdioServerParameters, stdio_client

    km = AsyncKernelManager(kernel_name="python3")
    await km.start_kernel()
    kc = km.client()
    kc.start_channels()
    try:
        await kc.wait_for_ready(timeout=60)
        entry = json.loads((await _cell(kc, BRIDGE)).strip().splitlines()[-1])
        floor = []
        for _ in range(calls):
            t = time.perf_counter()
            await _cell(kc, "pass")
            floor.append(time.perf_counter() - t)
        result: dict[str, Any] = {"calls": calls, "floor": _pcts(floor)}
        params = StdioServerParameters(command=entry["command"], args=entry["args"])
        with open(os.devnull, "w") as errlog:
            t0 = time.perf_counter()
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    await session.list_tools()
                    result["start_ms"] = round((time.perf_counter() - t0) * 1000, 1)
                    for tool, args in (("variables", {}), ("execute", {"code": "pass"}), ("cells", {})):
                        samples = []
                        for _ in range(calls):
                            t = time.perf_counter()
                            got = await session.call_tool(tool, args)
                            samples.append(time.perf_counter() - t)
                            if got.is_error:
                                raise RuntimeError(f"{tool}: {got.content}")
                        result[tool] = _pcts(samples)
                    t = time.perf_counter()
                    big = await session.call_tool("execute", {"code": "print('y' * 1_000_000)"})
                    result["print_1mb_ms"] = round((time.perf_counter() - t) * 1000, 1)
                    result["print_1mb_reply_chars"] = sum(len(c.text) for c in big.content if c.type == "text")
        return result
    finally:
        kc.stop_channels()
        await km.shutdown_kernel(now=True)


def cells_500(repeat: int = 20) -> dict[str, Any]:
    """The live ``cells`` on a 500-cell notebook, in this process: the page's snapshot
    (JSON, each cell with a 30-line source and a 200-line output) validated as the kernel
    does, then laid out within the budget. p50 over ``repeat``."""
    from acp_kernel.notebook_mcp import docwire, tools

    cells = [{"id": f"c{i}", "cell_type": "code", "execution_count": i + 1,
              "source": {"head": f"value_{i} = compute({i})\n" + "# a comment line\n" * 30},
              "outputs": [{"output_type": "stream", "name": "stdout", "text": {"head": f"{i}\n" * 200}}]}
             for i in range(500)]
    data = json.loads(json.dumps({"type": "snapshot", "id": 1, "active": 250, "cells": cells}))
    validate, layout = [], []
    for _ in range(repeat):
        t0 = time.perf_counter()
        snap = docwire.Snapshot.model_validate(data)
        t1 = time.perf_counter()
        text = tools.cells_from_snapshot(snap)
        layout.append(time.perf_counter() - t1)
        validate.append(t1 - t0)
    return {"validate_ms": statistics.median(validate) * 1000, "format_ms": statistics.median(layout) * 1000,
            "chars": len(text), "budget": tools.CELLS_BUDGET, "json_chars": len(json.dumps(data))}


def notebook_mcp(ctx: Any) -> Any:
    """The benchmark section for ``benchmarks/run.py`` (``--only notebook-mcp``)."""
    from benchmarks.run import Failed, Section, worker

    sec = Section("The notebook MCP server: a tool call against a plain kernel round trip (python3 kernel)",
                  ["path", "p50 ms", "p95 ms", "vs the floor (p50)"])
    print("  [notebook-mcp] a python3 kernel and the server", file=sys.stderr)
    try:
        r = worker(ctx, "run", "--calls", "50", script=os.path.abspath(__file__), timeout=300)
    except (Failed, OSError, ValueError, KeyError) as exc:
        sec.notes.append(f"failed: {exc}")
        return sec
    floor = r["floor"]["p50_ms"] or 1e-9
    for label, key in (("execute_request of `pass` (jupyter_client; the floor)", "floor"),
                       ("MCP `variables`", "variables"), ("MCP `execute` of `pass`", "execute"),
                       ("MCP `cells` (history of 20)", "cells")):
        row = r[key]
        sec.rows.append([label, f"{row['p50_ms']:.2f}", f"{row['p95_ms']:.2f}", f"{row['p50_ms'] / floor:.2f}x"])
    sec.notes.append(f"server start to tools listed: {r['start_ms']:.0f} ms; {r['calls']} calls per row")
    sec.notes.append(f"`execute` printing 1 MB: {r['print_1mb_ms']:.0f} ms; the agent got "
                     f"{r['print_1mb_reply_chars']:,} characters (head and tail, the cut said)")
    live = cells_500()
    sec.notes.append(f"live `cells` of a 500-cell notebook ({live['json_chars']:,} characters of snapshot "
                     f"JSON, in-process, p50 of 20): validated in {live['validate_ms']:.1f} ms, laid out in "
                     f"{live['format_ms']:.1f} ms; the answer {live['chars']:,} characters (budget "
                     f"{live['budget']:,})")
    return sec


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="notebook_mcp.py")
    p.add_argument("mode", nargs="?", choices=["run"], default="run")
    p.add_argument("--calls", type=int, default=50)
    args = p.parse_args(argv)
    print(json.dumps(asyncio.run(measure(args.calls))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
