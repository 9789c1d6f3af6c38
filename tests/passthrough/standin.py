"""A stand-in for a real agent CLI's full-screen UI, with each behaviour that
broke passthrough with the real ones (issue 12) behind a flag. Standard
library only (and the ``mcp`` SDK with ``--mcp-config``); run under a PTY:
``python tests/passthrough/standin.py [flags]``.

The screen: the transcript above, an input box between two rules
(``> text``), a footer (``? for shortcuts`` idle, ``esc to interrupt`` busy),
every frame drawn with cursor addressing (raw bytes read as garbage, only a
terminal emulator shows the text). A prompt ``P`` is answered with
``stand-in reply to: P (N lines)``; ``SLOW ...`` streams ``slow chunk i`` lines.

Flags:
  --ink-paste         an Enter in the same read as a paste is a newline (Ink)
  --silent-start S    S seconds of canonical mode and no output, then raw mode
                      with the input typed meanwhile flushed (lost)
  --cancel-key K      esc (default) or ctrl-c stops a reply
  --ctrl-c ACTION     while busy, Ctrl-C does: cancel, dialog (a "Task is still
                      running" dialog whose Enter picks "cancel task"), quit, nothing
  --think S           S seconds of a static "working (esc to interrupt)" screen
                      (no animation) before each reply
  --idle-redraw       repaint the same screen every 0.3 s forever (kimi)
  --log FILE          append what happened as JSON lines (start, prompt, chunk, cancel, esc-idle, dialog, quit)
  --continue          resume the last conversation (its resume flag)
  --fail-resume       with --continue: say there is none and exit 1
  --notice S          S seconds after the first draw a notice line is drawn (Claude Code's
                      "Failed to install ... marketplace" offline); until then the input box and
                      "? for shortcuts" show, but the CLI is still starting: see --notice-drops
  --notice-drops WHAT an Enter before the notice is ignored; enter (default): the text
                      stays typed (Claude Code 2.1.83); input: the notice also empties the
                      input box (newer Claude Code, its "Auto mode" notice)
  --starting-ctrl-u text
                      before the notice, Ctrl-U types a "u" and the input box is drawn empty
                      whatever was typed (Claude Code 2.1.83 while starting)
  --multiline-input   the input box shows each line of the input on a row of its own, and
                      Ctrl-U clears the last line, or on an empty last line deletes the line
                      break before it (Claude Code 2.1.197)
  --cancel-restores   a cancel puts the cancelled prompt back into the input (Claude Code)
  --lag S             a loaded machine: each read of input is handled (and drawn) S seconds
                      late, so keys written apart may arrive in one read
  --busy-late S       after a prompt, the echo is drawn at once, but nothing else changes for
                      S seconds: no working footer, then the reply (kimi, opencode under load)
  --loading S         S seconds in raw mode drawing only a start-up line that changes every
                      0.5 s ("loading 1", "loading 2", ...), then the UI (opencode's slow first
                      draw on a loaded machine: no input box, no ready footer until then)
  --approval          a prompt ``ask ...`` opens an approval box of the CLI's own (kimi's: under
                      the input box's rule, the footer idle, nothing moving) and waits: 1 or
                      Enter approves (the reply follows), 2 rejects, Esc cancels; other keys and
                      pastes are ignored while it shows (log events approval-open,
                      approval-answer with the key)
  --mcp-config FILE   start the MCP servers of FILE (``{"mcpServers": {NAME: {command,
                      args, env}}}``, as claude's flag) at launch with the ``mcp`` SDK's
                      stdio client, on a thread; the prompts ``mcp variables [NAME]``,
                      ``mcp run CODE`` and ``mcp cells`` call that tool and print the
                      result (log events mcp-ready, mcp-result)
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import select
import sys
import termios
import threading
import time
import tty
from typing import Any

PASTE_START, PASTE_END = "\x1b[200~", "\x1b[201~"
#: Lines of a tool's result shown on the screen (the log has all of it).
MCP_SHOWN = 24


def children(pid: int) -> list[int]:
    """Processes whose parent is ``pid`` (from /proc)."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as f:
                    stat = f.read()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(entry))
    return out


