"""One tool call in the cell: a compact, expandable row.

:class:`ToolCallRow` binds a live :class:`~acp_kernel.turn.ToolCall` (and the
terminals its content names) to an anywidget (``static/toolcall.js``). Small
state goes in traitlets, synced at the view's coalescing rate; terminal
output goes as appended deltas in custom messages (never the whole buffer per
chunk), and its last ``TERM_KEEP`` characters land in the ``terminals`` trait
at the end, so a notebook saved with widget state shows the final output.
The display's mimebundle also carries markdown and plain text, updated to
the final state, for readers without widgets. Without widgets the row is a
markdown display updated in place.
"""

from __future__ import annotations

import json
import shlex
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import service_events as se
from ..turn import ToolCall
from .diff import diff_from_content
from .sanitize import truncate_head, truncate_tail
from .sink import DisplaySink
from .transcript import (
    STATUS,
    TerminalSnapshot,
    command_of,
    kind_icon,
    location_text,
    tool_call_markdown,
    tool_call_plain,
)

TERM_KEEP = 64 * 1024  # characters of terminal output kept in the final widget state
TEXT_KEEP = 64 * 1024
STATIC = Path(__file__).parent / "static"

_widget_class: Any = None


def widget_class() -> Any:
    """The anywidget class, defined on first use (anywidget/ipywidgets import lazily)."""
    global _widget_class
    if _widget_class is None:
        import anywidget
        import traitlets as t

        class ToolCallWidget(anywidget.AnyWidget):
            """Synced state of one tool call row (see static/toolcall.js).

            ``_esm``/``_css`` are declared as traits here: given as paths,
            anywidget would build a new class for every instance (add_traits),
            which made a 2,000-tool-call turn spend most of its time there.
            """

            _esm = t.Unicode((STATIC / "toolcall.js").read_text(encoding="utf-8")).tag(sync=True)
            _css = t.Unicode((STATIC / "toolcall.css").read_text(encoding="utf-8")).tag(sync=True)
            _anywidget_id = t.Unicode("acp_kernel.view.toolcall.ToolCallWidget").tag(sync=True)

            def add_traits(self, **traits: Any) -> None:
                # anywidget re-adds _esm, _css and _anywidget_id on every
                # instance, and traitlets makes a new class for each call:
                # they are class traits here, so only add what is missing.
                missing = {k: v for k, v in traits.items() if not self.has_trait(k)}
                if missing:
                    super().add_traits(**missing)
            title = t.Unicode("").tag(sync=True)
            kind = t.Unicode("other").tag(sync=True)
            icon = t.Unicode("").tag(sync=True)
            status = t.Unicode("pending").tag(sync=True)
            status_label = t.Unicode("pending").tag(sync=True)
            detail = t.Unicode("").tag(sync=True)
            text = t.Unicode("").tag(sync=True)
            diffs = t.List().tag(sync=True)
            locations = t.List().tag(sync=True)
            terminals = t.List().tag(sync=True)

        _widget_class = ToolCallWidget
    return _widget_class


_layout: Any = None


def shared_layout() -> Any:
    """One Layout model for every row: each widget would otherwise open its own."""
    global _layout
    if _layout is None:
        import ipywidgets

        _layout = ipywidgets.Layout()
    return _layout


class _TermFeed:
    """Live output of one terminal for one row: deltas to send, a bounded tail kept."""

    def __init__(self, started: se.TerminalStarted) -> None:
        self.started = started
        self.pending: list[str] = []
        self.kept: list[str] = []
        self.kept_len = 0
        self.exit = ""
        self.unsubscribe: Callable[[], None] | None = None
        self.final_output: str | None = None
        self.truncated = False

    def on_output(self, text: str) -> None:
        self.pending.append(text)
        self.kept.append(text)
        self.kept_len += len(text)
        if self.kept_len > 2 * TERM_KEEP:
            joined = "".join(self.kept)[-TERM_KEEP:]
            self.kept = [joined]
            self.kept_len = len(joined)
            self.truncated = True

    def text(self) -> str:
        return "".join(self.kept)[-TERM_KEEP:]

    def take_pending(self) -> str:
        data = "".join(self.pending)
        self.pending.clear()
        return data

    def snapshot(self) -> TerminalSnapshot:
        term = self.started.terminal
        if self.final_output is not None:
            output, truncated = self.final_output, self.truncated
        else:
            output, truncated = self.text(), self.truncated
        status = getattr(term, "exit_status", None)
        exit_text = self.exit or (str(status) if status is not None else "")
        return TerminalSnapshot(
            self.started.terminal_id, shlex.join(self.started.argv), output, truncated, exit_text, self.started.note
        )

    def finish(self) -> None:
        """Take the terminal's own final snapshot (complete, bounded) and stop listening."""
        try:
            output, truncated = self.started.terminal.output()
        except Exception:  # noqa: BLE001 - a terminal that cannot answer: keep what we saw
            output, truncated = self.text(), self.truncated
        kept, cut = truncate_head(output, TERM_KEEP)
        self.final_output = kept
        self.truncated = truncated or cut or self.truncated
        if self.unsubscribe is not None:
            self.unsubscribe()
            self.unsubscribe = None


