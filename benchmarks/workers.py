"""In-process measurements, each run in a fresh interpreter by the runner.

``python benchmarks/workers.py MODE [options]`` prints one JSON object on its
last stdout line. A fresh process per measurement keeps heaps, imports and
garbage-collector state from leaking between contenders.

Modes:
  floor-file   read a dumped stream file and ``json.loads`` every line
  floor-pipe   a minimal blocking client: handshake, prompt, ``json.loads``
               every line from the agent's stdout until the prompt's answer
  lib          acp-kernel's Client + Session.prompt (a no-op subscriber)
  sdk          the official SDK's ClientSideConnection (``acp`` package)
  init-lib     import time, then spawn + ``initialize`` time of the library
  init-sdk     spawn + ``initialize`` time of the SDK
  terminal     acp-kernel's Terminal on a command printing many bytes
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import subprocess
import sys
import time

T_START = time.perf_counter()
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


def _emit(result: dict) -> None:
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()


def _percentiles(values: list[int]) -> dict:
    if not values:
        return {"count": 0}
    values = sorted(values)
    n = len(values)

    def pick(q: float) -> float:
        return values[min(n - 1, int(q * n))] / 1000.0  # ns -> us

    return {"count": n, "p50_us": pick(0.50), "p90_us": pick(0.90), "p99_us": pick(0.99), "max_us": values[-1] / 1000.0}


def _stamp_of(text: str) -> int:
    return int(text[:19])


# -- the floor ----------------------------------------------------------------


def floor_file(args: argparse.Namespace) -> dict:
    loads = json.loads
    n = 0
    t0 = time.perf_counter()
    with open(args.file, "rb") as f:
        for line in f:
            loads(line)
            n += 1
    return {"seconds": time.perf_counter() - t0, "lines": n}


def floor_pipe(args: argparse.Namespace) -> dict:
    argv = shlex.split(args.agent)
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
    out = proc.stdout
    reader = os.fdopen(out.fileno(), "rb", buffering=1 << 16, closefd=False)
    loads = json.loads

    def send(obj: dict) -> None:
        proc.stdin.write(json.dumps(obj).encode() + b"\n")

    def wait_for(rid: int) -> dict:
        for line in reader:
            msg = loads(line)
            if msg.get("id") == rid and "method" not in msg:
                return msg
        raise RuntimeError("agent closed its output")

    t_spawn = time.perf_counter()
    send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1, "clientCapabilities": {}}})
    wait_for(0)
    t_init = time.perf_counter() - t_spawn
    send({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": os.getcwd(), "mcpServers": []}})
    sid = wait_for(1)["result"]["sessionId"]
    stamps: list[int] = []
    updates = 0
    t0 = time.perf_counter()
    send({"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}})
    if args.latency:
        now = time.time_ns
        for line in reader:
            msg = loads(line)
            if "method" in msg:
                updates += 1
                stamps.append(now() - _stamp_of(msg["params"]["update"]["content"]["text"]))
            elif msg.get("id") == 2:
                break
    else:
        for line in reader:
            msg = loads(line)
            if "method" in msg:
                updates += 1
            elif msg.get("id") == 2:
                break
    seconds = time.perf_counter() - t0
    proc.stdin.close()
    proc.wait()
    result = {"seconds": seconds, "updates": updates, "init_seconds": t_init}
    if args.latency:
        result["latency"] = _percentiles(stamps)
    return result


# -- acp-kernel's library ------------------------------------------------------


async def _lib(args: argparse.Namespace) -> dict:
    from acp_kernel.client.host import ClientSettings
    from acp_kernel.client.registry import adhoc_agent
    from acp_kernel.client.session import Client

    client = Client(adhoc_agent(args.agent, name="synthetic"), settings=ClientSettings(permissions="allow-all"))
    await client.start()
    try:
        session = await client.new_session()
        count = [0]
        stamps: list[int] = []
        if args.latency:
            from acp_kernel.client.turn import Chunk

            now = time.time_ns

            def listener(event):  # noqa: ANN001
                if type(event) is Chunk:
                    stamps.append(now() - _stamp_of(event.text))
        else:
            def listener(event):  # noqa: ANN001
                count[0] += 1

        t0 = time.perf_counter()
        turn = session.begin("go")
        turn.subscribe(listener)
        await session.finish(turn)
        seconds = time.perf_counter() - t0
        if turn.stop_reason != "end_turn":
            raise RuntimeError(f"turn ended with {turn.stop_reason!r}: {turn.error}")
        # What arrived, not how many events: a run of chunks that came in one read is one event.
        result = {"seconds": seconds, "updates": len(turn.events), "tool_calls": len(turn.tool_calls),
                  "chars": len(turn.text), "tool_updates": sum(c.updates for c in turn.tool_calls.values())}
        if args.latency:
            result["latency"] = _percentiles(stamps)
        return result
    finally:
        await client.close()


def lib(args: argparse.Namespace) -> dict:
    return asyncio.run(_lib(args))


async def _init_lib(args: argparse.Namespace) -> dict:
    t0 = time.perf_counter()
    from acp_kernel.client.host import ClientSettings
    from acp_kernel.client.registry import adhoc_agent
    from acp_kernel.client.session import Client

    t_import = time.perf_counter() - t0
    t1 = time.perf_counter()
    client = Client(adhoc_agent(args.agent, name="bench"), settings=ClientSettings(permissions="allow-all"))
    await client.start()
    t_init = time.perf_counter() - t1
    session = await client.new_session()
    t_session = time.perf_counter() - t1
    await client.close()
    assert session.id
    return {"import_seconds": t_import, "init_seconds": t_init, "session_seconds": t_session,
            "process_seconds": time.perf_counter() - T_START}


def init_lib(args: argparse.Namespace) -> dict:
    return asyncio.run(_init_lib(args))


# -- the official SDK ------------------------------------------------------------


async def _sdk(args: argparse.Namespace, init_only: bool = False) -> dict:
    t_imp = time.perf_counter()
    from acp import spawn_agent_process
    from acp.schema import TextContentBlock

    t_import = time.perf_counter() - t_imp
    stamps: list[int] = []
    now = time.time_ns

    class BenchClient:
        def __init__(self) -> None:
            self.updates = 0

        async def session_update(self, session_id, update, **kwargs):  # noqa: ANN001
            self.updates += 1
            if args.latency:
                content = getattr(update, "content", None)
                text = getattr(content, "text", None)
                if text:
                    stamps.append(now() - _stamp_of(text))

        async def request_permission(self, *a, **k):  # pragma: no cover - not used by the load
            raise NotImplementedError

        def on_connect(self, conn):  # noqa: ANN001
            pass

    client = BenchClient()
    argv = shlex.split(args.agent)
    t1 = time.perf_counter()
    async with spawn_agent_process(client, argv[0], *argv[1:], env=dict(os.environ),
                                   transport_kwargs={"limit": 64 * 1024 * 1024}) as (conn, _proc):
        await conn.initialize(protocol_version=1)
        t_init = time.perf_counter() - t1
        if init_only:
            return {"import_seconds": t_import, "init_seconds": t_init}
        new = await conn.new_session(cwd=os.getcwd(), mcp_servers=[])
        t0 = time.perf_counter()
        resp = await conn.prompt(session_id=new.session_id, prompt=[TextContentBlock(type="text", text="go")])
        seconds = time.perf_counter() - t0
        if resp.stop_reason != "end_turn":
            raise RuntimeError(f"stop reason {resp.stop_reason!r}")
    result = {"seconds": seconds, "updates": client.updates, "init_seconds": t_init}
    if args.latency:
        result["latency"] = _percentiles(stamps)
    return result


def sdk(args: argparse.Namespace) -> dict:
    return asyncio.run(_sdk(args))


def init_sdk(args: argparse.Namespace) -> dict:
    return asyncio.run(_sdk(args, init_only=True))


# -- terminal service ------------------------------------------------------------


def _vm_hwm_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


async def _terminal(args: argparse.Namespace) -> dict:
    from acp_kernel.services.terminals import Terminal

    size = args.bytes
    producer = (
        "import sys\nw=sys.stdout.buffer.write\nb=(b'0123456789abcdef'*4095+b'0123456789abcde\\n')\n"
        f"n={size}\nwhile n>0:\n    w(b[:n] if n<len(b) else b)\n    n-=len(b)\n"
    )
    argv = [sys.executable, "-c", producer]
    # The same producer into /dev/null: what the command costs with no reader.
    t0 = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, check=True)
    devnull = time.perf_counter() - t0
    # ... and read through a pipe by a plain blocking loop: the floor for a reader.
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE)
    fd, read = proc.stdout.fileno(), os.read
    while read(fd, 1 << 16):
        pass
    proc.wait()
    piped = time.perf_counter() - t0
    hwm0 = _vm_hwm_kib()
    term = Terminal(argv, output_limit=args.limit, terminal_id="bench")
    t0 = time.perf_counter()
    await term.start()
    status = await term.wait()
    seconds = time.perf_counter() - t0
    text, truncated = term.output()
    hwm1 = _vm_hwm_kib()
    await term.release()
    return {"bytes": size, "seconds": seconds, "devnull_seconds": devnull, "pipe_seconds": piped, "status": str(status),
            "kept_bytes": len(text.encode()), "truncated": truncated, "rss_growth_kib": hwm1 - hwm0,
            "hwm_kib": hwm1}


def terminal(args: argparse.Namespace) -> dict:
    return asyncio.run(_terminal(args))


MODES = {
    "floor-file": floor_file,
    "floor-pipe": floor_pipe,
    "lib": lib,
    "sdk": sdk,
    "init-lib": init_lib,
    "init-sdk": init_sdk,
    "terminal": terminal,
}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="one benchmark measurement in a fresh process")
    p.add_argument("mode", choices=sorted(MODES))
    p.add_argument("--agent", help="agent command line (shell syntax)")
    p.add_argument("--file", help="dumped stream (floor-file)")
    p.add_argument("--latency", action="store_true", help="record stamp-to-receive latency of chunks")
    p.add_argument("--bytes", type=int, default=1 << 30, help="terminal: bytes the command prints")
    p.add_argument("--limit", type=int, default=1 << 20, help="terminal: outputByteLimit")
    args = p.parse_args(argv)
    _emit(MODES[args.mode](args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
