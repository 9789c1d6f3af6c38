"""A passthrough terminal in the notebook: xterm.js in an anywidget, over the kernel's comm.

(Here, not in ``view``: it is the widget of a :class:`~.manager.PassthroughTerminal`, and
the view layer imports nothing from passthrough; its assets stay in ``view/static``.)

:class:`TerminalPanel` is a terminado client of one PTY. Output goes to the
frontend as custom comm messages carrying the text as a JSON string (text
frames only: jupyter_server's gateway relay decodes every frame as UTF-8, so a
binary buffer would break the whole notebook connection through a kernel
gateway), at most one per ``FRAME`` (the first chunk after a quiet spell goes
at once, so a keystroke's echo is not held back). Keystrokes, resizes and a
view's greeting come back as custom messages. Every view asks for the history
on start and gets it addressed to itself; the history is the last
``HISTORY_CHARS`` of output. No port and no proxy: only the kernel's own
channels carry bytes in and out.

One live view: :meth:`TerminalPanel.show` displays the terminal with a
display id, and turns the output it showed before into text (that cell's own
exchange, or the screen as it was), so the newest cell is the one to type in
and every earlier cell keeps what it asked and got.

xterm.js is bundled at build time (``hatch_build.py``) into ``static/vendor``
and sent to a page on request over a custom message, once per page and
version: never as synced state, which a notebook would save with every
terminal. The final screen is a small synced trait, shown as text when there
is no kernel (or no xterm.js) to draw it.
"""

from __future__ import annotations

import asyncio
import functools
import threading
import uuid
from pathlib import Path
from typing import Any

from ..compat import add_pty_client
from ..view.exchange import Exchange, screen_bundle
from ..view.sink import WIDGET_MIME, CellContext, DisplaySink, widget_bundle
from ..view.widgetbase import base_class
from .manager import PassthroughTerminal
from .pty_input import Flow, InOrder, plain_text

#: The view's assets (``terminal.js``, ``terminal.css``; xterm.js in ``vendor``).
STATIC = Path(__file__).resolve().parent.parent / "view" / "static"
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
#: How long keys that came ahead of a view's earlier ones wait for them, in seconds.
TYPED_GAP_WAIT = 0.5
#: Lines of output kept as the screen's text when the terminal has no emulated screen.
SCREEN_LINES = 60

_widget_class: Any = None


def _vendor(name: str) -> str:
    try:
        return (VENDOR / name).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return ""


@functools.cache
def xterm_assets() -> dict[str, str]:
    """xterm.js and its fit addon as text, for a page that asks (read once per kernel)."""
    return {"version": _vendor("VERSION").strip(), "xterm": _vendor("xterm.mjs"), "fit": _vendor("addon-fit.mjs")}


def widget_class() -> Any:
    global _widget_class
    if _widget_class is None:
        import traitlets as t  # lazy: start-up time (the widget libraries load on first show)

        class TerminalWidget(base_class()):  # type: ignore[misc]
            """Synced state of a passthrough terminal (see static/terminal.js); assets as class traits.

            Everything here is saved with a notebook: xterm.js itself is not (it
            comes from the kernel on request), the final screen is, as text."""

            _esm = t.Unicode((STATIC / "terminal.js").read_text(encoding="utf-8")).tag(sync=True)
            _css = t.Unicode(
                _vendor("xterm.css") + (STATIC / "terminal.css").read_text(encoding="utf-8")
            ).tag(sync=True)
            _anywidget_id = t.Unicode("acp_kernel.TerminalWidget").tag(sync=True)
            _xterm_version = t.Unicode(_vendor("VERSION").strip()).tag(sync=True)
            title = t.Unicode("").tag(sync=True)
            status = t.Unicode("starting").tag(sync=True)
            rows = t.Int(DEFAULT_ROWS).tag(sync=True)
            screen = t.Unicode("").tag(sync=True)

        _widget_class = TerminalWidget
    return _widget_class


