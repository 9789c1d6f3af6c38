"""A passthrough terminal in the notebook: xterm.js in an anywidget, over the kernel's comm.

:class:`TerminalPanel` is a terminado client of one PTY. Output goes to the
frontend as binary comm messages, at most one per ``FRAME`` (the first chunk
after a quiet spell goes at once, so a keystroke's echo is not held back).
Keystrokes, resizes and a view's greeting come back as custom messages. Every
view (the same widget can be shown in several cells, and a page reload makes
new ones) asks for the history on start and gets it addressed to itself; the
history is the last ``HISTORY_CHARS`` of output. No port and no proxy: only
the kernel's own channels carry bytes in and out.

xterm.js is bundled at build time (``hatch_build.py``) into ``static/vendor``
and sent to the browser as a binary trait; the browser imports it from a
blob URL once per page. Without it the widget shows plain text and says why.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

from ..compat import add_pty_client
from ..passthrough.manager import PassthroughTerminal
from ..passthrough.pty_input import Flow
from .sink import widget_bundle

STATIC = Path(__file__).parent / "static"
VENDOR = STATIC / "vendor"
#: Output kept for views that start later (a second display, a page reload).
HISTORY_CHARS = 2 * 1024 * 1024
#: Shortest gap between two output messages under a stream (about 60 per second at most).
FRAME = 1 / 60
#: Small output (an echo, a spinner frame) may skip the FRAME wait this many times in a row,
#: so typing fast is not held back; a stream is still paced.
QUICK_SENDS = 4
QUICK_BYTES = 1024
DEFAULT_ROWS = 24

_widget_class: Any = None


def _vendor(name: str) -> bytes:
    try:
        return (VENDOR / name).read_bytes()
    except OSError:
        return b""


def widget_class() -> Any:
    global _widget_class
    if _widget_class is None:
        import traitlets as t

        from .widgetbase import base_class

        class TerminalWidget(base_class()):  # type: ignore[misc]
            """Synced state of a passthrough terminal (see static/terminal.js); assets as class traits."""

            _esm = t.Unicode((STATIC / "terminal.js").read_text(encoding="utf-8")).tag(sync=True)
            _css = t.Unicode(
                _vendor("xterm.css").decode() + (STATIC / "terminal.css").read_text(encoding="utf-8")
            ).tag(sync=True)
            _anywidget_id = t.Unicode("acp_kernel.TerminalWidget").tag(sync=True)
            _xterm_js = t.Bytes(_vendor("xterm.mjs")).tag(sync=True)
            _fit_js = t.Bytes(_vendor("addon-fit.mjs")).tag(sync=True)
            _xterm_version = t.Unicode(_vendor("VERSION").decode().strip()).tag(sync=True)
            title = t.Unicode("").tag(sync=True)
            status = t.Unicode("starting").tag(sync=True)
            rows = t.Int(DEFAULT_ROWS).tag(sync=True)

        _widget_class = TerminalWidget
    return _widget_class


class TerminalPanel:
    """Shows one PTY in the notebook and types what its views send back."""

    def __init__(self, terminal: PassthroughTerminal, *, title: str = "", rows: int = DEFAULT_ROWS) -> None:
        self.terminal = terminal
        self.size: tuple[int | None, int | None] = (None, None)
        self._views: dict[str, tuple[int, int]] = {}
        self._history: list[str] = []
        self._history_len = 0
        self._pending: list[str] = []
        self._pending_len = 0
        self._last_send = 0.0
        self._quick = 0
        self._flush_handle: asyncio.TimerHandle | None = None
        self.flow = Flow()
        self._paused = False
        self._flow_check: asyncio.TimerHandle | None = None
        self._loop = asyncio.get_running_loop()
        self._thread = threading.get_ident()
        self.widget = widget_class()(title=title or terminal.title, status="running", rows=rows)
        self.widget.on_msg(self._on_msg)
        add_pty_client(terminal.pty, self)
        terminal.exited.add_done_callback(lambda _: self._on_exit())

    # -- terminado client ----------------------------------------------------------

    def on_pty_read(self, text: str) -> None:
        self._keep(text)
        self._pending.append(text)
        self._pending_len += len(text)
        if self._flush_handle is not None:
            return
        wait = self._last_send + FRAME - self._loop.time()
        if wait <= 0:
            self._flush()
        elif self._pending_len <= QUICK_BYTES and self._quick < QUICK_SENDS:
            self._quick += 1
            self._flush()
        else:
            self._flush_handle = self._loop.call_later(wait, self._flush)

    def on_pty_died(self) -> None:
        self._flush()

    def _keep(self, text: str) -> None:
        self._history.append(text)
        self._history_len += len(text)
        if self._history_len > 2 * HISTORY_CHARS:
            joined = "".join(self._history)[-HISTORY_CHARS:]
            self._history, self._history_len = [joined], len(joined)

    def history(self) -> str:
        return "".join(self._history)[-HISTORY_CHARS:]

    def _flush(self) -> None:
        self._flush_handle = None
        if not self._pending:
            return
        data = "".join(self._pending).encode("utf-8", "replace")
        self._pending.clear()
        self._pending_len = 0
        now = self._loop.time()
        if now - self._last_send >= FRAME:
            self._quick = 0  # a paced send: small output may go at once again
        self._last_send = now
        self.widget.send({"type": "data"}, buffers=[data])
        self.flow.on_send(len(data))
        if not self._paused and self.flow.should_pause(now):
            self._paused = True
            self.terminal.pause_output()
            self._schedule_flow_check()

    # -- flow control (see pty_input.Flow) ---------------------------------------------

    def _schedule_flow_check(self) -> None:
        """While paused, look again after ``stale``: a view that vanished must not stall the program."""
        if self._flow_check is None:
            self._flow_check = self._loop.call_later(self.flow.stale, self._on_flow_timer)

    def _on_flow_timer(self) -> None:
        self._flow_check = None
        self._maybe_resume()
        if self._paused:
            self._schedule_flow_check()

    def _maybe_resume(self) -> None:
        if self._paused and self.flow.may_resume(self._loop.time()):
            self._paused = False
            self.terminal.resume_output()

    def _on_exit(self) -> None:
        self._flush()
        self.widget.status = self.terminal.describe_exit()

    # -- from the views ----------------------------------------------------------------

    def _on_msg(self, _widget: Any, content: Any, buffers: Any) -> None:
        # JupyterLab may deliver widget messages on a subshell thread.
        if threading.get_ident() != self._thread:
            self._loop.call_soon_threadsafe(self._handle, content)
        else:
            self._handle(content)

    def _handle(self, content: Any) -> None:
        if not isinstance(content, dict):
            return
        kind, view = content.get("type"), str(content.get("view") or "")
        if kind == "input" and isinstance(content.get("data"), str):
            self.terminal.write(content["data"])
        elif kind == "interrupt":
            self.terminal.interrupt()
        elif kind in ("hello", "resize") and view:
            rows, cols = content.get("rows"), content.get("cols")
            if isinstance(rows, int) and isinstance(cols, int) and 2 <= rows <= 500 and 2 <= cols <= 1000:
                self._views[view] = (rows, cols)
                self._resize()
            if kind == "hello":
                self._flush()
                self.flow.hello(view, self._loop.time())
                self.widget.send({"type": "replay", "view": view},
                                 buffers=[self.history().encode("utf-8", "replace")])
        elif kind == "ack" and view and isinstance(content.get("drawn"), int):
            self.flow.ack(view, content["drawn"], self._loop.time())
            self._maybe_resume()
        elif kind == "bye":
            self._views.pop(view, None)
            self.flow.bye(view)
            self._resize()
            self._maybe_resume()

    def _resize(self) -> None:
        """The PTY takes the smallest view's size, as terminado does for its clients."""
        if not self._views:
            return
        rows = min(r for r, _ in self._views.values())
        cols = min(c for _, c in self._views.values())
        self.size = (rows, cols)
        self.terminal.resize(rows, cols)

    # -- display ---------------------------------------------------------------------------

    def bundle(self) -> dict[str, Any]:
        """A mimebundle: the widget view, and text for readers without widgets."""
        return widget_bundle(self.widget, f"[terminal: {self.widget.title} ({self.widget.status})]")
