"""How long stopping takes: the speed figures the tests used to assert (issue 22).

The tests wait on the event (a cancelled turn, a cell given back) with a generous
timeout; the time it takes is a figure, printed here, never asserted:

- acp kernel, demo ``slow``: its first text -> interrupt -> the cell's reply;
- acp kernel, an agent that ignores ``session/cancel`` (and stdin EOF): "busy" ->
  interrupt -> the cell's reply (the client's cancel grace, then the forced end);
- magics, ``%%acp slow``: first display -> interrupt -> the cell's reply;
- ``%%shell --timeout 1`` with two background sleepers: execute -> reply (the
  timeout plus killing the group and the tree);
- library: ``session.cancel(grace=0.3)`` against an agent that ignores it; a turn of
  10,000 notifications; a turn carrying one 100 MB line (skipped at the default limit).

``python benchmarks/interrupt.py [--rounds N]`` prints a markdown table (median and
max over the rounds). Uses the tests' harnesses (real kernels via jupyter_client, the
scripted agent), so run it from a checkout with the test extra installed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable
from pathlib import Path

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from acp_kernel.frontends.install import install  # noqa: E402
from tests.conftest import wait_text  # noqa: E402
from tests.faults.conftest import open_session  # noqa: E402
from tests.kernel.conftest import KernelHarness, running_kernel, scripted_command  # noqa: E402
from tests.magics.conftest import start, stop  # noqa: E402

STUCK = {"on_cancel": "ignore", "ignore_eof": True, "prompts": {"go": [{"chunk": "busy"}, {"sleep": 3600}]}}
GRANDCHILDREN = "sleep 30 & echo A=$!; setsid sleep 31 & echo B=$!; wait"
WAIT = 120  # every wait's timeout: a figure that never comes is an error, not a number


def _env(base: Path) -> dict[str, str]:
    prefix = base / "prefix"
    install(prefix=str(prefix))
    env = dict(os.environ)
    env.update({"JUPYTER_PATH": str(prefix / "share" / "jupyter"),
                "ACP_KERNEL_STATE": str(base / "state" / "sessions.json"),
                "ACP_KERNEL_CONFIG": str(base / "acp_kernel.json"),
                "ACP_DEMO_STATE_DIR": str(base / "demo-state")})
    env.pop("ACP_KERNEL_AGENT", None)
    env.pop("JPY_SESSION_NAME", None)
    (base / "work").mkdir(exist_ok=True)
    return env


async def _interrupt_after(harness: KernelHarness, code: str, needle: str) -> float:
    """Run ``code``; once ``needle`` shows in an output, interrupt; seconds to the reply."""
    seen = asyncio.get_running_loop().create_future()

    async def on_output(msg: dict) -> None:
        if not seen.done() and needle in str(msg["content"]):
            seen.set_result(None)

    cell = asyncio.ensure_future(harness.execute(code, on_output=on_output, timeout=WAIT))
    await asyncio.wait_for(seen, WAIT)
    t0 = time.monotonic()
    await harness.km.interrupt_kernel()
    await asyncio.wait_for(cell, WAIT)
    return time.monotonic() - t0


async def kernel_figures(env: dict[str, str], cwd: Path) -> dict[str, float]:
    async with running_kernel(env, cwd) as (km, kc):
        k = KernelHarness(km, kc)
        await k.announce_widgets()
        slow = await _interrupt_after(k, "slow", "Streaming 100 chunks")
        await k.execute(f"%agent --command {scripted_command(STUCK)}")
        stuck = await _interrupt_after(k, "go", "busy")
        res = await k.execute("%%shell --timeout 1\n" + GRANDCHILDREN, timeout=WAIT)
        return {"acp kernel: interrupt demo `slow` -> reply": slow,
                "acp kernel: interrupt an agent that ignores cancel -> reply": stuck,
                "acp kernel: `%%shell --timeout 1` (two sleepers) -> reply": res.seconds}


async def magics_figures(env: dict[str, str], cwd: Path) -> dict[str, float]:
    h = await start("python3", env, str(cwd))
    try:
        await h.execute("%load_ext acp_kernel", timeout=WAIT)
        await h.execute("%acp connect demo", timeout=WAIT)
        return {"magics: interrupt `%%acp slow` -> reply": await _interrupt_after(h, "%%acp\nslow", "Streaming")}
    finally:
        await stop(h)


async def _timed(coro: Awaitable) -> float:
    t0 = time.monotonic()
    await asyncio.wait_for(coro, WAIT)
    return time.monotonic() - t0


async def library_figures() -> dict[str, float]:
    out: dict[str, float] = {}
    client, session = await open_session({**STUCK, "prompt": [{"chunk": "busy"}, {"sleep": 3600}]})
    try:
        turn = session.begin("go")
        await wait_text(turn, "busy", WAIT)
        out["library: cancel(grace=0.3), agent ignores it -> turn ended"] = await _timed(session.cancel(grace=0.3))
    finally:
        await client.close()
    client, session = await open_session({"prompts": {"go": [{"burst": 10_000}]}})
    try:
        out["library: turn of 10,000 notifications"] = await _timed(session.prompt("go"))
    finally:
        await client.close()
    client, session = await open_session({"prompts": {"go": [{"chunk": "a"}, {"big_line": 100_000_000}, {"chunk": "b"}]}})
    try:
        out["library: turn with one 100 MB line (skipped)"] = await _timed(session.prompt("go"))
    finally:
        await client.close()
    return out


async def one_round(base: Path) -> dict[str, float]:
    env = _env(base)
    figures = await library_figures()
    figures.update(await kernel_figures(env, base / "work"))
    figures.update(await magics_figures(env, base / "work"))
    return figures


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args(argv)
    runs: list[dict[str, float]] = []
    for _ in range(args.rounds):
        with tempfile.TemporaryDirectory(prefix="acp-bench-interrupt-") as tmp:
            runs.append(asyncio.run(one_round(Path(tmp))))
    print(f"### Stopping ({args.rounds} rounds; seconds)\n")
    print("| what | median | max |\n|---|---:|---:|")
    for name in runs[0]:
        values = [r[name] for r in runs]
        print(f"| {name} | {statistics.median(values):.2f} | {max(values):.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
