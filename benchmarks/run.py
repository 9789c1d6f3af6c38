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


def worker(ctx: Ctx, mode: str, *extra: str, timeout: float = 300) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, WORKERS, mode, *extra], capture_output=True, text=True,
                          env=ctx.env, cwd=ctx.tmp, timeout=timeout)
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


def count_lines(path: str) -> int:
    n = 0
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            n += block.count(b"\n")
    return n


# -- acpx (Node) -------------------------------------------------------------------


@dataclass
class Acpx:
    node: str
    cli: str
    version: str
    node_version: str

    def argv(self, agent: str, fmt: str) -> list[str]:
        return [self.node, self.cli, "--agent", agent, "--approve-all", "--format", fmt, "exec", "go"]


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

    def w(mode: str, *extra: str) -> Callable[[], tuple[float, int]]:
        def run() -> tuple[float, int]:
            r = worker(ctx, mode, *extra)
            return r["seconds"], r.get("updates", r.get("lines", 0) - 1)
        return run

    def sub(argv: list[str], json_out: bool) -> Callable[[], tuple[float, int]]:
        def run() -> tuple[float, int]:
            seconds = timed_run(ctx, argv, stdout_path=out if json_out else None)
            return seconds, (count_lines(out) if json_out else updates)
        return run

    def startup(key: str, argv: list[str]) -> Callable[[], tuple[float, int]]:
        def run() -> tuple[float, int]:
            seconds = timed_run(ctx, argv)
            ctx.startup.setdefault(key, []).append(seconds)
            return seconds, 0
        return run

    contenders = [
        Contender("floor: read the dumped file + json.loads per line", w("floor-file", "--file", dump),
                  note="the reference"),
        Contender("floor: blocking pipe reader + json.loads per line", w("floor-pipe", "--agent", agent),
                  note="minimal client, same agent process"),
        Contender("acp-kernel library (Client + Session.prompt)", w("lib", "--agent", agent),
                  note="in-process, a no-op subscriber"),
        Contender("acp-kernel prompt --format json (subprocess)",
                  sub([*cli, "--format", "json", "--agent-command", agent, "go"], True), "cli",
                  note="stdout to a file; net of startup"),
        Contender("acp-kernel prompt --format text > /dev/null",
                  sub([*cli, "--format", "text", "--agent-command", agent, "go"], False), "cli",
                  note="net of startup"),
    ]
    starters = [Contender("(startup) acp-kernel prompt, empty turn",
                          startup("cli", [*cli, "--format", "json", "--agent-command", empty, "go"]))]
    if isinstance(ctx.acpx, Acpx):
        x = ctx.acpx
        contenders += [
            Contender(f"acpx {x.version} --format json exec (Node {x.node_version})",
                      sub(x.argv(agent, "json"), True), "acpx", note="stdout to a file; net of startup"),
            Contender(f"acpx {x.version} --format quiet exec > /dev/null",
                      sub(x.argv(agent, "quiet"), False), "acpx", note="net of startup"),
        ]
        starters.append(Contender("(startup) acpx exec, empty turn", startup("acpx", x.argv(empty, "json"))))
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
            sec.notes.append(f"{s.name}: {_median(s.times) * 1000:.0f} ms (subtracted from the rows marked net of startup)")
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


# -- latency ------------------------------------------------------------------------------


def latency(ctx: Ctx) -> Section:
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
        ("lib-demo", lambda: worker(ctx, "init-lib", "--agent", f"{shlex.quote(sys.executable)} -m acp_kernel.demo_agent")),
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
    sec.rows.append(["library: import acp_kernel.session", info("lib", "import_seconds"), "cold import"])
    sec.rows.append(["library: Client.start() to initialize done, synthetic agent", info("lib", "init_seconds"),
                     "spawn + initialize"])
    sec.rows.append(["library: ... + session/new", info("lib", "session_seconds"), ""])
    sec.rows.append(["library: Client.start() to initialize done, demo agent", info("lib-demo", "init_seconds"),
                     "python -m acp_kernel.demo_agent"])
    sec.rows.append(["official SDK: import acp", info("sdk", "import_seconds"), "cold import"])
    sec.rows.append(["official SDK: spawn + initialize, synthetic agent", info("sdk", "init_seconds"), ""])
    return sec


