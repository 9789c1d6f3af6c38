"""Run one real CLI under a PTY (120x40) and watch it: termios mode, output, screen.

Used to characterise the CLIs by hand (``python tests/realclis/ptyprobe.py NAME``
runs the standard experiments and prints a JSON report plus screens) and by
nothing in CI. Every wait has a timeout; the process is ended by its pid.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
import tempfile
import termios
import threading
import time
from pathlib import Path
from typing import Any, Optional

import ptyprocess
import pyte

sys.path.insert(0, str(Path(__file__).resolve().parent))
from clis import PROFILES, prepare  # noqa: E402
from stub_model_server import StubServer  # noqa: E402

ROWS, COLS = 40, 120
PASTE_START, PASTE_END = "\x1b[200~", "\x1b[201~"


class PtyCli:
    """One CLI process on a PTY, its output fed to a pyte screen by a reader thread."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        self.t0 = time.monotonic()
        self.proc = ptyprocess.PtyProcess.spawn(argv, env=env, cwd=str(cwd), dimensions=(ROWS, COLS))
        self.screen = pyte.Screen(COLS, ROWS)
        self.stream = pyte.ByteStream(self.screen)
        self.lock = threading.Lock()
        self.raw = bytearray()
        self.last_output = self.t0
        self.last_change = self.t0  # the rendered screen last changed (kimi redraws an unchanged screen forever)
        self._shown: tuple[str, ...] = ()
        self.first_output: Optional[float] = None
        self.raw_mode_at: Optional[float] = None
        self.paste_mode_at: Optional[float] = None
        self.chunks: list[tuple[float, int]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._watch = threading.Thread(target=self._watch_mode, daemon=True)
        self._watch.start()

    def now(self) -> float:
        return time.monotonic() - self.t0

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self.proc.fd, 65536)
            except OSError:
                return
            if not data:
                return
            with self.lock:
                t = self.now()
                if self.first_output is None:
                    self.first_output = t
                if self.paste_mode_at is None and b"\x1b[?2004h" in data:
                    self.paste_mode_at = t
                self.raw += data
                self.chunks.append((t, len(data)))
                self.last_output = time.monotonic()
                try:
                    self.stream.feed(data)
                except Exception:  # pyte chokes on a few private sequences; keep going
                    pass
                shown = tuple(self.screen.display)
                if shown != self._shown:
                    self._shown = shown
                    self.last_change = time.monotonic()

    def _watch_mode(self) -> None:
        while self.proc.isalive() and self.raw_mode_at is None:
            try:
                lflag = termios.tcgetattr(self.proc.fd)[3]
            except termios.error:
                return
            if not lflag & termios.ICANON:
                self.raw_mode_at = self.now()
                return
            time.sleep(0.01)

    def termios_flags(self) -> dict[str, bool]:
        lflag = termios.tcgetattr(self.proc.fd)[3]
        return {"ICANON": bool(lflag & termios.ICANON), "ECHO": bool(lflag & termios.ECHO),
                "ISIG": bool(lflag & termios.ISIG)}

    def text(self) -> str:
        with self.lock:
            return "\n".join(line.rstrip() for line in self.screen.display).rstrip()

    def quiet_for(self) -> float:
        """How long the rendered screen has not changed (bytes that redraw the same screen do not count)."""
        return time.monotonic() - self.last_change

    def bytes_quiet_for(self) -> float:
        return time.monotonic() - self.last_output

    def wait(self, pattern: str, timeout: float) -> bool:
        rx = re.compile(pattern)
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if rx.search(self.text()):
                return True
            if not self.proc.isalive():
                return bool(rx.search(self.text()))
            time.sleep(0.05)
        return False

    def wait_quiet(self, seconds: float, timeout: float) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.quiet_for() >= seconds:
                return True
            time.sleep(0.05)
        return False

    def wait_exit(self, timeout: float) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if not self.proc.isalive():
                return True
            time.sleep(0.05)
        return not self.proc.isalive()

    def send(self, data: str) -> None:
        os.write(self.proc.fd, data.encode())

    def paste(self, text: str) -> None:
        self.send(PASTE_START + text + PASTE_END)

    def max_gap(self, since: float, until: float) -> float:
        """The longest output silence between two times (seconds since start)."""
        with self.lock:
            ts = [t for t, _ in self.chunks if since <= t <= until]
        points = [since, *ts, until]
        return max(b - a for a, b in zip(points, points[1:]))

    def close(self) -> None:
        if self.proc.isalive():
            try:
                os.killpg(self.proc.pid, signal.SIGHUP)
            except ProcessLookupError:
                pass
            if not self.wait_exit(3):
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.wait_exit(3)
        try:
            self.proc.close(force=True)
        except Exception:
            pass


class Lab:
    """A stub server, a throwaway HOME and cwd, and helpers to read the stub's log."""

    def __init__(self, name: str, base: Optional[Path] = None) -> None:
        self.name = name
        self.base = base or Path(tempfile.mkdtemp(prefix=f"realcli-{name}-"))
        self.home, self.cwd = self.base / "home", self.base / "work"
        self.log = self.base / "stub.jsonl"
        self.server = StubServer(0, self.log).start()
        self.setup = prepare(name, self.server.url, self.home, self.cwd)

    def spawn(self, extra_args: tuple[str, ...] = ()) -> PtyCli:
        return PtyCli([*self.setup.argv, *extra_args], self.setup.env, self.cwd)

    def requests(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines() if line.strip()]

    def prompts(self) -> list[str]:
        return [r.get("prompt", "") for r in self.requests() if r.get("method") == "POST"]

    def wait_prompt(self, needle: str, timeout: float) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if any(needle in p for p in self.prompts()):
                return True
            time.sleep(0.05)
        return False

    def stream_ends(self, needle: str) -> list[bool]:
        return [r["completed"] for r in self.requests() if r.get("event") == "stream_end" and needle in r["prompt"]]

    def close(self) -> None:
        self.server.stop()
        # codex starts an app-server daemon from $HOME/.codex/packages that leaves the PTY's
        # session and outlives SIGHUP: end whatever still runs from this lab's HOME, by pid.
        mark = str(self.home).encode()
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/cmdline", "rb") as f:
                        if mark in f.read():
                            os.kill(int(entry), signal.SIGKILL)
                except OSError:
                    pass