class ToolCallRow:
    def __init__(self, call: ToolCall, *, widgets: bool, on_dirty: Callable[[], None], call_soon: Callable[..., None]) -> None:
        self.call = call
        self.display_id = f"acp-tool-{uuid.uuid4().hex[:12]}"
        self.feeds: dict[str, _TermFeed] = {}
        self._on_dirty = on_dirty
        self._call_soon = call_soon
        self._content_seen: Any = None
        self._sent_md = ""
        self._finished = False
        self.widget: Any = None
        if widgets:
            self.widget = widget_class()(layout=shared_layout())
            self.widget.on_msg(self._on_widget_msg)
        self._push_state()

    # -- display ------------------------------------------------------------

    def markdown(self) -> str:
        return tool_call_markdown(self.call, {tid: f.snapshot() for tid, f in self.feeds.items()})

    def plain(self) -> str:
        return tool_call_plain(self.call)

    def bundle(self) -> dict[str, Any]:
        md = self.markdown()
        self._sent_md = md
        data: dict[str, Any] = {"text/markdown": md, "text/plain": self.plain()}
        if self.widget is not None:
            data["application/vnd.jupyter.widget-view+json"] = {
                "model_id": self.widget.model_id,
                "version_major": 2,
                "version_minor": 1,
            }
        return data

    # -- terminals ----------------------------------------------------------

    def attach(self, started: se.TerminalStarted) -> None:
        """Show a terminal's output live in this row (replaying what it kept)."""
        if started.terminal_id in self.feeds:
            return
        feed = _TermFeed(started)
        self.feeds[started.terminal_id] = feed

        def on_output(text: str) -> None:
            feed.on_output(text)
            self._on_dirty()

        def on_exit(status: Any) -> None:
            feed.exit = str(status)
            self._on_dirty()

        feed.unsubscribe = started.terminal.subscribe(on_output, on_exit)
        self._push_state()
        self._on_dirty()

    def terminal_exited(self, ev: se.TerminalExited) -> None:
        feed = self.feeds.get(ev.terminal_id)
        if feed is not None:
            how = "" if ev.how == "exited" else f" ({ev.how})"
            feed.exit = f"{ev.exit_status}{how}"
            self._on_dirty()

    def _on_widget_msg(self, _widget: Any, content: Any, _buffers: Any) -> None:
        # May run on a comm thread: hand over to the loop.
        if isinstance(content, dict) and content.get("type") == "hello":
            self._call_soon(self._replay)

    def _replay(self) -> None:
        if self.widget is None:
            return
        for tid, feed in self.feeds.items():
            if feed.final_output is None:
                self.widget.send({"type": "reset", "id": tid, "data": feed.text()})
                feed.pending.clear()

    # -- syncing ------------------------------------------------------------

    def _terminals_state(self) -> list[dict[str, Any]]:
        out = []
        for tid, feed in self.feeds.items():
            snap = feed.snapshot()
            live = feed.final_output is None
            out.append(
                {
                    "id": tid,
                    "command": snap.command,
                    "note": snap.note,
                    # Live output travels as messages; the trait holds it only at the end.
                    "output": "" if live else snap.output,
                    "truncated": snap.truncated,
                    "exit": snap.exit,
                    "live": live,
                }
            )
        return out

    def _push_state(self) -> None:
        w = self.widget
        if w is None:
            return
        call = self.call
        glyph, label = STATUS.get(call.status, ("?", call.status))
        with w.hold_sync():
            w.title = call.title or f"tool call {call.id}"
            w.kind = call.kind or "other"
            w.icon = kind_icon(call.kind)
            w.status = call.status
            w.status_label = f"{glyph} {label}"
            if call.content is not self._content_seen:
                self._content_seen = call.content
                w.text = truncate_tail(call.text, TEXT_KEEP)[0]
                w.diffs = [diff_from_content(d).to_json() for d in call.diffs]
            w.detail = self._detail()
            w.locations = [location_text(loc) for loc in call.locations]
            w.terminals = self._terminals_state()

    def _detail(self) -> str:
        raw = self.call.raw_input
        if raw is None or self.call.terminal_ids:
            return ""
        cmd = command_of(raw)
        if cmd:
            return "$ " + truncate_tail(cmd, 2000)[0]
        try:
            text = json.dumps(raw, indent=1, default=repr)
        except (TypeError, ValueError):
            text = repr(raw)
        return truncate_tail(text, 2000)[0]

    def sync(self, sink: DisplaySink) -> None:
        """Push changed state (rate-limited by the caller) and terminal deltas."""
        for tid, feed in self.feeds.items():
            data = feed.take_pending()
            if data and self.widget is not None:
                self.widget.send({"type": "term", "id": tid, "data": data})
            if feed.exit and feed.final_output is None:
                feed.finish()  # exited: its final output goes into the trait now
        if self.widget is not None:
            self._push_state()
            if self.call.final and not self._running_terminals():
                self._update_fallback(sink)
        else:
            self._update_fallback(sink)

    def _running_terminals(self) -> bool:
        return any(f.final_output is None for f in self.feeds.values())

    def _update_fallback(self, sink: DisplaySink) -> None:
        md = self.markdown()
        if md != self._sent_md:
            sink.update(self.bundle(), display_id=self.display_id)

    def finish(self, sink: DisplaySink) -> None:
        """Final state into traitlets and the fallback; stop listening. Idempotent."""
        if self._finished:
            return
        self._finished = True
        for feed in self.feeds.values():
            feed.finish()
            feed.pending.clear()
        self._push_state()
        self._update_fallback(sink)