# -- terminal service -----------------------------------------------------------------------


def terminal_service(ctx: Ctx) -> Section:
    a = ctx.args
    sec = Section(f"Terminal service: a command printing {a.terminal_bytes / 2**20:,.0f} MiB, outputByteLimit 1 MiB",
                  ["what", "seconds", "MB/s", "speed vs floor", "peak RSS growth", "kept"])
    try:
        import acp_kernel.terminals  # noqa: F401
    except Exception as exc:  # pragma: no cover - depends on the tree
        sec.notes.append(f"not available: acp_kernel.terminals does not import ({type(exc).__name__}: {exc})")
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
    sec.rows.append(["acp_kernel.terminals.Terminal (start -> wait)", f"{seconds:.2f}", f"{mb / seconds:,.0f}",
                     f"{piped / seconds:.2f}", f"{max(x['rss_growth_kib'] for x in results) / 1024:.1f} MiB",
                     f"{r['kept_bytes']:,} B, truncated={r['truncated']}"])
    sec.rows.append(["the same command > /dev/null (no reader at all)", f"{devnull:.2f}", f"{mb / devnull:,.0f}",
                     f"{piped / devnull:.2f}", "-", "-"])
    sec.notes.append("peak RSS growth = VmHWM after minus before, in the measuring process")
    return sec


# -- placeholders (the lead fills these in) -------------------------------------------------


def _placeholder(title: str) -> Callable[[Ctx], Section]:
    def bench(ctx: Ctx) -> Section:
        print(f"{title}: not yet: needs the kernel", file=sys.stderr)
        return Section(title, [], notes=["not yet: needs the kernel"])
    bench.__name__ = "placeholder"
    return bench


#: The registry: name -> benchmark. Each returns a Section; order is run order.
BENCHMARKS: dict[str, Callable[[Ctx], Section]] = {
    "chunks": throughput_chunks,
    "tools": throughput_tools,
    "latency": latency,
    "startup": startup,
    "terminal": terminal_service,
    # TODO(lead): kernel throughput through jupyter_client (execute a prompt cell, time iopub).
    "kernel": _placeholder("Kernel throughput through jupyter_client"),
    # TODO(lead): iopub bytes per turn (sum of iopub message sizes for an N-chunk turn).
    "iopub": _placeholder("iopub bytes per turn"),
    # TODO(lead): passthrough terminal throughput (PTY -> widget comm).
    "passthrough": _placeholder("Passthrough terminal throughput"),
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
    p.add_argument("--latency-chunks", type=int, help="stamped chunks for the latency run (default 10,000)")
    p.add_argument("--rate", type=float, default=2000.0, help="paced chunks per second (default 2,000)")
    p.add_argument("--terminal-bytes", type=int, help="bytes the terminal benchmark prints (default 1 GiB)")
    p.add_argument("--repeat", type=int, help="interleaved rounds per contender (default 3, quick 1)")
    p.add_argument("--no-acpx", action="store_true", help="do not install or run acpx")
    p.add_argument("--no-write", action="store_true", help=f"do not append to {os.path.relpath(RESULTS, ROOT)}")
    p.add_argument("--results", default=RESULTS, help="the markdown file to append to")
    a = p.parse_args(argv)
    q = a.quick
    a.chunks = a.chunks if a.chunks is not None else (5_000 if q else 100_000)
    a.tool_calls = a.tool_calls if a.tool_calls is not None else (1_000 if q else 20_000)
    a.latency_chunks = a.latency_chunks if a.latency_chunks is not None else (1_000 if q else 10_000)
    a.terminal_bytes = a.terminal_bytes if a.terminal_bytes is not None else ((32 << 20) if q else (1 << 30))
    a.repeat = a.repeat if a.repeat is not None else (1 if q else 3)
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
        if {"chunks", "tools"} & set(args.names):
            ctx.acpx = setup_acpx(args)
        sections: list[Section] = []
        for name in args.names:
            print(f"== {name}", file=sys.stderr)
            sections.append(BENCHMARKS[name](ctx))
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
