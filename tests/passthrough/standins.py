"""The stand-in CLIs as registry data: each a ``Passthrough`` (what the
registry would say of a real CLI that behaves so), and its event log."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from acp_kernel.client.registry import Passthrough

STANDIN = Path(__file__).with_name("standin.py")

#: Flags of each stand-in (tests/passthrough/standin.py) and how the registry drives it.
PROFILES: dict[str, tuple[tuple[str, ...], dict[str, Any]]] = {
    "ink": (("--ink-paste",), {}),  # an Enter in the paste burst is a newline
    "silent": (("--silent-start", "1.5", "--ink-paste"), {}),  # raw mode late, typed input flushed
    "esc": ((), {}),  # Esc cancels; Ctrl-C does nothing
    "dialog": (("--ctrl-c", "dialog"), {}),  # Ctrl-C opens a dialog: the registry says Esc
    "think": (("--think", "2.5"), {}),  # a long silent (static) working screen before each reply
    "quit": (("--ctrl-c", "quit"), {}),  # Ctrl-C quits: the registry says Esc
    "redraw": (("--idle-redraw",), {}),  # repaints the same screen forever
    "mcp": ((), {"mcp_args": ("--mcp-config", "{config}")}),  # takes an MCP config file, as claude does
    # issue 23: prompts lost or merged by the real CLIs
    "notice": (("--notice", "2", "--notice-drops", "enter"), {}),  # an Enter while starting is ignored
    "vanish": (("--notice", "2", "--notice-drops", "input"), {}),  # the notice empties the input box
    "notice-u": (("--notice", "5", "--starting-ctrl-u", "text"), {}),  # input unseen, Ctrl-U types "u"
    "restore": (("--multiline-input", "--cancel-restores"), {}),  # a cancel puts the prompt back
    "lag": (("--lag", "0.6", "--ink-paste"), {}),  # late reads: paste and Enter in one read
    "late": (("--busy-late", "2.5"), {}),  # the echo, then nothing for a while, then the reply
    # kimi: an approval box of its own (no input box in its registry data, as kimi's)
    "approval": (("--approval",), {"input_pattern": "", "dialog_pattern": r"^╭─ approval ─.*\n((?:│.*\n?)+)"}),
    "loading": (("--loading", "4"), {}),  # its first draw takes 4 s, the screen changing meanwhile
    "claude-like": (("--notice", "1.5", "--notice-drops", "input", "--ink-paste", "--multiline-input",
                     "--cancel-restores"), {}),  # all of Claude Code's at once (the CPU-load test)
}

#: The stand-in's input box: the rows between the two rules, after "> " (registry data).
INPUT_PATTERN = r"(?m)^─{10,}\n> ?(.*(?:\n(?!─{10,}$).*)*)\n─{10,}$"


def settings(name: str, log: Path | None = None, **over: Any) -> Passthrough:
    flags, extra = PROFILES[name]
    argv = (sys.executable, str(STANDIN), *flags, *(("--log", str(log)) if log else ()))
    base: dict[str, Any] = dict(
        idle_seconds=0.4, clear_input="\x15", cancel_keys=(("\x1b", 0.0),),
        ready_pattern=r"\? for shortcuts", busy_pattern=r"esc to interrupt",
        chrome_pattern=r"\? for shortcuts|esc to interrupt|^> ?$", ready_timeout=20.0, cell_timeout=60.0,
        input_pattern=INPUT_PATTERN,
    )
    return Passthrough(argv, **{**base, **extra, **over})


def config_entry(name: str, log: Path, **over: Any) -> dict[str, Any]:
    """``agents.NAME`` of a config file for this stand-in."""
    s = settings(name, log, **over)
    return {"title": f"Stand-in {name}", "command": [sys.executable, "-c", "pass"], "passthrough": {
        "command": list(s.command), "idle_seconds": s.idle_seconds, "clear_input": s.clear_input,
        "cancel_keys": [list(k) for k in s.cancel_keys], "ready_pattern": s.ready_pattern,
        "busy_pattern": s.busy_pattern, "chrome_pattern": s.chrome_pattern, "ready_timeout": s.ready_timeout,
        "cell_timeout": s.cell_timeout, "input_pattern": s.input_pattern, "input_placeholder": s.input_placeholder,
        "startup_pattern": s.startup_pattern, "dialog_pattern": s.dialog_pattern, **({"mcp_args": list(s.mcp_args)} if s.mcp_args else {})}}


def events(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def prompts(log: Path) -> list[str]:
    return [e["text"] for e in events(log) if e["event"] == "prompt"]


async def wait_event(log: Path, predicate: Any, timeout: float = 20.0) -> None:
    """Until an event of the stand-in's log satisfies ``predicate`` (polled: a file has no events)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not any(predicate(e) for e in events(log)):
        assert loop.time() < end, f"no such event in {events(log)[-5:]}"
        await asyncio.sleep(0.05)
