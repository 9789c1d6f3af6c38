"""Run each installed real agent CLI through the acp kernel's passthrough (issue 12).

For each CLI: a stub model server on 127.0.0.1, a throwaway HOME configured by
clis.py, and an ``acp`` kernel started through jupyter_client with
``ACP_KERNEL_CONFIG`` pointing ``agents.NAME.passthrough.command`` (and ``env``)
at that CLI. Then, as a notebook's Run All would (all queued at once):

1. ``%passthrough NAME``
2. three prompt cells
3. a two-line cell

then a two-line ``SLOW`` cell interrupted (kernel interrupt) once its reply
streams, one more cell (which must reach the model alone: Claude Code puts a
cancelled prompt back into its input), and ``%passthrough stop``; finally whether any process the kernel
started for the CLI is still alive (by pid, from /proc).

The verdicts come from the stub's request log (what the CLI sent to its model,
and whether a streamed reply was cut) and from the cells' own outputs (whether
the cell shows the reply), never from timing. Prints one table row per CLI.

    python tests/realclis/run_matrix.py [NAME ...] [--json FILE] [--cell-timeout S] [--load N]

``--load N`` runs N busy loops (one process each) for the whole run, as a loaded
machine (issue 23: first cells lost under load); they are ended by pid.

Only public entry points are used: the ``acp`` kernelspec (installed with
``python -m acp_kernel install --prefix``), magics in cells, jupyter_client.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[2]))  # run by hand too: tests.kernels
from clis import PROFILES, prepare  # noqa: E402
from tests.kernels import BlockingIpcKernelManager  # noqa: E402
from stub_model_server import StubServer  # noqa: E402

PROMPTS = ("alpha one", "bravo two", "charlie three")
TWO_LINE = "delta first line\ndelta second line"
SLOW = "SLOW echo please\nand this second line"
AFTER = "echo after interrupt"


@dataclass
class Row:
    name: str
    version: str = ""
    replies: str = "0/3"  # prompts the model got / cells that show the reply
    two_line_one_message: Optional[bool] = None
    interrupt_stops: Optional[bool] = None
    interrupt_says: str = ""
    next_cell: str = "-"  # the model got it / the cell shows the reply
    processes_left: list[int] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass
class Cell:
    msg_id: str
    code: str
    outputs: list[dict[str, Any]] = field(default_factory=list)
    done: bool = False
    status: str = ""

    def text(self) -> str:
        parts = []
        for out in self.outputs:
            if out.get("name") in ("stdout", "stderr"):
                parts.append(out.get("text", ""))
            data = out.get("data") or {}
            parts.append(str(data.get("text/plain", "")))
            if out.get("evalue"):
                parts.append(str(out["evalue"]))
        return "\n".join(parts)


def record_output(cell: Any, msg: dict) -> None:
    """One iopub message of ``cell``'s: its outputs, its status, its end."""
    kind, content = msg["msg_type"], msg["content"]
    if kind == "status" and content.get("execution_state") == "idle":
        cell.done = True
    elif kind in ("stream", "display_data", "execute_result", "error", "update_display_data"):
        cell.outputs.append(content)
        if kind == "error":
            cell.status = "error"


class Notebook:
    """A kernel and a client; cells are sent in order and their outputs collected by msg_id."""

    def __init__(self, env: dict[str, str], cwd: Path, kernel_name: str = "acp") -> None:
        self.km = BlockingIpcKernelManager(kernel_name=kernel_name)  # no TCP port race
        self.km.start_kernel(env=env, cwd=str(cwd))
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=60)
        self.cells: dict[str, Cell] = {}

    @property
    def pid(self) -> int:
        return self.km.provisioner.process.pid  # type: ignore[union-attr]

    def send(self, code: str) -> Cell:
        cell = Cell(self.kc.execute(code, store_history=True), code)
        self.cells[cell.msg_id] = cell
        return cell

    def pump(self, until: Any, timeout: float) -> bool:
        """Read iopub until ``until()`` is true or the timeout passes."""
        end = time.monotonic() + timeout
        while not until():
            left = end - time.monotonic()
            if left <= 0:
                return False
            try:
                msg = self.kc.get_iopub_msg(timeout=min(left, 0.5))
            except queue.Empty:
                continue
            cell = self.cells.get(msg.get("parent_header", {}).get("msg_id", ""))
            if cell is None:
                continue
            record_output(cell, msg)
        return True

    def run(self, code: str, timeout: float) -> Cell:
        cell = self.send(code)
        self.pump(lambda: cell.done, timeout)
        return cell

    def close(self) -> None:
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=False)