class _Shown:
    """One output showing the live terminal: its display id, and the cell's exchange if it typed one."""

    def __init__(self, display_id: str, exchange: Exchange | None) -> None:
        self.display_id = display_id
        self.exchange = exchange


class TerminalPanel:
    """Shows one PTY in the notebook and types what its views send back."""

    def __init__(self, terminal: PassthroughTerminal, *, title: str = "", rows: int | None = None) -> None:
        self.terminal = terminal
        if rows is None:  # the views show as many rows as the program was started with
            try:
                rows = int(terminal.pty.ptyproc.getwinsize()[0])
            except (AttributeError, OSError, TypeError, ValueError):
                rows = DEFAULT_ROWS
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
        self._typed = InOrder()  # keys from the views, in the order each view typed them
        self._typed_wait: dict[str, asyncio.TimerHandle] = {}
        self._paused = False
        self._flow_check: asyncio.TimerHandle | None = None
        self._loop = asyncio.get_running_loop()
        self._thread = threading.get_ident()
        self._stopping = False
        self._shown: _Shown | None = None
        self._sink: DisplaySink | None = None
        # Widget messages go out in the context of the cell that last showed or
        # stopped the terminal: a client that files comm messages by cell
        # (nbclient) then saves the widget's state as it ended.
        self._cell = CellContext()
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

    def screen_text(self) -> str:
        """What the terminal shows now, as text: the passthrough layer's emulated
        screen where it has one, else the last lines of output."""
        screen = getattr(self.terminal, "screen_text", None)
        if callable(screen):
            try:
                return str(screen()).rstrip()
            except Exception:  # noqa: BLE001 - a screen that fails to render falls back to the output
                pass
        tail = plain_text("".join(self._history[-200:])[-256 * 1024:])
        return "\n".join(tail.rstrip().split("\n")[-SCREEN_LINES:])

    def _flush(self) -> None:
        self._flush_handle = None
        if not self._pending:
            return
        data = "".join(self._pending)
        self._pending.clear()
        self._pending_len = 0
        now = self._loop.time()
        if now - self._last_send >= FRAME:
            self._quick = 0  # a paced send: small output may go at once again
        self._last_send = now
        # Text, not a binary buffer: a kernel gateway's relay carries text frames only.
        self._cell.run(self.widget.send, {"type": "data", "text": data, "n": len(data)})
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
        self._cell.run(self._ended)

    def _ended(self) -> None:
        self._flush()
        self.widget.screen = self.screen_text()
        self.widget.status = "stopped" if self._stopping else self.terminal.describe_exit()

    async def stop(self) -> None:
        """End the program on request (``%passthrough stop``): its views say "stopped", not an exit status."""
        if self.terminal.alive:
            self._stopping = True
            self._cell = CellContext()
        await self.terminal.close()

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
            seq = content.get("seq")
            if view and type(seq) is int:
                self._write_typed(self._typed.take(view, seq, content["data"]))
                self._watch_gap(view)
            else:  # a view without counts (an older page)
                self.terminal.write(content["data"])
        elif kind == "interrupt":
            self.terminal.interrupt()
        elif kind == "assets" and view:
            self.widget.send({"type": "assets", "view": view, **xterm_assets()})
        elif kind in ("hello", "resize") and view:
            rows, cols = content.get("rows"), content.get("cols")
            if isinstance(rows, int) and isinstance(cols, int) and 2 <= rows <= 500 and 2 <= cols <= 1000:
                self._views[view] = (rows, cols)
                self._resize()
            if kind == "hello":
                self._flush()
                self.flow.hello(view, self._loop.time())
                self.widget.send({"type": "replay", "view": view, "text": self.history()})
        elif kind == "ack" and view and isinstance(content.get("drawn"), int):
            self.flow.ack(view, content["drawn"], self._loop.time())
            self._maybe_resume()
        elif kind == "bye":
            self._typed_gap(view, forget=True)
            self._views.pop(view, None)
            self.flow.bye(view)
            self._resize()
            self._maybe_resume()

    def _write_typed(self, chunks: list[str]) -> None:
        for chunk in chunks:
            self.terminal.write(chunk)

    def _watch_gap(self, view: str) -> None:
        """A timer while the view holds keys, from the moment a gap opens; none once it fills."""
        handle = self._typed_wait.get(view)
        if self._typed.holding(view):
            if handle is None:
                self._typed_wait[view] = self._loop.call_later(TYPED_GAP_WAIT, self._typed_gap, view)
        elif handle is not None:
            handle.cancel()
            del self._typed_wait[view]

    def _typed_gap(self, view: str, forget: bool = False) -> None:
        """A view's held keys go out, in order, when what they wait for does not come."""
        handle = self._typed_wait.pop(view, None)
        if handle is not None:
            handle.cancel()
        self._write_typed(self._typed.forget(view) if forget else self._typed.give_up(view))

    def _resize(self) -> None:
        """The PTY takes the smallest view's size, as terminado does for its clients."""
        if not self._views:
            return
        rows = min(r for r, _ in self._views.values())
        cols = min(c for _, c in self._views.values())
        self.size = (rows, cols)
        self.terminal.resize(rows, cols)

    # -- display ---------------------------------------------------------------------------

    def _text(self) -> str:
        return f"[terminal: {self.widget.title} ({self.widget.status})]"

    def bundle(self) -> dict[str, Any]:
        """A mimebundle: the widget view, and text for readers without widgets.
        Prefer :meth:`show`, whose output turns into text when a later cell shows the terminal."""
        return widget_bundle(self.widget, self._text())

    def _live_bundle(self, shown: _Shown) -> dict[str, Any]:
        if shown.exchange is None:
            return widget_bundle(self.widget, self._text())
        return shown.exchange.bundle(extra={WIDGET_MIME: widget_bundle(self.widget, "")[WIDGET_MIME]})

    def show(self, sink: DisplaySink, prompt: str | None = None) -> Exchange | None:
        """Show the live terminal in this cell (with the exchange ``prompt`` starts,
        if any); the output that showed it before becomes text."""
        self._cell = CellContext()
        self._retire(sink)
        exchange = Exchange(self.terminal.name, prompt) if prompt is not None else None
        shown = _Shown(f"acp-pty-{uuid.uuid4().hex}", exchange)
        self._shown, self._sink = shown, sink
        sink.display(self._live_bundle(shown), display_id=shown.display_id)
        return exchange

    def finish(self, outcome: str, reply: str = "") -> None:
        """The reply of the exchange the newest cell started: its output keeps the
        live view, with the exchange as text for readers without widgets."""
        shown, sink = self._shown, self._sink
        if shown is None or shown.exchange is None or sink is None:
            return
        shown.exchange.reply, shown.exchange.outcome = reply, outcome
        self.widget.screen = self.screen_text()
        sink.update(self._live_bundle(shown), display_id=shown.display_id)

    def asking(self, question: str) -> None:
        """The CLI asks ``question`` in its own terminal ("" no more): the newest cell's
        exchange shows it, for readers who do not look at the terminal."""
        shown, sink = self._shown, self._sink
        if shown is None or shown.exchange is None or sink is None or shown.exchange.asking == question:
            return
        shown.exchange.asking = question
        sink.update(self._live_bundle(shown), display_id=shown.display_id)

    def _retire(self, sink: DisplaySink) -> None:
        """The output showing the live view becomes its exchange (or the screen it showed)."""
        shown = self._shown
        if shown is None:
            return
        self._shown = None
        if shown.exchange is not None:
            data = shown.exchange.bundle()
        else:
            data = screen_bundle(self.terminal.name, self.screen_text(), self.widget.status)
        sink.update(data, display_id=shown.display_id)