# -- the standard experiments -----------------------------------------------------------


def readiness(cli: PtyCli, quiet: float = 1.5, timeout: float = 60) -> dict[str, Any]:
    cli.wait_quiet(quiet, timeout)
    # ready = raw mode and then quiet
    return {"first_output_s": cli.first_output, "raw_mode_s": cli.raw_mode_at, "paste_mode_s": cli.paste_mode_at,
            "quiet_at_s": round(cli.now(), 2), "flags": cli.termios_flags()}


def submit_trials(lab: Lab, cli: PtyCli, delays: tuple[float, ...]) -> list[dict[str, Any]]:
    out = []
    for i, d in enumerate(delays):
        word = f"submit{i}x{int(d * 1000)}"
        cli.paste(f"say {word}")
        if d == 0:
            pass
        else:
            time.sleep(d)
        t = time.monotonic()
        cli.send("\r")
        ok = lab.wait_prompt(word, 6)
        res: dict[str, Any] = {"delay": d, "submitted": ok}
        if not ok:  # leftover: a second Enter submits what is in the box
            cli.send("\r")
            res["second_enter_submits"] = lab.wait_prompt(word, 6)
            got = [p for p in lab.prompts() if word in p]
            res["merged_prompt"] = got[-1] if got else None
        else:
            res["latency_s"] = round(time.monotonic() - t, 2)
        cli.wait(re.escape(f"stub reply to: say {word}")[:40], 15)
        cli.wait_quiet(1.0, 20)
        out.append(res)
    return out


def main(argv: Optional[list[str]] = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("name", choices=sorted(PROFILES))
    ap.add_argument("--steps", default="ready,submit,twoline,think,esc,clear,ctrlc")
    args = ap.parse_args(argv)
    lab = Lab(args.name)
    report: dict[str, Any] = {"name": args.name, "base": str(lab.base)}
    steps = args.steps.split(",")
    cli = lab.spawn()
    try:
        report["ready"] = readiness(cli)
        report["screen_ready"] = cli.text()
        if "submit" in steps:
            report["submit"] = submit_trials(lab, cli, (0.0, 0.05, 0.15, 0.4))
        if "twoline" in steps:
            cli.paste("first line TWO\nsecond line TWO")
            time.sleep(0.5)
            cli.send("\r")
            lab.wait_prompt("TWO", 8)
            report["twoline_prompts"] = [p for p in lab.prompts() if "TWO" in p]
            cli.wait_quiet(1.5, 20)
        if "think" in steps:
            cli.paste("THINK about it")
            time.sleep(0.5)
            cli.send("\r")
            start = cli.now()
            lab.wait_prompt("THINK", 8)
            time.sleep(3)
            report["screen_thinking"] = cli.text()
            cli.wait("stub reply to: THINK", 15)
            report["think_max_gap_s"] = round(cli.max_gap(start + 0.5, start + 7.5), 2)
            cli.wait_quiet(1.5, 20)
        if "esc" in steps:
            cli.paste("SLOW esc test")
            time.sleep(0.5)
            cli.send("\r")
            lab.wait_prompt("SLOW esc", 8)
            cli.wait("slow chunk 3", 10)
            report["screen_slow"] = cli.text()
            cli.send("\x1b")
            time.sleep(2.5)
            report["esc_stream_ends"] = lab.stream_ends("SLOW esc")
            report["screen_after_esc"] = cli.text()
            report["alive_after_esc"] = cli.proc.isalive()
            cli.wait_quiet(1.5, 25)
        if "clear" in steps and cli.proc.isalive():
            cli.send("leftover words")
            time.sleep(0.7)
            report["screen_typed"] = cli.text()
            cli.send("\x15")  # Ctrl-U
            time.sleep(0.7)
            report["ctrl_u_clears"] = "leftover words" not in cli.text()
            if not report["ctrl_u_clears"]:
                cli.send("\x1b")
                time.sleep(0.7)
                report["esc_clears"] = "leftover words" not in cli.text()
        if "ctrlc" in steps and cli.proc.isalive():
            cli.paste("SLOW ctrlc test")
            time.sleep(0.5)
            cli.send("\r")
            lab.wait_prompt("SLOW ctrlc", 8)
            cli.wait("slow chunk 3", 10)
            cli.send("\x03")
            time.sleep(2.5)
            report["ctrlc_stream_ends"] = lab.stream_ends("SLOW ctrlc")
            report["screen_after_ctrlc"] = cli.text()
            report["alive_after_ctrlc"] = cli.proc.isalive()
            if cli.proc.isalive():
                cli.send("\x03")
                time.sleep(2.0)
                report["screen_after_2nd_ctrlc"] = cli.text()
                report["alive_after_2nd_ctrlc"] = cli.proc.isalive()
        report["prompts"] = lab.prompts()
        report["paths"] = sorted({r.get("path", "") for r in lab.requests() if "method" in r})
    finally:
        report["final_screen"] = cli.text()
        cli.close()
        lab.close()
    json.dump(report, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