class McpLink:
    """The MCP servers of a config file, as a CLI starts them: at launch, kept
    for its lifetime. One asyncio loop on a thread owns the stdio client (its
    task group lives in one task); calls go in through a queue and results
    come back through a pipe the UI's select() watches."""

    def __init__(self, path: str, log: Any, errlog: str) -> None:
        import asyncio

        self.path, self.log, self.errlog = path, log, errlog
        self.results: "queue.Queue[list[str]]" = queue.Queue()
        self.wake_r, self.wake_w = os.pipe()
        self.loop = asyncio.new_event_loop()
        self.calls: Any = asyncio.Queue()  # calls made before the server is up wait here
        self.failed = ""
        threading.Thread(target=self._run, name="mcp", daemon=True).start()

    def _run(self) -> None:
        self.loop.run_until_complete(self._serve())

    async def _serve(self) -> None:
        from mcp import ClientSession
        from mcp.client.stdio import StdioServerParameters, stdio_client

        try:
            with open(self.path, encoding="utf-8") as f:
                config = json.load(f)
            (name, entry), = config["mcpServers"].items()
            params = StdioServerParameters(command=entry["command"], args=list(entry.get("args") or []),
                                           env=dict(entry.get("env") or {}) or None)
            with open(self.errlog, "a", encoding="utf-8") as errlog:
                async with stdio_client(params, errlog=errlog) as (read, write):
                    async with ClientSession(read, write) as session:
                        await session.initialize()
                        tools = await session.list_tools()
                        self.log("mcp-ready", server=name, argv=[entry["command"], *entry.get("args", [])],
                                 tools=sorted(t.name for t in tools.tools), pids=children(os.getpid()))
                        while True:
                            tool, args = await self.calls.get()
                            try:
                                result = await session.call_tool(tool, args, read_timeout_seconds=120)
                                lines = self._lines(tool, result)
                            except Exception as exc:  # noqa: BLE001 - shown on the screen
                                lines = [f"mcp {tool} failed: {type(exc).__name__}: {exc}"]
                            self.log("mcp-result", tool=tool, args=args, lines=lines)
                            self._deliver(lines)
        except Exception as exc:  # noqa: BLE001 - the UI says so on the next call
            self.failed = f"{type(exc).__name__}: {exc}"
            self.log("mcp-failed", error=self.failed)
            self._deliver([f"mcp server failed: {self.failed}"])

    @staticmethod
    def _lines(tool: str, result: Any) -> list[str]:
        lines = [f"mcp {tool} -> {'error' if result.is_error else 'ok'}"]
        for item in result.content:
            if getattr(item, "type", "") == "text":
                lines += item.text.split("\n")
            else:
                lines.append(f"[{getattr(item, 'type', '?')} {getattr(item, 'mimeType', '')}]")
        return lines

    def _deliver(self, lines: list[str]) -> None:
        self.results.put(lines)
        os.write(self.wake_w, b"x")

    def call(self, tool: str, args: dict[str, Any]) -> None:
        if self.failed:
            self._deliver([f"mcp server not running{': ' + self.failed if self.failed else ''}"])
            return
        self.loop.call_soon_threadsafe(self.calls.put_nowait, (tool, args))

    def take(self) -> list[list[str]]:
        os.read(self.wake_r, 4096)
        out = []
        while not self.results.empty():
            out.append(self.results.get_nowait())
        return out