def descendants(pid: int) -> set[int]:
    """All live descendants of ``pid`` (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    out: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in out:
                out.add(child)
                todo.append(child)
    return out


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "?"


def under(path: Path) -> set[int]:
    """Live processes whose command line names ``path`` (a CLI's daemon started from our
    throwaway HOME, e.g. codex's app-server, leaves the PTY's session and the kernel's tree)."""
    mark = str(path)
    return {int(e) for e in os.listdir("/proc") if e.isdigit() and mark in cmdline(int(e)) and alive(int(e))}


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def kernelspec_dir(base: Path) -> Path:
    prefix = base / "prefix"
    if not (prefix / "share" / "jupyter" / "kernels" / "acp").exists():
        subprocess.run([sys.executable, "-m", "acp_kernel", "install", "--prefix", str(prefix)], check=True,
                       capture_output=True)
    return prefix / "share" / "jupyter"


def stub_prompts(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def norm(text: str) -> str:
    """A prompt as the stub logs it (whitespace runs made one space)."""
    return " ".join(text.split())[:120]


def wait_for(pred: Any, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.1)
    return bool(pred())


def run_one(name: str, base: Path, cell_timeout: float, passthrough_over: dict[str, Any]) -> Row:
    profile = PROFILES[name]
    row = Row(name)
    work = base / name
    log = work / "stub.jsonl"
    work.mkdir(parents=True, exist_ok=True)
    server = StubServer(0, log).start()
    nb: Optional[Notebook] = None
    try:
        setup = prepare(name, server.url, work / "home", work / "cwd")
        probe = subprocess.run([*setup.argv[:1], *profile.version_args] if name != "kimi" else
                               [setup.argv[0], *profile.version_args], env={**os.environ, **setup.env},
                               capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        row.version = (probe.stdout.strip() or probe.stderr.strip()).splitlines()[0][:40] if (
            probe.stdout.strip() or probe.stderr.strip()) else f"exit {probe.returncode}"
        config = {"agents": {name: {"env": setup.env,
                                    "passthrough": {"command": setup.argv, **passthrough_over}}}}
        config_path = work / "acp_kernel.json"
        config_path.write_text(json.dumps(config), encoding="utf-8")
        env = {**os.environ, **setup.env, "HOME": os.environ.get("HOME", "/root"),
               "JUPYTER_PATH": str(kernelspec_dir(base)), "ACP_KERNEL_CONFIG": str(config_path),
               "ACP_KERNEL_STATE": str(work / "state" / "sessions.json")}
        env.pop("ACP_KERNEL_AGENT", None)
        nb = Notebook(env, work / "cwd")

        def got(text: str) -> bool:  # the model got exactly this prompt (not a title request quoting it)
            return any(str(r.get("prompt", "")) == norm(text) for r in stub_prompts(log) if "method" in r)

        # -- Run All: every cell queued at once -------------------------------------------------
        start = nb.send(f"%passthrough {name}")
        cells = [nb.send(p) for p in PROMPTS]
        two = nb.send(TWO_LINE)
        nb.pump(lambda: two.done, cell_timeout * 5 + 60)
        if start.status == "error" or "error" in start.text().lower():
            row.notes.append("start: " + " ".join(start.text().split())[:120])
        asked = sum(got(p) for p in PROMPTS)
        shown = sum(f"stub reply to: {p}" in c.text() for p, c in zip(PROMPTS, cells))
        row.replies = f"{asked}/3 sent, {shown}/3 shown"
        row.two_line_one_message = got(TWO_LINE) and not any(got(line) for line in TWO_LINE.splitlines())
        merged = [r["prompt"] for r in stub_prompts(log) if r.get("method") == "POST"
                  and sum(p in str(r.get("prompt", "")) for p in PROMPTS) > 1]
        if merged:
            row.notes.append(f"merged prompts: {merged[0][:80]!r}")
        # -- interrupt during a slow reply ----------------------------------------------------
        slow = nb.send(SLOW)
        streaming = wait_for(lambda: got(SLOW), cell_timeout)
        time.sleep(2.0)  # let a few chunks stream (the stub sends one every 0.5 s)
        if streaming:
            nb.km.interrupt_kernel()
        nb.pump(lambda: slow.done, cell_timeout + 30)
        def ends() -> list[dict[str, Any]]:  # the stub logs a cut stream at its next write (<= 0.5 s)
            return [r for r in stub_prompts(log) if r.get("event") == "stream_end" and r.get("prompt") == norm(SLOW)]

        wait_for(lambda: bool(ends()), 5)
        cut = bool(ends()) and not ends()[-1]["completed"]
        row.interrupt_stops = bool(streaming) and cut
        row.interrupt_says = " ".join(slow.text().split()[-12:])[-80:]
        if not any("watchdog" not in cmdline(p) for p in descendants(nb.pid)):
            row.notes.append("the CLI quit on the interrupt")
        if not streaming:
            row.notes.append("SLOW prompt never reached the model")
        after = nb.run(AFTER, cell_timeout)
        wait_for(lambda: got(AFTER), 5)
        merged_after = [r["prompt"] for r in stub_prompts(log) if r.get("method") == "POST"
                        and AFTER in str(r.get("prompt", "")) and r.get("prompt") != norm(AFTER)]
        if merged_after and not got(AFTER):
            row.notes.append(f"next cell merged: {merged_after[0][:80]!r}")
        row.next_cell = ("sent" if got(AFTER) else "lost") + (
            ", shown" if f"stub reply to: {AFTER}" in after.text() else ", not shown")
        # -- stop -------------------------------------------------------------------------------
        # the kernel's own watchdog lives as long as the kernel (by design): not the CLI's
        family = {p for p in descendants(nb.pid) if "watchdog" not in cmdline(p)}
        stop = nb.run("%passthrough stop", cell_timeout)
        wait_for(lambda: not any(alive(p) for p in family), 10)
        row.processes_left = sorted({p for p in family if alive(p)} | under(work / "home"))
        for pid in row.processes_left:
            row.notes.append(f"left: pid {pid} {cmdline(pid)[:60]}")
        if stop.status == "error":
            row.notes.append("stop: " + " ".join(stop.text().split())[:120])
    except Exception as exc:  # a harness failure is a row, not a crash of the whole matrix
        row.notes.append(f"harness: {type(exc).__name__}: {exc}"[:200])
    finally:
        if nb is not None:
            (work / "cells.json").write_text(json.dumps(
                [{"code": c.code, "done": c.done, "status": c.status, "outputs": c.outputs} for c in nb.cells.values()],
                indent=1, default=str), encoding="utf-8")
            leftover = descendants(nb.pid) | under(work / "home")
            nb.close()
            for pid in leftover:  # ours: started by this kernel for this run
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        server.stop()
    return row


def table(rows: list[Row]) -> str:
    def yn(v: Optional[bool]) -> str:
        return "-" if v is None else ("yes" if v else "NO")

    lines = ["| CLI | version | replies (3 cells) | two-line = one message | interrupt stops reply | "
             "interrupt cell says | next cell | processes left | notes |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r.name} | {r.version} | {r.replies} | {yn(r.two_line_one_message)} | "
                     f"{yn(r.interrupt_stops)} | {r.interrupt_says.replace('|', '/')} | {r.next_cell} | "
                     f"{len(r.processes_left)} | "
                     f"{'; '.join(r.notes).replace('|', '/')} |")
    return "\n".join(lines)


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description="Real agent CLIs through %passthrough, against a stub model.")
    ap.add_argument("names", nargs="*", help="CLIs to run (default: every installed one)")
    ap.add_argument("--json", type=Path, help="also write the rows as JSON here")
    ap.add_argument("--cell-timeout", type=float, default=60.0)
    ap.add_argument("--passthrough", default="{}",
                    help='JSON merged into agents.NAME.passthrough (e.g. {"submit_delay": 0.3})')
    ap.add_argument("--keep", action="store_true", help="keep the work directory (HOMEs, stub logs)")
    ap.add_argument("--load", type=int, default=0, help="busy-loop processes to run meanwhile (a loaded machine)")
    args = ap.parse_args(argv)
    names = args.names or [n for n, p in PROFILES.items() if p.installed()]
    missing = [n for n in names if not PROFILES[n].installed()]
    if missing:
        print(f"not installed: {', '.join(missing)} (run tests/realclis/install.sh)", file=sys.stderr)
        return 2
    base = Path(tempfile.mkdtemp(prefix="realcli-matrix-"))
    rows = []
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.load)]
    try:
        for name in names:
            print(f"... {name}", file=sys.stderr, flush=True)
            rows.append(run_one(name, base, args.cell_timeout, json.loads(args.passthrough)))
            print(table(rows[-1:]).splitlines()[-1], file=sys.stderr, flush=True)
    finally:
        for loop in loops:  # ours, by pid
            loop.kill()
            loop.wait(timeout=10)
    print(table(rows))
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in rows], indent=1), encoding="utf-8")
    print(f"work directory: {base}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
