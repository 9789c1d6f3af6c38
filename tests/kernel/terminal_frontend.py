"""The frontend side of a passthrough terminal widget, spoken over jupyter_client.

What JupyterLab's widget manager and ``static/terminal.js`` do with the
widget's comm, minus the drawing: follow the comm_open and state updates,
collect output (the text of live ``data`` messages once this view's
``replay`` has arrived, as the browser code does), and send keystrokes, resizes and a view
greeting back on the shell channel.
"""

from __future__ import annotations

import asyncio
import queue
import time
from typing import Any

from acp_kernel.passthrough.pty_input import plain_text

WIDGET_ID = "acp_kernel.TerminalWidget"


class TerminalFrontend:
    def __init__(self, kc: Any, *, ack: bool = True) -> None:
        self.kc = kc
        self.ack = ack  # acknowledge drawn output as the browser does (every 256 KiB)
        self.drawn = self.acked = 0
        self.arrivals: list[tuple[float, int]] = []  # (monotonic time, bytes) of each live message
        self.comm_id: str | None = None
        self.state: dict[str, Any] = {}
        self.raw = bytearray()  # everything shown, for this view
        self.live = bytearray()  # every ``data`` message, whatever the view
        self.messages = 0
        self.view = "v1"
        self.replayed = False
        self.binary_messages = 0  # comm messages with buffers (a kernel gateway's relay cannot carry them)
        self.assets: dict[str, Any] | None = None  # xterm.js, once asked for

    # -- kernel -> frontend ---------------------------------------------------------

    async def feed(self, msg: dict[str, Any]) -> None:
        """Give every iopub comm message here (``KernelHarness.execute(on_output=...)``)."""
        content = msg["content"]
        if msg["msg_type"] == "comm_open":
            state = content.get("data", {}).get("state", {})
            if state.get("_anywidget_id") == WIDGET_ID:
                self.comm_id = content["comm_id"]
                self.state = dict(state)
            return
        if msg["msg_type"] != "comm_msg" or content.get("comm_id") != self.comm_id:
            return
        data = content.get("data", {})
        if data.get("method") == "update":
            self.state.update(data.get("state", {}))
        elif data.get("method") == "custom":
            body = data.get("content", {})
            self.binary_messages += bool(msg.get("buffers"))
            if body.get("type") == "data":
                text = body.get("text", "").encode("utf-8")
                self.messages += 1
                self.live += text
                self.arrivals.append((time.monotonic(), len(text)))
                if self.replayed:
                    self.raw += text
                    self.drawn += int(body.get("n", 0))
                    if self.ack and self.drawn - self.acked >= 256 * 1024:
                        self.acked = self.drawn
                        self.send({"type": "ack", "view": self.view, "drawn": self.drawn})
            elif body.get("type") == "replay" and body.get("view") == self.view:
                self.raw = bytearray(body.get("text", "").encode("utf-8"))
                self.replayed = True
            elif body.get("type") == "assets" and body.get("view") == self.view:
                self.assets = body

    async def run_until_shown(self, harness: Any, code: str, needle: str, timeout: float = 15.0) -> asyncio.Task:
        """Start running ``code`` (a task with its result) and return once the
        terminal shows ``needle`` while it runs."""
        seen = asyncio.Event()

        async def on_output(msg: dict[str, Any]) -> None:
            await self.feed(msg)
            if needle in self.text():
                seen.set()

        task = asyncio.ensure_future(harness.execute(code, on_output=on_output))
        await asyncio.wait_for(seen.wait(), timeout)
        return task

    def text(self) -> str:
        return plain_text(bytes(self.live).decode("utf-8", "replace"))

    def view_text(self) -> str:
        return plain_text(bytes(self.raw).decode("utf-8", "replace"))

    async def pump_until(self, predicate, timeout: float = 15.0) -> None:
        """Read iopub (outside any cell) until ``predicate()`` holds."""
        deadline = time.monotonic() + timeout
        while not predicate():
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"terminal never showed what was expected; it shows:\n{self.text()[-2000:]}")
            try:
                msg = await self.kc.get_iopub_msg(timeout=left)
            except (asyncio.TimeoutError, queue.Empty):
                continue
            await self.feed(msg)

    # -- frontend -> kernel ---------------------------------------------------------

    def send(self, content: dict[str, Any]) -> None:
        assert self.comm_id, "no terminal widget was opened"
        msg = self.kc.session.msg("comm_msg", {"comm_id": self.comm_id,
                                               "data": {"method": "custom", "content": content}})
        self.kc.shell_channel.send(msg)

    def hello(self, rows: int, cols: int) -> None:
        self.send({"type": "hello", "view": self.view, "rows": rows, "cols": cols})

    def ask_assets(self) -> None:
        self.send({"type": "assets", "view": self.view})

    def type(self, keys: str) -> None:
        self.send({"type": "input", "data": keys})

    def type_counted(self, seq: int, keys: str) -> None:
        """Keys as terminal.js sends them: counted per view (the kernel writes them in that order)."""
        self.send({"type": "input", "view": self.view, "seq": seq, "data": keys})