class App:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.transcript: list[str] = []
        self.input = ""
        self.busy = False
        self.dialog = False
        self.approval = ""  # the prompt an open approval box asks about
        self.stream: list[str] = []  # lines still to come of the current reply
        self.think_until = 0.0
        self.next_tick = 0.0
        self.in_paste = False
        self.quit = False
        self.waiting = False  # for an MCP tool's result
        self.started = time.monotonic()
        self.noticed = not args.notice  # the start-up notice has been drawn
        self.busy_from = 0.0  # the working footer shows from then on (--busy-late)
        self.last_prompt = ""
        self.mcp: McpLink | None = None
        if args.mcp_config:
            self.mcp = McpLink(args.mcp_config, self.log, (args.log or os.devnull) + (".mcp-stderr" if args.log else ""))

    # -- drawing -------------------------------------------------------------------

    def size(self) -> tuple[int, int]:
        try:
            s = os.get_terminal_size(1)
            return s.lines, s.columns
        except OSError:
            return 24, 80

    def frame(self) -> str:
        rows, cols = self.size()
        shown = "" if not self.noticed and self.args.starting_ctrl_u == "text" else self.input
        if self.args.multiline_input:
            box_lines = ["> " + shown.split("\n")[0], *("  " + ln for ln in shown.split("\n")[1:])]
        else:
            box_lines = ["> " + shown.replace("\n", " ⏎ ")]
        area = rows - 3 - len(box_lines)
        lines = self.transcript[-area:] if area > 0 else []
        lines = lines + [""] * (area - len(lines))
        if self.busy and time.monotonic() < self.think_until:
            lines[-1] = "working (esc to interrupt)"
        if self.dialog:
            lines[-2:] = ["Task is still running", "1. Cancel task  2. Exit"]
        if self.approval:
            inner = cols - 2
            body = [f"  shell is requesting approval to run: {self.approval}", "", " → [1] Approve once",
                    "   [2] Reject", "", "   ▲/▼ select  1/2 choose  ↵ confirm"]
            box = ["╭─ approval " + "─" * (inner - 11) + "╮", *(f"│{b[:inner].ljust(inner)}│" for b in body),
                   "╰" + "─" * inner + "╯"]
            lines[-len(box):] = box
        rule = "─" * cols
        working = self.busy and time.monotonic() >= self.busy_from
        footer = ("enter select · esc back" if self.dialog else "esc to interrupt" if working and not self.approval
                  else "? for shortcuts")
        out = ["\x1b[?25l"]
        for y, text in enumerate([*lines, rule, *box_lines, rule, footer], start=1):
            out.append(f"\x1b[{y};1H{text[:cols]}\x1b[K")
        out.append(f"\x1b[{rows - 2};{min(len(box_lines[-1]), cols - 1) + 1}H\x1b[?25h")
        return "".join(out)

    def log(self, event: str, **data: object) -> None:
        if self.args.log:
            with open(self.args.log, "a", encoding="utf-8") as f:
                f.write(json.dumps({"event": event, **data}) + "\n")

    def draw(self) -> None:
        os.write(1, self.frame().encode())

    # -- input -----------------------------------------------------------------------

    def feed(self, chunk: str) -> None:
        pasted = False
        i = 0
        while i < len(chunk):
            if chunk.startswith(PASTE_START, i):
                self.in_paste, pasted = True, True
                i += len(PASTE_START)
                continue
            if chunk.startswith(PASTE_END, i):
                self.in_paste = False
                i += len(PASTE_END)
                continue
            ch = chunk[i]
            i += 1
            if self.approval:
                if not self.in_paste and ch in "12\r\x1b":
                    self.answer(ch)
                continue  # what else comes goes nowhere while the box asks
            if self.in_paste:
                self.input += "\n" if ch in "\r\n" else ch
            elif ch == "\x1b":
                if chunk.startswith("[", i):  # some other CSI: skip it
                    i += 1
                    while i < len(chunk) and not "@" <= chunk[i] <= "~":
                        i += 1
                    i += 1
                else:
                    self.key_escape()
            elif ch == "\x03":
                self.key_ctrl_c()
            elif ch == "\x15":
                if not self.noticed and self.args.starting_ctrl_u == "text":
                    self.input += "u"  # Claude Code 2.1.83 while starting: the key's letter, typed
                else:
                    self.key_ctrl_u()
            elif ch in "\r\n":
                if self.args.ink_paste and pasted:
                    self.input += "\n"  # Ink: an Enter inside the paste burst
                else:
                    self.key_enter()
            elif ch == "\x7f":
                self.input = self.input[:-1]
            elif ch.isprintable():
                self.input += ch
        self.draw()

    def key_ctrl_u(self) -> None:
        if not self.args.multiline_input:
            self.input = ""
        elif self.input.endswith("\n"):  # an empty last line: the line break goes
            self.input = self.input[:-1]
        else:
            self.input = self.input[:self.input.rfind("\n") + 1]

    def key_escape(self) -> None:
        if self.dialog:
            self.dialog = False
        elif self.busy and self.args.cancel_key == "esc":
            self.cancel()
        else:  # an Esc at the idle prompt does nothing, as in the real CLIs; logged for the tests
            self.log("esc-idle")

    def key_ctrl_c(self) -> None:
        if not self.busy:
            self.input = ""
            return
        action = "cancel" if self.args.cancel_key == "ctrl-c" else self.args.ctrl_c
        if action == "cancel":
            self.cancel()
        elif action == "dialog":
            self.dialog = not self.dialog
            self.log("dialog", open=self.dialog)
        elif action == "quit":
            self.log("quit")
            self.quit = True

    def key_enter(self) -> None:
        if self.dialog:  # "1. Cancel task": and the Enter meant for a prompt is gone
            self.dialog = False
            self.cancel()
            return
        if not self.noticed:
            self.log("enter-ignored", text=self.input)  # still starting: the typed text stays
            return
        prompt, self.input = self.input, ""
        if not prompt.strip() or self.busy:
            return
        self.log("prompt", text=prompt)
        self.last_prompt = prompt
        self.transcript += ["> " + line for line in prompt.split("\n")]
        self.busy = True
        self.busy_from = time.monotonic() + self.args.busy_late
        self.think_until = self.busy_from + self.args.think
        if prompt.split(" ", 1)[0] == "mcp":
            self.mcp_call(prompt[4:])
        elif self.args.approval and prompt.startswith("ask "):
            self.approval = prompt[4:]
            self.waiting = True  # nothing moves until the person answers
            self.log("approval-open", text=self.approval)
        elif prompt.startswith("SLOW"):
            self.stream = [f"slow chunk {i}" for i in range(1, 201)]
        else:
            first = prompt.split("\n")[0]
            n = prompt.count("\n") + 1
            self.stream = [f"stand-in reply to: {first} ({n} line{'s' if n > 1 else ''})"]
        self.next_tick = self.think_until

    def answer(self, key: str) -> None:
        """The person's answer to the approval box."""
        self.log("approval-answer", key={"\r": "enter", "\x1b": "esc"}.get(key, key))
        asked, self.approval, self.waiting = self.approval, "", False
        if key == "\x1b":
            self.cancel()
            return
        self.stream = [f"stand-in ran: {asked}" if key in "1\r" else f"stand-in was told not to run: {asked}"]
        self.next_tick = time.monotonic()

    def notice(self) -> None:
        self.noticed = True
        self.transcript.append("Failed to install the stand-in marketplace (offline)")
        if self.args.notice_drops == "input":
            self.log("input-dropped", text=self.input)
            self.input = ""
        self.log("notice")
        self.draw()

    def mcp_call(self, rest: str) -> None:
        """``variables [NAME]``, ``run CODE`` (the rest of the prompt, lines and all), ``cells``."""
        verb, _, arg = rest.partition(" ")
        call = {"variables": ("variables", {"name": arg.strip()} if arg.strip() else {}),
                "run": ("execute", {"code": arg}), "cells": ("cells", {})}.get(verb)
        if call is None or self.mcp is None:
            why = "no --mcp-config given" if self.mcp is None else f"unknown: mcp {verb} (variables, run, cells)"
            self.stream = [f"mcp: {why}"]
            return
        self.waiting = True
        self.mcp.call(*call)

    def mcp_results(self) -> None:
        for lines in self.mcp.take() if self.mcp else []:
            shown = lines[:MCP_SHOWN] + ([f"... ({len(lines) - MCP_SHOWN} more lines)"] if len(lines) > MCP_SHOWN else [])
            self.transcript += [*shown, ""]
            if self.waiting:
                self.waiting = self.busy = False
        self.draw()

    def cancel(self) -> None:
        self.log("cancel", left=len(self.stream))
        self.stream = []
        self.busy = self.waiting = False
        self.transcript += ["Interrupted by user", ""]
        if self.args.cancel_restores:  # the cancelled prompt, back in the input box to edit
            self.input = self.last_prompt + self.input

    # -- time --------------------------------------------------------------------------

    def tick(self, now: float) -> None:
        if not self.noticed and now >= self.started + self.args.notice:
            self.notice()
        if self.waiting:
            return
        if self.busy and now >= self.next_tick:
            if self.stream:
                self.transcript.append(self.stream.pop(0))
                self.log("chunk", text=self.transcript[-1])
                self.next_tick = now + 0.25
            else:
                self.busy = False
                self.transcript.append("")
            self.draw()
        elif self.args.idle_redraw and now >= self.next_tick:
            self.draw()  # the same screen again
            self.next_tick = now + 0.3

    def run(self) -> int:
        self.draw()
        while not self.quit:
            now = time.monotonic()
            wait = max(0.0, self.next_tick - now) if ((self.busy and not self.waiting) or self.args.idle_redraw) else None
            if not self.noticed:
                left = max(0.0, self.started + self.args.notice - now)
                wait = left if wait is None else min(wait, left)
            fds = [0] + ([self.mcp.wake_r] if self.mcp else [])
            ready, _, _ = select.select(fds, [], [], wait)
            if self.mcp and self.mcp.wake_r in ready:
                self.mcp_results()
            if 0 in ready:
                data = os.read(0, 65536)
                if not data:
                    return 0
                if self.args.lag:
                    time.sleep(self.args.lag)  # what came meanwhile is read with it
                    while select.select([0], [], [], 0)[0]:
                        more = os.read(0, 65536)
                        if not more:
                            break
                        data += more
                self.feed(data.decode(errors="replace"))
            self.tick(time.monotonic())
        return 3


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ink-paste", action="store_true")
    ap.add_argument("--silent-start", type=float, default=0.0)
    ap.add_argument("--cancel-key", choices=["esc", "ctrl-c"], default="esc")
    ap.add_argument("--ctrl-c", choices=["cancel", "dialog", "quit", "nothing"], default="nothing")
    ap.add_argument("--think", type=float, default=0.0)
    ap.add_argument("--idle-redraw", action="store_true")
    ap.add_argument("--log", default="")
    ap.add_argument("--continue", dest="resume", action="store_true")
    ap.add_argument("--fail-resume", action="store_true")
    ap.add_argument("--mcp-config", default="")
    ap.add_argument("--notice", type=float, default=0.0)
    ap.add_argument("--notice-drops", choices=["enter", "input"], default="enter")
    ap.add_argument("--multiline-input", action="store_true")
    ap.add_argument("--starting-ctrl-u", choices=["clear", "text"], default="clear")
    ap.add_argument("--cancel-restores", action="store_true")
    ap.add_argument("--lag", type=float, default=0.0)
    ap.add_argument("--busy-late", type=float, default=0.0)
    ap.add_argument("--approval", action="store_true")
    ap.add_argument("--loading", type=float, default=0.0)
    args = ap.parse_args()
    if args.resume and args.fail_resume:
        print("no conversation to continue", flush=True)
        return 1
    time.sleep(args.silent_start)  # canonical mode, nothing drawn: not ready
    saved = termios.tcgetattr(0)
    tty.setraw(0, termios.TCSAFLUSH)  # what was typed before now is discarded
    os.write(1, b"\x1b[?1049h\x1b[?2004h")
    step, end = 0, time.monotonic() + args.loading
    while time.monotonic() < end:  # drawing its start, slowly: not ready
        step += 1
        os.write(1, f"\x1b[2J\x1b[1;1Hloading {step}".encode())
        time.sleep(min(0.5, max(0.0, end - time.monotonic())))
    try:
        app = App(args)
        app.log("start", resumed=args.resume, argv=sys.argv[1:])
        if args.resume:
            app.transcript.append("(resumed conversation)")
        return app.run()
    except OSError:
        return 0
    finally:
        try:
            os.write(1, b"\x1b[?2004l\x1b[?1049l")
            termios.tcsetattr(0, termios.TCSANOW, saved)
        except OSError:
            pass


if __name__ == "__main__":
    sys.exit(main())
