"""A test bridge, imported inside a real python3 kernel: allows or denies, and records
what happened as JSON lines in a file (the test reads them while the kernel is busy
running the agent's code, when no cell could answer)."""

from __future__ import annotations

import json

from acp_kernel.notebook_mcp import offer, withdraw

BRIDGES: dict[str, "RecordingBridge"] = {}


class RecordingView:
    def __init__(self, bridge: "RecordingBridge") -> None:
        self.bridge = bridge

    def write(self, name: str, text: str) -> None:
        self.bridge.record("write", name=name, text=text)

    def done(self, ok: bool, summary: str) -> None:
        self.bridge.record("done", ok=ok, summary=summary)


class RecordingBridge:
    def __init__(self, events: str, tools=("execute", "variables", "cells"), allow: bool = True,
                 notebook: str | None = None) -> None:
        self.events, self.allow, self.notebook = events, allow, notebook
        self.tools = frozenset(tools)

    def record(self, kind: str, **data) -> None:
        with open(self.events, "a", encoding="utf-8") as f:
            f.write(json.dumps({"kind": kind, **data}) + "\n")

    def namespace(self) -> dict:
        from IPython import get_ipython

        return get_ipython().user_ns

    def notebook_path(self) -> str | None:
        return self.notebook

    def history(self) -> list[str]:
        return ["x = 'from history'", "print(x)"]

    async def authorize(self, code: str) -> tuple[bool, str]:
        self.record("authorize", code=code)
        return (True, "") if self.allow else (False, "the user chose Reject (test bridge)")

    def started(self, code: str) -> RecordingView:
        self.record("started", code=code)
        return RecordingView(self)

    def interrupted(self) -> None:
        self.record("interrupted")


def start(events: str, **kwargs) -> str:
    """Offer a new bridge; its entry as JSON (what the test prints and reads)."""
    bridge = RecordingBridge(events, **kwargs)
    entry = offer(bridge)
    token = entry["args"][-1]
    BRIDGES[token] = bridge
    return json.dumps(entry)


def stop(token: str) -> None:
    withdraw(token)
    BRIDGES.pop(token, None)
