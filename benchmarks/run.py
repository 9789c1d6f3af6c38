"""acp-kernel benchmarks: ``python -m benchmarks`` (or ``python benchmarks/run.py``).

Every figure of one section is measured side by side in one run, the
contenders interleaved round by round, and reported as a ratio to the floor
(machines are noisy; ratios travel, absolute numbers do not). The run prints
markdown tables and appends them, with a description of the machine, to
``benchmarks/RESULTS.md``. See ``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
AGENT = os.path.join(HERE, "synthetic_agent.py")
WORKERS = os.path.join(HERE, "workers.py")
KERNEL_WORKERS = os.path.join(HERE, "kernel_workers.py")
PASSTHROUGH_WORKERS = os.path.join(HERE, "passthrough_workers.py")
RESULTS = os.path.join(HERE, "RESULTS.md")
NODE_DIR = os.path.join(HERE, ".node")

ACPX_VERSION = "0.19.1"
NODE_MAJOR = "22"
NODE_MIN = (22, 13)


# -- results ---------------------------------------------------------------------


@dataclass
class Section:
    title: str
    header: list[str]
    rows: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def markdown(self) -> str:
        out = [f"### {self.title}", ""]
        if self.rows:
            widths = [max(len(str(r[i])) for r in [self.header, *self.rows]) for i in range(len(self.header))]
            out.append("| " + " | ".join(h.ljust(w) for h, w in zip(self.header, widths)) + " |")
            out.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
            for r in self.rows:
                out.append("| " + " | ".join(str(c).ljust(w) for c, w in zip(r, widths)) + " |")
            out.append("")
        for note in self.notes:
            out.append(f"- {note}")
        if self.notes:
            out.append("")
        return "\n".join(out)


class Failed(Exception):
    """A contender could not be measured; the reason goes into the table."""


@dataclass
class Ctx:
    args: argparse.Namespace
    tmp: str
    env: dict[str, str]
    acpx: Any = None  # Acpx, or a str saying why it is missing
    startup: dict[str, list[float]] = field(default_factory=dict)
    kernel_env: dict[str, str] | None = None  # env with JUPYTER_PATH at a temp-prefix acp kernelspec


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def _us(seconds: float, n: int) -> str:
    return f"{seconds / n * 1e6:.2f}" if n else "-"


# -- running things ----------------------------------------------------------------


def agent_cmd(**opts: Any) -> str:
    parts = [sys.executable, AGENT]
    for key, value in opts.items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            parts.append(flag)
        elif value is not None and value is not False:
            parts += [flag, str(value)]
    return " ".join(shlex.quote(p) for p in parts)


def bench_env() -> dict[str, str]:
    env = dict(os.environ)
    # A user's default: buffered stdout. (This sandbox sets PYTHONUNBUFFERED=1.)
    env.pop("PYTHONUNBUFFERED", None)
    env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def worker(ctx: Ctx, mode: str, *extra: str, timeout: float = 300, script: str = WORKERS,
           env: dict[str, str] | None = None, cwd: str | None = None) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, script, mode, *extra], capture_output=True, text=True,
                          env=env or ctx.env, cwd=cwd or ctx.tmp, timeout=timeout)
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise Failed(f"{mode} exited {proc.returncode}: {tail}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def timed_run(ctx: Ctx, argv: list[str], *, stdout_path: str | None = None, timeout: float = 300) -> float:
    """Wall time of a whole command; its stdout goes to a file or /dev/null."""
    out = open(stdout_path, "wb") if stdout_path else subprocess.DEVNULL
    try:
        t0 = time.perf_counter()
        proc = subprocess.run(argv, stdout=out, stderr=subprocess.PIPE, env=ctx.env, cwd=ctx.tmp, timeout=timeout)
        seconds = time.perf_counter() - t0
    finally:
        if stdout_path:
            out.close()  # type: ignore[union-attr]
    if proc.returncode != 0:
        tail = (proc.stderr.decode(errors="replace").strip().splitlines() or ["no stderr"])[-1]
        raise Failed(f"exit {proc.returncode}: {tail[:200]}")
    return seconds


def json_arrivals(path: str, size: int) -> int:
    """Updates a ``--format json`` output accounts for: its agent text in chunks of ``size``
    characters (ours: a run of chunks from one read is one event) and its tool call
    events; acpx's output is the ACP messages themselves (``session/update``)."""
    chars = tool = 0
    with open(path, "rb") as f:
        for line in f:
            e = json.loads(line)
            if e.get("method") == "session/update":  # acpx
                u = (e.get("params") or {}).get("update") or {}
                kind = u.get("sessionUpdate")
                e = {"type": "agent", "text": (u.get("content") or {}).get("text")} if kind == "agent_message_chunk" else \
                    {"type": "tool_call"} if kind in ("tool_call", "tool_call_update") else {}
            if e.get("type") == "agent":
                chars += len(e.get("text") or "")
            elif e.get("type") == "tool_call":
                tool += 1
    return (chars // size if size else 0) + tool


# -- acpx (Node) -------------------------------------------------------------------


@dataclass
class Acpx:
    node: str
    cli: str
    version: str
    node_version: str

    def argv(self, agent: str, fmt: str, prompt: str = "go") -> list[str]:
        return [self.node, self.cli, "--agent", agent, "--approve-all", "--format", fmt, "exec", prompt]


def _node_ok(node: str) -> str | None:
    try:
        out = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    try:
        major, minor = (int(x) for x in out.lstrip("v").split(".")[:2])
    except ValueError:
        return None
    return out if (major, minor) >= NODE_MIN else None


def setup_acpx(args: argparse.Namespace) -> Acpx | str:
    """acpx and a Node >= 22.13 under benchmarks/.node (installed by npm at bench time)."""
    if args.no_acpx:
        return "skipped (--no-acpx)"
    mods = os.path.join(NODE_DIR, "node_modules")
    arch = {"x86_64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(platform.machine(), platform.machine())
    node_pkg = f"node-linux-{arch}" if sys.platform.startswith("linux") else None
    system_node = shutil.which("node")
    node = system_node if system_node and _node_ok(system_node) else None
    wanted = [f"acpx@{ACPX_VERSION}"] + ([] if node or not node_pkg else [f"{node_pkg}@{NODE_MAJOR}"])
    acpx_pkg = os.path.join(mods, "acpx", "package.json")
    have_acpx = os.path.exists(acpx_pkg) and json.load(open(acpx_pkg)).get("version") == ACPX_VERSION
    have_node = node is not None or (node_pkg and os.path.exists(os.path.join(mods, node_pkg, "bin", "node")))
    if not (have_acpx and have_node):
        npm = shutil.which("npm")
        if npm is None:
            return "not run: npm is not installed"
        if node is None and node_pkg is None:
            return f"not run: no Node >= {NODE_MIN[0]}.{NODE_MIN[1]} and no node package for {sys.platform}"
        os.makedirs(NODE_DIR, exist_ok=True)
        print(f"installing {' '.join(wanted)} under {os.path.relpath(NODE_DIR)} ...", file=sys.stderr)
        try:
            proc = subprocess.run([npm, "install", "--prefix", NODE_DIR, "--no-audit", "--no-fund", *wanted],
                                  capture_output=True, text=True, timeout=600)
        except (OSError, subprocess.SubprocessError) as exc:
            return f"not run: npm install failed ({exc})"
        if proc.returncode != 0:
            tail = (proc.stderr.strip().splitlines() or ["?"])[-1]
            return f"not run: npm install failed: {tail[:200]}"
    if node is None:
        node = os.path.join(mods, node_pkg or "", "bin", "node")
    node_version = _node_ok(node)
    if node_version is None:
        return f"not run: {node} is missing or older than {NODE_MIN[0]}.{NODE_MIN[1]}"
    try:
        meta = json.load(open(acpx_pkg))
    except (OSError, ValueError) as exc:
        return f"not run: acpx is not installed ({exc})"
    bin_ = meta.get("bin")
    rel = bin_.get("acpx") if isinstance(bin_, dict) else bin_
    cli = os.path.join(mods, "acpx", rel or "dist/cli.js")
    if not os.path.exists(cli):
        return f"not run: acpx entry point {cli} is missing"
    return Acpx(node, cli, meta.get("version", "?"), node_version)


# -- throughput ------------------------------------------------------------------------


#: A prompt the synthetic agent answers with no update (its key=value words override the load).
EMPTY_TURN = "chunks=0 tool_calls=0"


@dataclass
class Contender:
    name: str
    run: Callable[[], tuple[float, int]]  # -> (seconds, updates seen)
    startup_key: str | None = None  # subtract the median wall time of this N=0 run
    note: str = ""
    times: list[float] = field(default_factory=list)
    seen: int = 0
    error: str | None = None


def _throughput(ctx: Ctx, title: str, load: dict[str, int], updates: int) -> Section:
    a = ctx.args
    agent = agent_cmd(**load)
    empty = agent_cmd(chunks=0, tool_calls=0)
    dump = os.path.join(ctx.tmp, "stream.jsonl")
    subprocess.run(shlex.split(agent_cmd(**load, dump=dump)), check=True)
    cli = [sys.executable, "-m", "acp_kernel", "prompt", "--permissions", "allow-all"]
    out = os.path.join(ctx.tmp, "out.jsonl")

    size = load.get("size", 0) if load.get("chunks") else 0

    def w(mode: str, *extra: str) -> Callable[[], tuple[float, int]]:
        def run() -> tuple[float, int]:
            r = worker(ctx, mode, *extra)
            if "chars" in r:  # the library: what arrived (text in chunks of `size`, tool call updates)
                return r["seconds"], (r["chars"] // size if size else 0) + r["tool_updates"]
            return r["seconds"], r.get("updates", r.get("lines", 0) - 1)
        return run

    def sub(argv: list[str], json_out: bool) -> Callable[[], tuple[float, int]]:
        def run() -> tuple[float, int]:
            seconds = timed_run(ctx, argv, stdout_path=out if json_out else None)
            return seconds, (json_arrivals(out, size) if json_out else updates)
        return run

    def starter(name: str, key: str, argv: list[str]) -> Contender:
        """An empty turn whose wall times go to ``ctx.startup[key]`` (rows with that key subtract them)."""
        def run() -> tuple[float, int]:
            seconds = timed_run(ctx, argv)
            ctx.startup.setdefault(key, []).append(seconds)
            return seconds, 0
        return Contender(name, run, key)

    contenders = [
        Contender("floor: read the dumped file + json.loads per line", w("floor-file", "--file", dump),
                  note="the reference"),
        Contender("floor: blocking pipe reader + json.loads per line", w("floor-pipe", "--agent", agent),
                  note="minimal client, same agent process"),
        Contender("acp-kernel library (Client + Session.prompt)", w("lib", "--agent", agent),
                  note="in-process, a no-op subscriber"),
        *([Contender("... each chunk with a messageId (as claude-agent-acp sends)",
                     w("lib", "--agent", agent_cmd(**load, message_id=True)),
                     note="in-process; its lines are 21 bytes longer")] if load.get("chunks") else []),
        Contender("acp-kernel prompt --format json (subprocess)",
                  sub([*cli, "--format", "json", "--agent-command", agent, "go"], True), f"cli {title}",
                  note="stdout to a file; net of startup"),
        Contender("acp-kernel prompt --format text > /dev/null",
                  sub([*cli, "--format", "text", "--agent-command", agent, "go"], False), f"cli {title}",
                  note="net of startup" + ("; a completed read is its line (the default)" if load.get("tool_calls")
                                           else "")),
        # The synthetic calls are reads: what each returned, printed under it as asked.
        *([Contender("... --show-reads (each read's content under its line)",
                     sub([*cli, "--format", "text", "--show-reads", "--agent-command", agent, "go"], False),
                     f"cli {title}", note="net of startup")] if load.get("tool_calls") else []),
    ]
    # "Net of startup": less an empty turn of the same agent with the same load (its prompt asks
    # for nothing), which encodes that load before it answers initialize, as the library's row
    # starts its clock after the handshake; the empty agent's start is the startup table's.
    starters = [starter("(startup) acp-kernel prompt, empty turn", "cli",
                        [*cli, "--format", "json", "--agent-command", empty, "go"]),
                starter("(startup) acp-kernel prompt, empty turn of the loaded agent", f"cli {title}",
                        [*cli, "--format", "json", "--agent-command", agent, EMPTY_TURN])]
    if isinstance(ctx.acpx, Acpx):
        x = ctx.acpx
        contenders += [
            Contender(f"acpx {x.version} --format json exec (Node {x.node_version})",
                      sub(x.argv(agent, "json"), True), f"acpx {title}", note="stdout to a file; net of startup"),
            Contender(f"acpx {x.version} --format quiet exec > /dev/null",
                      sub(x.argv(agent, "quiet"), False), f"acpx {title}", note="net of startup"),
        ]
        starters += [starter("(startup) acpx exec, empty turn", "acpx", x.argv(empty, "json")),
                     starter("(startup) acpx exec, empty turn of the loaded agent", f"acpx {title}",
                             x.argv(agent, "json", EMPTY_TURN))]
    contenders.append(Contender("official Python SDK (acp.spawn_agent_process)", w("sdk", "--agent", agent),
                                note="in-process, counting updates"))
    everyone = contenders + starters
    for rnd in range(a.repeat):
        for c in everyone:
            if c.error:
                continue
            print(f"  [{title}] round {rnd + 1}/{a.repeat}: {c.name}", file=sys.stderr)
            try:
                seconds, seen = c.run()
            except (Failed, subprocess.TimeoutExpired, OSError, ValueError, KeyError) as exc:
                c.error = str(exc)
                continue
            c.times.append(seconds)
            c.seen = seen
    sec = Section(title, ["client", "us/update", "updates/s", "speed vs floor", "notes"])
    floor_us = None
    for c in contenders:
        if c.error:
            sec.rows.append([c.name, "-", "-", "-", f"failed: {c.error}"])
            continue
        seconds = _median(c.times)
        if c.startup_key:
            seconds -= _median(ctx.startup.get(c.startup_key, []))
        us = seconds / updates * 1e6
        if floor_us is None:
            floor_us = us
        note = c.note
        if c.seen < updates:
            note += f"; WARNING: saw {c.seen} of {updates} updates"
        sec.rows.append([c.name, f"{us:.2f}", f"{updates / seconds:,.0f}", f"{floor_us / us:.2f}", note])
    if not isinstance(ctx.acpx, Acpx):
        sec.rows.append(["acpx", "-", "-", "-", str(ctx.acpx)])
    for s in starters:
        if s.error:
            sec.notes.append(f"{s.name}: failed: {s.error}")
        else:
            used = any(c.startup_key == s.startup_key for c in contenders)
            sec.notes.append(f"{s.name}: {_median(s.times) * 1000:.0f} ms"
                             + (" (subtracted from the rows marked net of startup)" if used else ""))
    sec.notes.append(f"load: {', '.join(f'{k}={v:,}' for k, v in load.items())} -> {updates:,} updates; "
                     f"median of {a.repeat} interleaved rounds; speed vs floor = floor us / client us "
                     "(target >= 0.50)")
    return sec


def throughput_chunks(ctx: Ctx) -> Section:
    a = ctx.args
    return _throughput(ctx, f"Throughput: {a.chunks:,} agent_message_chunk updates of {a.size} chars",
                       {"chunks": a.chunks, "size": a.size}, a.chunks)


def throughput_tools(ctx: Ctx) -> Section:
    a = ctx.args
    return _throughput(ctx, f"Throughput: {a.tool_calls:,} tool_call + tool_call_update pairs",
                       {"chunks": 0, "tool_calls": a.tool_calls}, 2 * a.tool_calls)


def throughput_files(ctx: Ctx) -> Section:
    """Tool calls as agents send a file read: the finished call's content is the whole file."""
    a = ctx.args
    return _throughput(ctx, f"Throughput: {a.file_reads:,} file reads of {a.file_chars:,} characters "
                            "(tool_call + tool_call_update pairs, the file's text in the content)",
                       {"chunks": 0, "tool_calls": a.file_reads, "tool_content": a.file_chars}, 2 * a.file_reads)


# -- latency ------------------------------------------------------------------------------


def latency(ctx: Ctx) -> list[Section]:
    return [library_latency(ctx), kernel_latency(ctx)]


def library_latency(ctx: Ctx) -> Section:
    a = ctx.args
    sec = Section(f"Added latency: agent write -> client event, {a.latency_chunks:,} stamped chunks",
                  ["client", "load", "p50 us", "p90 us", "p99 us", "max us", "p50 vs floor"])
    loads = [(f"paced {a.rate:,.0f}/s", {"rate": a.rate}), ("unpaced", {})]
    for label, extra in loads:
        floor_p50 = None
        for name, mode in (("floor: blocking pipe reader", "floor-pipe"),
                           ("acp-kernel library (Turn subscriber)", "lib"),
                           ("official Python SDK (session_update)", "sdk")):
            print(f"  [latency] {label}: {name}", file=sys.stderr)
            agent = agent_cmd(chunks=a.latency_chunks, size=a.size, stamp=True, **extra)
            try:
                lat = worker(ctx, mode, "--latency", "--agent", agent)["latency"]
            except (Failed, subprocess.TimeoutExpired, KeyError) as exc:
                sec.rows.append([name, label, "-", "-", "-", "-", f"failed: {exc}"])
                continue
            if floor_p50 is None:
                floor_p50 = lat["p50_us"]
            sec.rows.append([name, label, f"{lat['p50_us']:.0f}", f"{lat['p90_us']:.0f}", f"{lat['p99_us']:.0f}",
                             f"{lat['max_us']:.0f}", f"{lat['p50_us'] / floor_p50:.2f}x"])
    sec.notes.append("the agent stamps time.time_ns() into each chunk just before its write; the client "
                     "records time.time_ns() when the event reaches its subscriber")
    sec.notes.append("unpaced: the agent writes as fast as the pipe takes it, so the figures are mostly "
                     "queueing (how far behind the reader runs), not per-message overhead")
    return sec


# -- startup --------------------------------------------------------------------------------


def startup(ctx: Ctx) -> Section:
    a = ctx.args
    sec = Section("Startup", ["what", "ms (median)", "notes"])
    cli = [sys.executable, "-m", "acp_kernel", "prompt"]
    runs: dict[str, list[float]] = {}
    infos: dict[str, list[dict]] = {}
    errors: dict[str, str] = {}
    empty = agent_cmd(chunks=0)
    steps = [
        ("python -c pass", lambda: timed_run(ctx, [sys.executable, "-c", "pass"])),
        ("acp-kernel prompt --agent demo hello", lambda: timed_run(ctx, [*cli, "--agent", "demo", "hello"])),
        ("lib", lambda: worker(ctx, "init-lib", "--agent", empty)),
        ("lib-demo", lambda: worker(ctx, "init-lib", "--agent", f"{shlex.quote(sys.executable)} -m acp_kernel.demo.agent")),
        ("sdk", lambda: worker(ctx, "init-sdk", "--agent", empty)),
    ]
    for _ in range(a.repeat):
        for key, fn in steps:
            if key in errors:
                continue
            try:
                r = fn()
            except (Failed, subprocess.TimeoutExpired, OSError) as exc:
                errors[key] = str(exc)
                continue
            (infos.setdefault(key, []).append(r) if isinstance(r, dict) else runs.setdefault(key, []).append(r))

    def ms(values: list[float]) -> str:
        return f"{_median(values) * 1000:.0f}"

    def info(key: str, field_: str) -> str:
        if key in errors:
            return f"failed: {errors[key]}"
        return ms([r[field_] for r in infos.get(key, [])])

    sec.rows.append(["interpreter: python -c pass", ms(runs.get("python -c pass", [])), "baseline"])
    demo = "acp-kernel prompt --agent demo hello"
    sec.rows.append([f"`{demo}` (wall)", errors.get(demo) or ms(runs.get(demo, [])), "whole CLI, demo agent, one turn"])
    for key, label in (("cli", "`acp-kernel prompt` empty turn, synthetic agent (wall)"),
                       ("acpx", "`acpx exec` empty turn, synthetic agent (wall)")):
        if key in ctx.startup:
            sec.rows.append([label, ms(ctx.startup[key]), "from the throughput rounds"])
    sec.rows.append(["library: import acp_kernel.client.session", info("lib", "import_seconds"), "cold import"])
    sec.rows.append(["library: Client.start() to initialize done, synthetic agent", info("lib", "init_seconds"),
                     "spawn + initialize"])
    sec.rows.append(["library: ... + session/new", info("lib", "session_seconds"), ""])
    sec.rows.append(["library: Client.start() to initialize done, demo agent", info("lib-demo", "init_seconds"),
                     "python -m acp_kernel.demo.agent"])
    sec.rows.append(["official SDK: import acp", info("sdk", "import_seconds"), "cold import"])
    sec.rows.append(["official SDK: spawn + initialize, synthetic agent", info("sdk", "init_seconds"), ""])
    kernel_startup(ctx, sec)
    return sec


# -- terminal service -----------------------------------------------------------------------


def terminal_service(ctx: Ctx) -> Section:
    a = ctx.args
    sec = Section(f"Terminal service: a command printing {a.terminal_bytes / 2**20:,.0f} MiB, outputByteLimit 1 MiB",
                  ["what", "seconds", "MB/s", "speed vs floor", "peak RSS growth", "kept"])
    try:
        import acp_kernel.services.terminals  # noqa: F401
    except Exception as exc:  # pragma: no cover - depends on the tree
        sec.notes.append(f"not available: acp_kernel.services.terminals does not import ({type(exc).__name__}: {exc})")
        return sec
    results = []
    for _ in range(max(1, min(a.repeat, 2))):
        print("  [terminal] round", file=sys.stderr)
        try:
            results.append(worker(ctx, "terminal", "--bytes", str(a.terminal_bytes), "--limit", str(1 << 20)))
        except (Failed, subprocess.TimeoutExpired) as exc:
            sec.notes.append(f"failed: {exc}")
            return sec
    seconds = _median([r["seconds"] for r in results])
    devnull = _median([r["devnull_seconds"] for r in results])
    piped = _median([r["pipe_seconds"] for r in results])
    mb = a.terminal_bytes / 1e6
    r = results[-1]
    sec.rows.append(["the same command read by a blocking os.read loop (floor)", f"{piped:.2f}", f"{mb / piped:,.0f}",
                     "1.00", "-", "-"])
    sec.rows.append(["acp_kernel.services.terminals.Terminal (start -> wait)", f"{seconds:.2f}", f"{mb / seconds:,.0f}",
                     f"{piped / seconds:.2f}", f"{max(x['rss_growth_kib'] for x in results) / 1024:.1f} MiB",
                     f"{r['kept_bytes']:,} B, truncated={r['truncated']}"])
    sec.rows.append(["the same command > /dev/null (no reader at all)", f"{devnull:.2f}", f"{mb / devnull:,.0f}",
                     f"{piped / devnull:.2f}", "-", "-"])
    sec.notes.append("peak RSS growth = VmHWM after minus before, in the measuring process")
    return sec


# -- through a real kernel (jupyter_client) ----------------------------------------------------


def kernel_env(ctx: Ctx) -> dict[str, str]:
    """The workers' env plus a private ``acp`` kernelspec (installed once per run into a temp
    prefix with acp_kernel.frontends.install, as tests/kernel/conftest.py does) and temp state paths."""
    if ctx.kernel_env is None:
        from acp_kernel.frontends.install import install

        prefix = os.path.join(ctx.tmp, "prefix")
        install(prefix=prefix)
        env = dict(ctx.env)
        env.update({
            "JUPYTER_PATH": os.path.join(prefix, "share", "jupyter"),
            "ACP_KERNEL_STATE": os.path.join(ctx.tmp, "state", "sessions.json"),
            "ACP_KERNEL_CONFIG": os.path.join(ctx.tmp, "acp_kernel.json"),  # absent: built-in agents
            "ACP_DEMO_STATE_DIR": os.path.join(ctx.tmp, "demo-state"),
        })
        for key in ("ACP_KERNEL_AGENT", "ACP_KERNEL_PERMISSIONS", "JPY_SESSION_NAME"):
            env.pop(key, None)
        os.makedirs(os.path.join(ctx.tmp, "work"), exist_ok=True)
        ctx.kernel_env = env
    return ctx.kernel_env


def kworker(ctx: Ctx, mode: str, *extra: str, timeout: float = 600,
            env: dict[str, str] | None = None) -> dict[str, Any]:
    return worker(ctx, mode, *extra, timeout=timeout, script=KERNEL_WORKERS, env={**kernel_env(ctx), **(env or {})},
                  cwd=os.path.join(ctx.tmp, "work"))


def run_cells(ctx: Ctx, agent: str, prompts: list[str], *, empties: int = 0, timeout: float = 600,
              env: dict[str, str] | None = None, as_page: bool = False) -> dict[str, Any]:
    """A fresh acp kernel: ``%agent --command AGENT``, a warm-up empty turn (starts the agent),
    ``empties`` timed empty turns, then ``prompts``. Returns the worker's JSON with ``empty``
    (median seconds of the timed empty turns) and ``turns`` (one summary per prompt)."""
    cells = [f"%agent --command {agent}", "chunks=0 tool_calls=0"] + ["chunks=0 tool_calls=0"] * empties + prompts
    args: list[str] = ["cells", "--timeout", str(timeout), *(["--as-page"] if as_page else [])]
    for c in cells:
        args += ["--cell", c]
    r = kworker(ctx, *args, timeout=timeout * max(1, len(prompts)) + 120, env=env)
    out = r["cells"]
    r["empty"] = _median([c["seconds"] for c in out[2:2 + empties]]) if empties else 0.0
    r["turns"] = out[2 + empties:]
    return r


def _kb(n: float) -> str:
    return f"{n / 1e6:,.2f} MB" if n >= 1e6 else f"{n / 1e3:,.1f} KB"


def _iopub_total(t: dict[str, Any]) -> tuple[int, int]:
    """Messages and bytes the frontend got on iopub during the turn (the cell's own and other
    parents, e.g. widget comm_open/comm_msg)."""
    return t["iopub_msgs"] + t.get("other_msgs", 0), t["iopub_bytes"] + t.get("other_bytes", 0)


def kernel_throughput(ctx: Ctx) -> Section:
    a = ctx.args
    n, size, kt = a.chunks, a.size, a.kernel_tool_calls
    chunks_load, tools_load = {"chunks": n, "size": size}, {"chunks": 0, "tool_calls": kt}
    dumps = {}
    for key, load in (("chunks", chunks_load), ("tools", tools_load)):
        dumps[key] = os.path.join(ctx.tmp, f"kernel-{key}.jsonl")
        subprocess.run(shlex.split(agent_cmd(**load, dump=dumps[key])), check=True)
    # The agent's own load is the tool calls (encoded before the handshake); the chunk turn
    # asks for its load in the prompt (``chunks=N size=S``: one bytes-multiply, cached).
    agent = agent_cmd(**tools_load)
    chunk_prompt = f"chunks={n} size={size} tool_calls=0"
    sec = Section(f"Kernel throughput through jupyter_client: {n:,} chunks of {size} chars; {kt:,} tool call pairs",
                  ["client", "load", "us/update", "updates/s", "speed vs floor", "iopub msgs", "iopub bytes", "notes"])
    times: dict[str, list[float]] = {}
    kernel_runs: list[dict[str, Any]] = []
    errors: dict[str, str] = {}
    steps: list[tuple[str, Callable[[], Any]]] = [
        ("floor-chunks", lambda: worker(ctx, "floor-file", "--file", dumps["chunks"])["seconds"]),
        ("floor-tools", lambda: worker(ctx, "floor-file", "--file", dumps["tools"])["seconds"]),
        ("lib-chunks", lambda: worker(ctx, "lib", "--agent", agent_cmd(**chunks_load))["seconds"]),
        ("lib-tools", lambda: worker(ctx, "lib", "--agent", agent)["seconds"]),
        ("kernel", lambda: run_cells(ctx, agent, [chunk_prompt, "go"], empties=3)),
    ]
    for rnd in range(a.repeat):
        for key, fn in steps:
            if key in errors:
                continue
            print(f"  [kernel] round {rnd + 1}/{a.repeat}: {key}", file=sys.stderr)
            try:
                r = fn()
            except (Failed, subprocess.TimeoutExpired, OSError, ValueError, KeyError) as exc:
                errors[key] = str(exc)
                continue
            if key == "kernel":
                kernel_runs.append(r)
            else:
                times.setdefault(key, []).append(r)

    def row(label: str, load: str, key: str, updates: int, floor_us: float | None, note: str) -> float | None:
        if key in errors:
            sec.rows.append([label, load, "-", "-", "-", "-", "-", f"failed: {errors[key]}"])
            return None
        seconds = _median(times.get(key, []))
        us = seconds / updates * 1e6
        sec.rows.append([label, load, f"{us:.2f}", f"{updates / seconds:,.0f}",
                         f"{(floor_us or us) / us:.2f}", "-", "-", note])
        return us

    for i, (what, updates, load, fkey, lkey) in enumerate((
            ("chunks", n, f"{n:,} chunks", "floor-chunks", "lib-chunks"),
            ("tools", 2 * kt, f"{kt:,} tool call pairs", "floor-tools", "lib-tools"))):
        floor_us = row("floor: read the dumped file + json.loads per line", load, fkey, updates, None, "the reference")
        row("acp-kernel library (Client + Session.prompt)", load, lkey, updates, floor_us, "in-process, no view")
        label = "acp kernel (jupyter_client: execute -> execute_reply)"
        if "kernel" in errors or not kernel_runs:
            sec.rows.append([label, load, "-", "-", "-", "-", "-", f"failed: {errors.get('kernel', 'no run')}"])
            continue
        turns = [r["turns"][i] for r in kernel_runs]
        net = _median([t["seconds"] - r["empty"] for t, r in zip(turns, kernel_runs)])
        us = net / updates * 1e6
        last = turns[-1]
        msgs, nbytes = _iopub_total(last)
        note = "net of an empty turn"
        if last.get("other_msgs"):
            note += (f"; incl. {last['other_msgs']:,} msgs / {_kb(last['other_bytes'])} of other parents "
                     f"({', '.join(last.get('other_types', []))})")
        if what == "chunks":
            note += f"; iopub {nbytes / (n * size):.2f}x the answer (target <= 1.2x for 3.2 MB)"
            if last.get("shown_chars", 0) < n * size:
                note += f"; WARNING: {last.get('shown_chars', 0):,} of {n * size:,} chars shown"
        speed = floor_us / us if floor_us else None
        sec.rows.append([label, load, f"{us:.2f}", f"{updates / net:,.0f}",
                         "-" if speed is None else f"{speed:.2f}" if speed >= 0.01 else f"{speed:.4f}",
                         f"{msgs:,}", _kb(nbytes), note])
    if kernel_runs:
        empty = _median([r["empty"] for r in kernel_runs]) * 1000
        sec.notes.append(f"empty turn through the kernel (execute -> execute_reply, agent running): {empty:.1f} ms "
                         "median; subtracted from the kernel rows")
    sec.notes.append(f"median of {a.repeat} interleaved rounds, a fresh kernel per round; the kernel runs with "
                     "widgets (tool calls are rows of an anywidget, one per run of consecutive calls); "
                     "iopub = every frame this frontend received (own zmq SUB socket) during the turn; "
                     "speed vs floor target >= 0.50")
    return sec


IOPUB_LOADS_FULL = [
    # (label, prompt, response chars)
    ("1 KB in 32 chunks", "chunks=32 size=32", 32 * 32),
    ("32 KB in 1,000 chunks", "chunks=1000 size=32", 1000 * 32),
    ("1 MB in 32,000 chunks of 32", "chunks=32000 size=32", 32000 * 32),
    ("1 MB in 5,000 chunks of 200", "chunks=5000 size=200", 5000 * 200),
]


def iopub_traffic(ctx: Ctx) -> Section:
    a = ctx.args
    seconds = 1.0 if a.quick else 4.0  # length of each paced stream
    loads = list(IOPUB_LOADS_FULL)
    loads += [
        (f"1 MB in 32,000 chunks of 32, paced {32000 / seconds:,.0f}/s", f"chunks=32000 size=32 rate={32000 / seconds:g}",
         32000 * 32),
        (f"1 MB in 5,000 chunks of 200, paced {5000 / seconds:,.0f}/s", f"chunks=5000 size=200 rate={5000 / seconds:g}",
         5000 * 200),
    ]
    if not a.quick:  # a long turn: the live fallback's rebuilds (every 2 s at most) add up
        loads.append(("1 MB in 5,000 chunks of 200, paced 250/s (20 s)", "chunks=5000 size=200 rate=250", 5000 * 200))
    # The same streamed turns with a page that shows the widget (it says so): no rebuilds for it.
    paged = [(f"{label}; a page shows the widget", prompt, chars) for label, prompt, chars in loads if "paced" in label]
    sec = Section("iopub traffic per turn through the acp kernel (what the frontend receives)",
                  ["response", "turn s", "iopub msgs", "iopub bytes", "bytes / response", "display + update msgs",
                   "update msgs/s", "display msgs/s (busiest 1 s)", "shown chars",
                   "of it: record html / md / text", "widget", "live fallback"])
    print("  [iopub] one kernel, all loads", file=sys.stderr)
    try:
        r = run_cells(ctx, agent_cmd(chunks=0), [p for _, p, _ in loads], empties=1)
        print("  [iopub] one kernel, the streamed loads, as a page", file=sys.stderr)
        r_page = run_cells(ctx, agent_cmd(chunks=0), [p for _, p, _ in paged], empties=1, as_page=True)
    except (Failed, subprocess.TimeoutExpired, OSError, ValueError, KeyError) as exc:
        sec.notes.append(f"failed: {exc}")
        return sec
    worst = burst = 0.0
    for (label, _, chars), t in zip(loads + paged, r["turns"] + r_page["turns"]):
        msgs, nbytes = _iopub_total(t)
        ratio = nbytes / chars
        if chars >= 1_000_000:
            if "paced" in label:
                worst = max(worst, ratio)
            else:
                burst = max(burst, ratio)
        up = by_type_count(t, "update_display_data")
        rate = t.get("update_rate")
        drate = t.get("display_rate")
        sec.rows.append([label, f"{t['seconds']:.2f}", f"{msgs:,}", _kb(nbytes), f"{ratio:.2f}x",
                         f"{t['display_msgs']:,} ({up:,} updates)",
                         f"{rate:.1f}" if rate else "- (short)",
                         (f"{drate:.1f} ({t.get('max_display_per_s', 0)})" if drate else "- (short)"),
                         f"{t.get('shown_chars', 0):,}", *_carried(t, chars)])
    sec.notes.append(f"targets: iopub bytes <= 1.2x the response for 1 MB in one burst (issue 25; worst here "
                     f"{burst:.2f}x: {'met' if burst <= 1.2 else 'MISSED'}); a streamed turn adds the live text "
                     f"(the widget, at least 1x) to the record (about 1x): worst streamed 1 MB here {worst:.2f}x; "
                     "tail updates about 10/s at most while streaming")
    sec.notes.append("response = the chunks' characters (ASCII: bytes); iopub bytes = all frames of every iopub "
                     "message during the turn (status, execute_input, display_data, update_display_data, ...); "
                     "rates are over the span from the first to the last display message; busiest 1 s = most "
                     "display + update messages in any one-second window")
    sec.notes.append("of it (x the response): the record = the finished turn's last display, the whole answer as "
                     "HTML (the saved notebook keeps it whole: tests/kernel/test_saved_turn.py), its markdown and "
                     "text at most 64,000 characters each (the start and the end), so about 1x for a long answer; "
                     "widget = its comm messages (the live text, at least 1x once the turn streams for longer than "
                     "a refresh); live fallback = the displays before the record (the turn so far for pages "
                     "without the widget, its markdown and text bounded as the record's, rebuilt at most every "
                     "2 s, past 64,000 characters only once doubled; once a page says it shows the widget, only "
                     "every 30 s)")
    sec.notes.append("the synthetic text has no newlines (one long paragraph): the worst case for the open tail, "
                     "which the view cuts only at 4 x max_tail = 16,000 characters")
    return sec


def _carried(t: dict[str, Any], chars: int) -> list[str]:
    """The iopub row's last columns: what its bytes carry, as multiples of the response."""
    rec = t.get("record_bytes")
    if rec is None:
        return ["-", "-", "-"]
    forms = " / ".join(f"{rec.get(m, 0) / chars:.2f}" for m in ("text/html", "text/markdown", "text/plain"))
    return [forms, f"{t.get('widget_bytes', 0) / chars:.2f}", f"{t.get('live_display_bytes', 0) / chars:.2f}"]


def by_type_count(t: dict[str, Any], kind: str) -> int:
    return (t.get("by_type", {}).get(kind) or [0, 0])[0]


def kernel_latency(ctx: Ctx) -> Section:
    a = ctx.args
    n, rate = a.latency_chunks, a.rate
    sec = Section(f"Latency through the acp kernel: {n:,} stamped chunks paced at {rate:,.0f}/s, "
                  "agent write -> iopub arrival at the frontend",
                  ["what", "refresh_hz", "p50 ms", "p90 ms", "p99 ms", "max ms", "count", "shown msgs/s"])
    prompt = f"chunks={n} size={a.size} stamp rate={rate:g}"
    for hz in (10, 60):
        print(f"  [latency] through the kernel, refresh_hz={hz}", file=sys.stderr)
        try:
            r = run_cells(ctx, agent_cmd(chunks=0), [prompt], env={"ACP_KERNEL_REFRESH_HZ": str(hz)})
            t = r["turns"][0]
            lat = t["latency"]
        except (Failed, subprocess.TimeoutExpired, OSError, ValueError, KeyError, IndexError) as exc:
            sec.notes.append(f"refresh_hz={hz} failed: {exc}")
            continue
        rate_s = f"{t.get('shown_rate') or 0:.1f}"  # display and widget messages a second
        first = lat.get("first_ms")
        sec.rows.append(["first chunk -> first shown (display or widget message)", str(hz), f"{first:.1f}" if first is not None else "-",
                         "", "", "", "1", ""])
        for key, label in (("refresh", "per refresh: newest chunk shown (staleness of what is on screen)"),
                           ("chunk", "per chunk: written -> first shown (incl. the coalescing wait)")):
            p = lat[key]
            if not p.get("count"):
                sec.rows.append([label, str(hz), "-", "-", "-", "-", "0", rate_s])
                continue
            sec.rows.append([label, str(hz), f"{p['p50']:.1f}", f"{p['p90']:.1f}", f"{p['p99']:.1f}",
                             f"{p['max']:.1f}", f"{p['count']:,}", rate_s])
        sec.notes.append(f"refresh_hz={hz}: {t.get('shown_msgs', 0):,} display and widget messages "
                         f"({t['display_msgs']:,} display) over {t['seconds']:.1f} s")
    try:
        lib = worker(ctx, "lib", "--latency", "--agent", agent_cmd(chunks=n, size=a.size, stamp=True, rate=rate))
        p = lib["latency"]
        sec.rows.append(["reference: acp-kernel library, Turn subscriber (no view, no kernel)", "-",
                         f"{p['p50_us'] / 1000:.2f}", f"{p['p90_us'] / 1000:.2f}", f"{p['p99_us'] / 1000:.2f}",
                         f"{p['max_us'] / 1000:.2f}", f"{p['count']:,}", ""])
    except (Failed, subprocess.TimeoutExpired, KeyError) as exc:
        sec.notes.append(f"library reference failed: {exc}")
    sec.notes.append("the view redraws streaming text at most refresh_hz times a second (the config's `refresh_hz`, "
                     "default 10): a chunk waits up to 1/refresh_hz for the next redraw (the per-chunk row). "
                     "The 20 ms p99 target and ~10 updates/s cannot both hold under a steady stream; 10 is the "
                     "default for the browser's sake, 60 shows what the lower-latency setting costs")
    sec.notes.append("a refresh = the messages one flush sends back to back (finished blocks, then the new tail); "
                     "clocks: time.time_ns() in the agent and in this frontend, same machine")
    return sec


def kernel_startup(ctx: Ctx, sec: Section) -> None:
    """Rows for the startup table: kernels, the magics, the first token of a demo turn."""
    a = ctx.args
    runs: list[dict[str, Any]] = []
    for rnd in range(a.repeat):
        print(f"  [startup] kernels, round {rnd + 1}/{a.repeat}", file=sys.stderr)
        try:
            runs.append(kworker(ctx, "startup", timeout=180))
        except (Failed, subprocess.TimeoutExpired, OSError) as exc:
            sec.rows.append(["kernels", f"failed: {exc}", ""])
            return

    def ms(key: str) -> float:
        return _median([r[key] for r in runs if r.get(key) is not None]) * 1000

    for r in runs:
        r["py_ready_total"] = r["py_load_ext"] + r["py_connect"]
    first_token = ms("acp_first_display")
    sec.rows += [
        ["acp kernel: start_kernel -> first kernel_info reply", f"{ms('acp_ready'):.0f}", "jupyter_client, fresh kernel"],
        ["python3 kernel (ipykernel): start_kernel -> first kernel_info reply", f"{ms('py_ready'):.0f}", "reference"],
        ["acp kernel: `hello` execute -> first display_data (first token)", f"{first_token:.0f}",
         f"fresh kernel, demo agent starts with the cell; target <= 1500: {'met' if first_token <= 1500 else 'MISSED'}"],
        ["acp kernel: `hello` execute -> execute_reply", f"{ms('acp_reply'):.0f}", "the demo paces its words"],
        ["acp kernel: start_kernel -> first token of `hello`", f"{ms('acp_start_to_first_display'):.0f}",
         "the two above, added"],
        ["IPython kernel: `%load_ext acp_kernel`", f"{ms('py_load_ext'):.0f}", "execute -> execute_reply"],
        ["IPython kernel: `%acp connect demo`", f"{ms('py_connect'):.0f}", "spawn + initialize + session/new"],
        ["IPython kernel: `%load_ext` + `%acp connect demo` (ready)", f"{ms('py_ready_total'):.0f}", ""],
        ["IPython kernel: `%%acp hello` execute -> first display_data", f"{ms('py_first_display'):.0f}",
         "agent already connected"],
    ]


# -- passthrough terminals (PTY -> widget comm) ------------------------------------------------


def _ms(v: float) -> str:
    return f"{v:.3f}" if abs(v) < 0.1 else f"{v:.2f}"


def _pct_row(p: dict[str, Any], floor: dict[str, Any] | None) -> list[str]:
    if not p.get("count"):
        return ["-", "-", "-", "-", "-"]
    added = "" if floor is None or not floor.get("count") else f"{p['p50'] - floor['p50']:+.2f}"
    return [_ms(p["p50"]), _ms(p["p90"]), _ms(p["p99"]), _ms(p["max"]), added]


def passthrough(ctx: Ctx) -> list[Section]:
    """A real acp kernel through jupyter_client: ``%passthrough demo`` and ``/flood N`` cells, bytes
    counted as the terminal widget's ``data`` comm messages reach the frontend, beside the demo CLI
    under a PTY read by a tight os.read loop (interleaved rounds, see passthrough_workers.py); then
    keys typed into ``%passthrough --command cat`` as ``input`` comm messages, one at a time, beside
    the same program under a PTY in one process, and a python3 kernel's comm echo (Jupyter
    messaging alone)."""
    a = ctx.args
    n, keys, gap = a.passthrough_bytes, a.passthrough_keys, a.passthrough_gap_ms
    rounds = a.passthrough_rounds
    flood = Section(f"Passthrough terminal throughput: `/flood` of {n / 2**20:,.0f} MiB from the demo CLI, "
                    "PTY -> terminal widget comm messages on iopub",
                    ["what", "MB/s", "speed vs floor", "seconds", "PTY reads", "comm msgs", "msgs/s",
                     "CPU s: reader / CLI / frontend", "notes"])
    echo = Section(f"Passthrough terminal keystroke round trip: {keys:,} single keys into `cat`, "
                   "key sent -> its echo back",
                   ["what", "keys", "p50 ms", "p90 ms", "p99 ms", "max ms", "added p50 ms"])
    print(f"  [passthrough] acp kernel: {rounds} flood rounds (each beside a floor run), then {keys} keys x2",
          file=sys.stderr)
    pw: dict[str, Any] = {"script": PASSTHROUGH_WORKERS, "env": kernel_env(ctx), "cwd": os.path.join(ctx.tmp, "work")}
    per_run = 30 + 4 * n / 20e6  # seconds for one flood at a pessimistic 5 MB/s, plus start-up
    try:
        r = worker(ctx, "kernel", "--bytes", str(n), "--rounds", str(rounds), "--keys", str(keys),
                   "--gap-ms", str(gap), "--timeout", f"{per_run:.0f}",
                   timeout=120 + rounds * 2 * per_run + 4 * keys * (gap / 1000 + 0.1), **pw)
    except (Failed, subprocess.TimeoutExpired, OSError, ValueError, KeyError) as exc:
        flood.notes.append(f"failed: {exc}")
        echo.notes.append(f"failed: {exc}")
        return [flood, echo]
    print("  [passthrough] python3 kernel: comm echo", file=sys.stderr)
    try:
        ref = worker(ctx, "comm-echo", "--keys", str(keys), "--gap-ms", str(gap),
                     timeout=120 + 2 * keys * (gap / 1000 + 0.1), **pw)
    except (Failed, subprocess.TimeoutExpired, OSError, ValueError, KeyError) as exc:
        ref = {"error": str(exc)}

    # -- throughput
    floors, kernels = r["floor_flood"], r["kernel_flood"]

    def rate(x: dict[str, Any]) -> float:
        return x["window_bytes"] / x["window_seconds"] / 1e6

    def cpu(*values: float | None) -> str:
        return " / ".join("-" if v is None else f"{v:.2f}" for v in values)

    def mid(rows: list[dict[str, Any]], key: str) -> float | None:
        vals = [x[key] for x in rows if x.get(key) is not None]
        return _median(vals) if vals else None

    f_rate = _median([rate(x) for x in floors])
    k_rate = _median([rate(x) for x in kernels])
    k_sec = _median([x["window_seconds"] for x in kernels])
    k_msgs = _median([x["flood_msgs"] for x in kernels])
    f_reads = _median([x["reads"] for x in floors])
    mb = n / 1e6
    k_reads = mid(kernels, "kernel_reads")
    flood.rows.append(["floor: the demo CLI under a PTY, a tight os.read loop (one process)", f"{f_rate:,.1f}",
                       "1.00", f"{_median([x['window_seconds'] for x in floors]):.2f}", f"{f_reads:,.0f}", "-", "-",
                       cpu(mid(floors, "reader_cpu"), mid(floors, "cli_cpu"), None),
                       f"{n / f_reads:,.0f} B per read"])
    flood.rows.append(["acp kernel: the widget's `data` comm messages at the frontend", f"{k_rate:,.1f}",
                       f"{k_rate / f_rate:.2f}", f"{k_sec:.2f}", "-" if k_reads is None else f"{k_reads:,.0f}",
                       f"{k_msgs:,.0f}", f"{k_msgs / k_sec:,.0f}",
                       cpu(mid(kernels, "kernel_cpu"), mid(kernels, "cli_cpu"), mid(kernels, "frontend_cpu")),
                       (f"{n / k_msgs / 1e6:,.2f} MB per message on average, biggest "
                        f"{max(x['biggest_msg'] for x in kernels) / 1e6:,.2f} MB")])
    e2d = _median([x["execute_to_done"] for x in kernels])
    e2r = _median([x["execute_to_reply"] for x in kernels])
    flood.rows.append(["acp kernel: the whole cell, execute_request -> `flood done` shown", f"{mb / e2d:,.1f}",
                       f"{mb / e2d / f_rate:.2f}", f"{e2d:.2f}", "-", f"{_median([x['total_msgs'] for x in kernels]):,.0f}",
                       "-", "-", "incl. the wait for a quiet CLI, the paste and its echo"])
    flood.rows.append(["acp kernel: ... -> execute_reply", "-", "-", f"{e2r:.2f}", "-", "-", "-", "-",
                       "+ the idle window (0.5 s for the demo) that ends a reply"])
    short = [x for x in kernels if x["total_bytes"] < n]
    if short:
        flood.notes.append(f"WARNING: {len(short)} kernel round(s) delivered fewer bytes than the flood")
    def spread(rows: list[dict[str, Any]]) -> str:
        rates = [rate(x) for x in rows]
        return f"{max(rates) / min(rates):.1f}x" if min(rates) > 0 else "-"

    flood.notes.append(
        f"median of {rounds} interleaved rounds (floor, then kernel) in one kernel; per round, MB/s: floor "
        + ", ".join(f"{rate(x):,.0f}" for x in floors) + "; kernel " + ", ".join(f"{rate(x):,.0f}" for x in kernels)
        + f" (fastest / slowest round: floor {spread(floors)}, kernel {spread(kernels)})")
    flood.notes.append("MB/s = bytes after the first flood chunk / (arrival of `flood done` - arrival of the first "
                       "flood chunk), for both: a floor read, or a comm message at this frontend (own zmq SUB socket, "
                       "timed on arrival). CPU s = utime + stime over the flood: reader (the floor's loop, or the "
                       "kernel process, all threads) / the demo CLI / this frontend; PTY reads: the reader's read "
                       "system calls (the kernel's from /proc/PID/io syscr)")
    k_cpu, k_main = mid(kernels, "kernel_cpu"), mid(kernels, "kernel_main_cpu")
    if k_cpu and k_main is not None:
        flood.notes.append(
            f"kernel CPU by thread: the main thread (event loop: PTY reads, terminado, the widget's on_pty_read and "
            f"flush) {k_main:.2f} s of {k_cpu:.2f} s ({k_main / k_cpu:.0%}); the rest (iopub thread, zmq I/O: the "
            f"comm path's sending) {k_cpu - k_main:.2f} s; this frontend receiving every byte "
            f"{mid(kernels, 'frontend_cpu') or 0:.2f} s")
    flood.notes.append("the PTY hands over ~4 KiB per read (the kernel makes as many reads as the floor): the rate "
                       "is a ping-pong between the CLI, the OS's tty layer and the reader, and moves with scheduling "
                       "on a 2-core box (the floor alone swings up to ~2x between identical runs; see the rounds)")

    # -- keystrokes
    fe, ke = r["floor_echo"], r["kernel_echo"]
    g = f"paced, one per {gap:g} ms"
    for label, key in (("back to back", "back_to_back"), (g, "paced")):
        floor = fe.get(key, {})
        echo.rows.append(["floor: `cat` under a PTY, a byte to the master, read its echo (one process)", label,
                          *_pct_row(floor, None)])
        echo.rows.append(["acp kernel: `input` comm message -> `data` message with the echo", label,
                          *_pct_row(ke.get(key, {}), floor)])
        echo.rows.append(["  of which: sent -> the kernel's `status: busy` for it", label,
                          *_pct_row(ke.get(key + "_to_busy", {}), None)[:4], ""])
        echo.rows.append(["  of which: `status: busy` -> the echo's `data` message", label,
                          *_pct_row(ke.get(key + "_busy_to_echo", {}), None)[:4], ""])
        if "error" in ref:
            echo.rows.append(["reference: python3 kernel comm echo", label, "-", "-", "-", "-", f"failed: {ref['error']}"])
        else:
            echo.rows.append(["reference: python3 kernel (ipykernel) comm echo, no PTY", label,
                              *_pct_row(ref.get(key, {}), floor)])
    for row in echo.rows:
        row[1] = f"{keys:,} {row[1]}" if row[1] in ("back to back", g) else row[1]
    echo.notes.append("one key at a time: each is sent when the previous echo has arrived (back to back), or on a "
                      f"fixed {gap:g} ms schedule (paced; a fast typist or key repeat), and timed until a widget "
                      "`data` message carrying it arrives at this frontend; added p50 = p50 - the floor's p50")
    echo.notes.append("back to back, an echo comes < 1/60 s after the previous message, and the widget holds it "
                      "until FRAME (1/60 s) has passed since that message: the p50 is the coalescing interval, "
                      "not work (see the `status: busy -> echo` row)")
    echo.notes.append("`status: busy` is what ipykernel publishes when it starts handling the comm message; it goes "
                      "through the same iopub path as the echo, so the split is approximate")
    return [flood, echo]


# -- hostile agent (benchmarks/hostile.py) -------------------------------------------------


def hostile(ctx: Ctx) -> list[Section]:
    """Memory under a hostile agent and the cost of the escaping boundary: see hostile.py."""
    if __package__:
        from .hostile import bench
    else:  # python benchmarks/run.py
        from hostile import bench  # type: ignore[no-redef]
    return bench(ctx)


# -- one long turn through the kernel (issue 14) ------------------------------------------------


def long_turn(ctx: Ctx) -> Section:
    """A turn of many steps (a paragraph and a tool call pair each) through a real kernel:
    it is one output (one widget whose blocks are synced as they change, plus its markdown
    fallback), so the frontend's traffic and the time to idle should grow with the steps."""
    a = ctx.args
    counts = [100, a.long_turn_steps] if a.long_turn_steps > 100 else [a.long_turn_steps]
    sec = Section(f"One long turn through jupyter_client: {', '.join(f'{n:,}' for n in counts)} steps "
                  "(a paragraph + a tool call pair each)",
                  ["steps", "execute -> idle", "net of an empty turn", "outputs (display_data)", "updates",
                   "iopub msgs", "iopub bytes", "bytes/step", "msgs parented elsewhere"])
    prompts = [f"steps={n} chunks=0 tool_calls=0" for n in counts]
    runs = []
    for _ in range(max(1, min(a.repeat, 2))):
        print("  [longturn] round", file=sys.stderr)
        try:
            runs.append(run_cells(ctx, agent_cmd(chunks=0), prompts, empties=1, timeout=600))
        except (Failed, subprocess.TimeoutExpired, RuntimeError) as exc:
            sec.notes.append(f"failed: {exc}")
            return sec
    for i, n in enumerate(counts):
        turns = [r["turns"][i] for r in runs]
        idle = _median([t["idle_seconds"] or t["seconds"] for t in turns])
        empty = _median([r["empty"] for r in runs])
        t = turns[-1]
        msgs, nbytes = _iopub_total(t)
        by = t["by_type"]
        sec.rows.append([f"{n:,}", f"{idle:.2f} s", f"{max(0.0, idle - empty):.2f} s", str(by.get("display_data", [0])[0]),
                         str(by.get("update_display_data", [0])[0]), f"{msgs:,}", _kb(nbytes), _kb(nbytes / n),
                         f"{t.get('other_msgs', 0):,}"])
    sec.notes.append("a headless frontend (no widget manager; allow_stdin False), so the kernel renders the notebook "
                     "view: one widget per turn (comm_open + partial-state comm_msg updates + the fallback's "
                     "update_display_data, at most every 2 s and at the end); outputs counts display_data "
                     "(the agent's start-up line is not in these cells: the warm-up turn started it)")
    return sec


# -- placeholders -------------------------------------------------


def _placeholder(title: str, why: str = "not yet") -> Callable[[Ctx], Section]:
    def bench(ctx: Ctx) -> Section:
        print(f"{title}: {why}", file=sys.stderr)
        return Section(title, [], notes=[why])
    bench.__name__ = "placeholder"
    return bench


#: The registry: name -> benchmark. Each returns a Section; order is run order.
BENCHMARKS: dict[str, Callable[[Ctx], Section]] = {
    "chunks": throughput_chunks,
    "tools": throughput_tools,
    "files": throughput_files,
    "latency": latency,
    "startup": startup,
    "terminal": terminal_service,
    "kernel": kernel_throughput,
    "iopub": iopub_traffic,
    "passthrough": passthrough,
    "hostile": hostile,
    "longturn": long_turn,
    "shell-flood": lambda ctx: __import__("benchmarks.shell_flood", fromlist=["_"]).shell_flood(ctx),
    "widget-state": lambda ctx: __import__("benchmarks.widget_state", fromlist=["_"]).widget_state(ctx),
    "longturn-browser": lambda ctx: __import__("benchmarks.long_turn_browser", fromlist=["_"]).long_turn_browser(ctx),
    "notebook-mcp": lambda ctx: __import__("benchmarks.notebook_mcp", fromlist=["_"]).notebook_mcp(ctx),
    "proposals-browser": lambda ctx: __import__("benchmarks.proposals_browser", fromlist=["_"]).proposals_browser(ctx),
}


# -- machine and report -----------------------------------------------------------------------


def machine() -> dict[str, str]:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    commit = "?"
    try:
        commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, timeout=10).stdout.strip() or "?"
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        commit += " (+ uncommitted changes)" if dirty else ""
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        load = "?"
    return {
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": cpu,
        "cores": str(os.cpu_count()),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "os": f"{platform.system()} {platform.release()}",
        "commit": commit,
        "load average at start": load,
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="small sizes, one round: a CI smoke run (seconds)")
    p.add_argument("--only", help=f"comma-separated subset of: {', '.join(BENCHMARKS)}")
    p.add_argument("--chunks", type=int, help="text chunks for the throughput run (default 100,000)")
    p.add_argument("--size", type=int, default=32, help="characters per chunk (default 32)")
    p.add_argument("--tool-calls", type=int, help="tool call pairs for the tool-call run (default 20,000)")
    p.add_argument("--file-reads", type=int, help="file reads for the files run (default 200)")
    p.add_argument("--file-chars", type=int, default=100_000, help="characters of each file read (default 100,000)")
    p.add_argument("--kernel-tool-calls", type=int,
                   help="tool call pairs for the kernel's tool-call turn (default 2,000; rows of one widget)")
    p.add_argument("--latency-chunks", type=int, help="stamped chunks for the latency run (default 10,000)")
    p.add_argument("--long-turn-steps", type=int,
                   help="steps of the long turn through the kernel (default 1,000, quick 200; 100 is measured too)")
    p.add_argument("--rate", type=float, default=2000.0, help="paced chunks per second (default 2,000)")
    p.add_argument("--terminal-bytes", type=int, help="bytes the terminal benchmark prints (default 1 GiB)")
    p.add_argument("--passthrough-bytes", type=int,
                   help="bytes the passthrough benchmark's /flood prints (default 64 MiB, quick 8 MiB)")
    p.add_argument("--passthrough-keys", type=int,
                   help="keys per passthrough keystroke run, back to back and paced (default 300, quick 50)")
    p.add_argument("--passthrough-rounds", type=int,
                   help="passthrough /flood rounds, each beside a floor run (default 5, quick 1)")
    p.add_argument("--passthrough-gap-ms", type=float, default=30.0,
                   help="paced passthrough keys: one every this many ms (default 30)")
    p.add_argument("--repeat", type=int, help="interleaved rounds per contender (default 3, quick 1)")
    p.add_argument("--no-acpx", action="store_true", help="do not install or run acpx")
    p.add_argument("--no-write", action="store_true", help=f"do not append to {os.path.relpath(RESULTS, ROOT)}")
    p.add_argument("--results", default=RESULTS, help="the markdown file to append to")
    a = p.parse_args(argv)
    q = a.quick
    a.chunks = a.chunks if a.chunks is not None else (5_000 if q else 100_000)
    a.tool_calls = a.tool_calls if a.tool_calls is not None else (1_000 if q else 20_000)
    a.file_reads = a.file_reads if a.file_reads is not None else (20 if q else 200)
    a.kernel_tool_calls = a.kernel_tool_calls if a.kernel_tool_calls is not None else (200 if q else 2_000)
    a.latency_chunks = a.latency_chunks if a.latency_chunks is not None else (1_000 if q else 10_000)
    a.long_turn_steps = a.long_turn_steps if a.long_turn_steps is not None else (200 if q else 1_000)
    a.terminal_bytes = a.terminal_bytes if a.terminal_bytes is not None else ((32 << 20) if q else (1 << 30))
    a.repeat = a.repeat if a.repeat is not None else (1 if q else 3)
    a.passthrough_bytes = a.passthrough_bytes if a.passthrough_bytes is not None else ((8 << 20) if q else (64 << 20))
    a.passthrough_keys = a.passthrough_keys if a.passthrough_keys is not None else (50 if q else 300)
    a.passthrough_rounds = a.passthrough_rounds if a.passthrough_rounds is not None else (1 if q else 5)
    names = [n.strip() for n in a.only.split(",")] if a.only else list(BENCHMARKS)
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        p.error(f"unknown benchmark(s): {', '.join(unknown)}; choose from {', '.join(BENCHMARKS)}")
    a.names = names
    return a


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    info = machine()
    with tempfile.TemporaryDirectory(prefix="acp-bench-") as tmp:
        ctx = Ctx(args, tmp, bench_env())
        if {"chunks", "tools", "files"} & set(args.names):
            ctx.acpx = setup_acpx(args)
        sections: list[Section] = []
        for name in args.names:
            print(f"== {name}", file=sys.stderr)
            result = BENCHMARKS[name](ctx)
            sections.extend(result if isinstance(result, list) else [result])
    elapsed = time.perf_counter() - started
    command = "python -m benchmarks" + ("" if argv is None and len(sys.argv) <= 1 else " " + " ".join(
        shlex.quote(x) for x in (sys.argv[1:] if argv is None else argv)))
    head = [f"## {info['date']}: {info['cpu']}, {info['cores']} cores, {info['python']}", ""]
    head += [f"- {k}: {v}" for k, v in info.items()]
    if isinstance(ctx.acpx, Acpx):
        head.append(f"- acpx: {ctx.acpx.version} on Node {ctx.acpx.node_version}")
    head += [f"- command: `{command}` ({elapsed:.0f} s)", ""]
    report = "\n".join(head) + "\n" + "\n".join(s.markdown() for s in sections)
    print(report)
    if not args.no_write:
        new = not os.path.exists(args.results)
        with open(args.results, "a") as f:
            if new:
                f.write("# Benchmark results\n\nAppended by `python -m benchmarks` (see README.md). "
                        "Compare ratios, not absolute times, across machines.\n\n")
            f.write(report + "\n")
        print(f"appended to {os.path.relpath(args.results)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
