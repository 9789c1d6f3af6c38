"""Tool calls in the cell: compact, expandable rows, many rows per widget.

A run of consecutive tool calls (no other output between them) is one
display holding one anywidget (:class:`ToolCallsWidget`, ``static/toolcall.js``),
so a turn with thousands of calls opens a handful of comms, not thousands.

Each row's state is a dict under its own key (``row:0``, ``row:1``, ...) in
the widget model, beside ``count``. Only changed rows are sent, as one partial
``update`` message per flush (the widget protocol applies partial state), so
the frontend's model always holds every row: notebooks saved by JupyterLab
or nbclient keep the final state, and a reloaded page gets it all from
``get_state``. Terminal output goes as appended deltas in custom messages
(never the whole buffer per chunk); its last ``TERM_KEEP`` characters land in
the row's state at the end. ``expanded`` (row key -> bool) is written by the
frontend only: a row opened or folded by hand stays so when the view is
rendered again.

The display's mimebundle also carries markdown and plain text of all its rows,
updated to the final state, for readers without widgets. Without widgets
every row is its own markdown display, updated in place.
"""

from __future__ import annotations

import json
import logging
import shlex
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ..services import events as se
from ..client.turn import ToolCall
from .diff import diff_from_content
from ..safe import Markdown
from .truncate import truncate_head, truncate_tail
from .sink import DisplaySink, widget_bundle
from .transcript import (
    STATUS,
    TerminalSnapshot,
    call_output,
    command_of,
    kind_icon,
    location_text,
    tool_call_header,
    tool_call_markdown,
    tool_call_plain,
)
from ..compat import send_partial_state
from .widgetbase import base_class

TERM_KEEP = 64 * 1024  # characters of terminal output kept in the final row state
#: The row's terminal id for command output the agent sent itself (no client terminal).
AGENT_OUTPUT = "agent-output"
TEXT_KEEP = 64 * 1024
#: Widget groups up to this many rows keep their text fallback current while they run.
LIVE_FALLBACK_ROWS = 50
DETAIL_LINE = 100  # a tool call's raw input up to this long is shown on one line
STATIC = Path(__file__).parent / "static"

log = logging.getLogger(__name__)

_widget_class: Any = None


def esm_source(name: str) -> str:
    """A widget's module: ``static/common.js`` (what toolcall.js and
    turn.js share) followed by ``static/<name>``, as one module."""
    return "".join((STATIC / f).read_text(encoding="utf-8") for f in ("common.js", name))


def row_key(index: int) -> str:
    """The model key of a group's ``index``-th row (never a trait name)."""
    return f"row:{index}"


def widget_class() -> Any:
    """The anywidget class, defined on first use (anywidget/ipywidgets import lazily)."""
    global _widget_class
    if _widget_class is None:
        _widget_class = _define_widget_class()
    return _widget_class


def widgets_loaded() -> bool:
    return _widget_class is not None


def prewarm() -> None:
    """Import the widget machinery now (idle time), not at the next first tool call."""
    try:
        widget_class()
    except Exception:  # a missing widget package shows up when it is needed
        log.debug("could not load the tool call widget", exc_info=True)


def _define_widget_class() -> Any:
    import traitlets as t


    class ToolCallsWidget(base_class()):  # type: ignore[misc]
        """Synced state of a run of tool call rows (see static/toolcall.js).

        Assets are class traits (see widgetbase). Rows are not traits: a
        trait is always sent whole, and a row list sent whole on every
        change is quadratic in the rows.
        """

        _esm = t.Unicode(esm_source("toolcall.js")).tag(sync=True)
        _css = t.Unicode((STATIC / "toolcall.css").read_text(encoding="utf-8")).tag(sync=True)
        _anywidget_id = t.Unicode("acp_kernel.view.toolcall.ToolCallsWidget").tag(sync=True)
        #: row key -> open (True) or folded (False), as the reader chose; set by the frontend
        expanded = t.Dict().tag(sync=True)

        def __init__(self, **kwargs: Any) -> None:
            self._row_states: dict[str, dict[str, Any]] = {}  # before super(): opening the comm reads it
            super().__init__(**kwargs)

        def rows(self) -> dict[str, dict[str, Any]]:
            """Every row's last sent state, by key (``row_key``)."""
            return dict(self._row_states)

        def get_state(self, key: Any = None, drop_defaults: bool = False) -> dict[str, Any]:
            # The whole state (comm_open, a reloaded page's request_state) includes the rows.
            state = super().get_state(key, drop_defaults)
            if key is None:
                state.update(self._row_states)
                state["count"] = len(self._row_states)
            return state

        def push_rows(self, changed: dict[str, dict[str, Any]]) -> None:
            """Send changed rows (and the row count) as one partial state update."""
            if not changed:
                return
            self._row_states.update(changed)
            state: dict[str, Any] = dict(changed)
            state["count"] = len(self._row_states)
            send_partial_state(self, state)

    return ToolCallsWidget


_layout: Any = None


def shared_layout() -> Any:
    """One Layout model for every widget: each would otherwise open its own comm."""
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


def _json_text(value: Any) -> str:
    """One line when it fits one (the C encoder: ``indent`` would take the
    slow pure-Python one for every row), indented otherwise."""
    try:
        text = json.dumps(value, ensure_ascii=False, default=repr)
        if len(text) > DETAIL_LINE:
            text = json.dumps(value, ensure_ascii=False, indent=1, default=repr)
    except (TypeError, ValueError):
        text = repr(value)
    return text


class ToolCallRow:
    """One tool call and the terminals it shows: its row state and its markdown."""

    def __init__(self, call: ToolCall, group: ToolCallGroup, index: int, on_dirty: Callable[[], None]) -> None:
        self.call = call
        self.group = group
        self.index = index  # place in its group
        self.key = row_key(index)
        self.feeds: dict[str, _TermFeed] = {}
        self._on_dirty = on_dirty
        self.version = 0  # bumped on every change the row hears of (see touch)
        self._content_seen: Any = None
        self._content_state: tuple[str, list[dict[str, Any]]] = ("", [])
        self._cache: dict[str, tuple[Any, Any]] = {}  # what -> (revision, value)
        self._agent_sent = 0  # characters of the agent-sent output streamed so far (dropped ones counted)

    @property
    def widget(self) -> Any:
        """The widget showing this row (its group's), or None without widgets."""
        return self.group.widget

    def touch(self) -> None:
        """The call or one of its terminals changed: cached renderings are stale; sync soon."""
        self.version += 1
        self._on_dirty()

    def revision(self) -> tuple[int, str]:
        """Changes when what the row shows may have: its version, and the
        status (the turn's end sets that without an event)."""
        return self.version, self.call.status

    def _cached(self, what: str, build: Callable[[], Any]) -> Any:
        rev = self.revision()
        hit = self._cache.get(what)
        if hit is not None and hit[0] == rev:
            return hit[1]
        value = build()
        self._cache[what] = (rev, value)
        return value

    def state(self) -> dict[str, Any]:
        """What the row shows, as the frontend reads it (raw text: the JS sets textContent only)."""
        return self._cached("state", self._build_state)

    def _build_state(self) -> dict[str, Any]:
        call = self.call
        glyph, label = STATUS.get(call.status, ("?", call.status))
        if call.content is not self._content_seen:
            self._content_seen = call.content
            text = truncate_tail(call.text, TEXT_KEEP)[0]
            self._content_state = (text, [diff_from_content(d).to_json() for d in call.diffs])
        text, diffs = self._content_state
        terminals = self._terminals_state()
        agent = self._agent_output_state()
        if agent is not None:
            terminals.append(agent)
        return {
            "id": call.id,
            "title": call.title or f"tool call {call.id}",
            "kind": call.kind or "other",
            "icon": kind_icon(call.kind),
            "status": call.status,
            "status_label": f"{glyph} {label}",
            "detail": "" if agent is not None else self._detail(),
            "text": text,
            "diffs": diffs,
            "locations": [location_text(loc) for loc in call.locations],
            "terminals": terminals,
        }

    def _agent_output_live(self) -> bool:
        return not self.call.final

    def _agent_output_state(self) -> dict[str, Any] | None:
        """Output the agent sent outside ``content`` (``rawOutput``,
        ``_meta.terminal_output``) as one more terminal of the row: streamed
        as deltas while the call runs, in the state once it is final."""
        output, dropped, exit_code = call_output(self.call)
        if not output and (exit_code is None or self.feeds):
            return None  # nothing, or only an exit code that the client's own terminal shows
        live = self._agent_output_live()
        kept, cut = truncate_head(output, TERM_KEEP)
        return {
            "id": AGENT_OUTPUT,
            "command": command_of(self.call.raw_input) or "output",
            "note": "",
            "output": "" if live else kept,
            "truncated": dropped or cut,
            "exit": f"exit code {exit_code}" if exit_code is not None else "",
            "live": live,
        }

    def snapshots(self) -> dict[str, TerminalSnapshot]:
        """Each attached terminal as the transcript shows it."""
        return {tid: f.snapshot() for tid, f in self.feeds.items()}

    def markdown(self) -> Markdown:
        return self._cached("md", lambda: tool_call_markdown(self.call, self.snapshots()))

    def plain(self) -> str:
        return self._cached("plain", lambda: tool_call_plain(self.call))

    def _detail(self) -> str:
        raw = self.call.raw_input
        if raw is None or self.call.terminal_ids:
            return ""
        cmd = command_of(raw)
        if cmd:
            return "$ " + truncate_tail(cmd, 2000)[0]
        return truncate_tail(_json_text(raw), 2000)[0]

    # -- terminals ----------------------------------------------------------

    def attach(self, started: se.TerminalStarted) -> None:
        """Show a terminal's output live in this row (replaying what it kept)."""
        if started.terminal_id in self.feeds:
            return
        feed = _TermFeed(started)
        self.feeds[started.terminal_id] = feed

        def on_output(text: str) -> None:
            feed.on_output(text)
            self.touch()

        def on_exit(status: Any) -> None:
            feed.exit = str(status)
            self.touch()

        feed.unsubscribe = started.terminal.subscribe(on_output, on_exit)
        self.touch()

    def terminal_exited(self, ev: se.TerminalExited) -> None:
        feed = self.feeds.get(ev.terminal_id)
        if feed is not None:
            how = "" if ev.how == "exited" else f" ({ev.how})"
            feed.exit = f"{ev.exit_status}{how}"
            self.touch()

    def take_output(self) -> list[tuple[str, str]]:
        """Terminal output not sent yet, (terminal id, text); an exited
        terminal's final output goes into the state from now on."""
        out = []
        for tid, feed in self.feeds.items():
            data = feed.take_pending()
            if data:
                out.append((tid, data))
            if feed.exit and feed.final_output is None:
                feed.finish()
                self.version += 1
        delta = self._agent_delta()
        if delta:
            out.append((AGENT_OUTPUT, delta))
        return out

    def _agent_delta(self) -> str:
        """The agent-sent output not streamed yet (while the call runs)."""
        output, _, _ = call_output(self.call)
        total = int(getattr(self.call, "output_dropped", 0) or 0) + len(output)
        new = total - self._agent_sent
        if new <= 0 or not self._agent_output_live():
            return ""
        self._agent_sent = total
        return output[-min(new, TERM_KEEP):]

    def live_output(self) -> list[tuple[str, str]]:
        """Each running terminal's output kept so far (for a view opened mid-run)."""
        out = []
        for tid, feed in self.feeds.items():
            if feed.final_output is None:
                out.append((tid, feed.text()))
                feed.pending.clear()
        output, _, _ = call_output(self.call)
        if output and self._agent_output_live():
            self._agent_sent = int(getattr(self.call, "output_dropped", 0) or 0) + len(output)
            out.append((AGENT_OUTPUT, truncate_head(output, TERM_KEEP)[0]))
        return out

    def running_terminals(self) -> bool:
        return any(f.final_output is None for f in self.feeds.values())

    def settled(self) -> bool:
        """Final status and no terminal still streaming: the markdown will not change."""
        return self.call.final and not self.running_terminals()

    def finish(self) -> None:
        """Final terminal output into the state; stop listening. Idempotent."""
        for feed in self.feeds.values():
            feed.finish()
            feed.pending.clear()
        if self.feeds:
            self.version += 1

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
                    # Live output travels as messages; the state holds it only at the end.
                    "output": "" if live else snap.output,
                    "truncated": snap.truncated,
                    "exit": snap.exit,
                    "live": live,
                }
            )
        return out


class ToolCallGroup:
    """Consecutive tool call rows: one display, one widget (or, without
    widgets, one markdown display per group of a single row).

    The view appends rows while the group is the last output; :meth:`close`
    marks the end of the run (something else was shown after it). Its
    markdown fallback is rewritten when it can no longer change for a while:
    once the group is closed and every row settled, and at the end.
    """

    def __init__(self, *, widgets: bool, call_soon: Callable[..., None]) -> None:
        self.display_id = f"acp-tools-{uuid.uuid4().hex[:12]}"
        self.rows: list[ToolCallRow] = []
        self.closed = False
        self._call_soon = call_soon
        self._sent_rows: dict[str, tuple[tuple[int, str], dict[str, Any]]] = {}  # key -> (revision, state)
        self._sent_md = ""
        self._sent_plain = ""
        self._finished = False
        self.widget: Any = None
        if widgets:
            self.widget = widget_class()(layout=shared_layout())
            self.widget.on_msg(self._on_widget_msg)

    def add(self, call: ToolCall, on_dirty: Callable[[], None]) -> ToolCallRow:
        row = ToolCallRow(call, self, len(self.rows), on_dirty)
        self.rows.append(row)
        return row

    # -- display ------------------------------------------------------------

    def markdown(self) -> Markdown:
        return Markdown("\n\n").join(row.markdown() for row in self.rows)

    def bundle(self, md: Markdown | None = None) -> dict[str, Any]:
        md = self.markdown() if md is None else md
        self._sent_md = md
        self._sent_plain = self.plain()
        return widget_bundle(self.widget, self._sent_plain, md)

    def _update_fallback(self, sink: DisplaySink) -> None:
        md = self.markdown()
        if md != self._sent_md:
            sink.update(self.bundle(md), display_id=self.display_id)

    def _fallback_due(self) -> bool:
        return self.widget is None or (self.closed and all(row.settled() for row in self.rows))

    # -- syncing ------------------------------------------------------------

    def close(self, sink: DisplaySink) -> None:
        """No more rows: the run ended. A settled group's fallback is final now."""
        if self.closed:
            return
        self.closed = True
        if self.widget is not None and self._fallback_due():
            self._update_fallback(sink)

    def sync(self, sink: DisplaySink, rows: Iterable[ToolCallRow]) -> None:
        """Push what changed in ``rows`` (rate-limited by the caller): terminal
        deltas first, then the changed row states in one message."""
        w = self.widget
        if w is None:  # markdown only: the display is the row
            for row in rows:
                row.take_output()
            self._update_fallback(sink)
            return
        changed: dict[str, dict[str, Any]] = {}
        for row in rows:
            for tid, data in row.take_output():
                w.send({"type": "term", "row": row.key, "id": tid, "data": data})
            self._collect(row, changed)
        w.push_rows(changed)
        if changed and self._fallback_due():
            self._update_fallback(sink)
        elif changed:
            self._update_live_fallback(sink)

    def plain(self) -> str:
        return "\n".join(row.plain() for row in self.rows)

    def _update_live_fallback(self, sink: DisplaySink) -> None:
        """While rows run: the text fallback follows their states (title and
        state per row; the markdown has the row headers only until the end),
        for groups small enough that resending it stays cheap."""
        if len(self.rows) > LIVE_FALLBACK_ROWS:
            return
        plain = self.plain()
        if plain == self._sent_plain:
            return
        md = Markdown("\n\n").join(tool_call_header(row.call) for row in self.rows)
        self._sent_md = md
        self._sent_plain = plain
        sink.update(widget_bundle(self.widget, plain, md), display_id=self.display_id)

    def _collect(self, row: ToolCallRow, changed: dict[str, dict[str, Any]]) -> None:
        rev = row.revision()
        sent = self._sent_rows.get(row.key)
        if sent is not None and sent[0] == rev:
            return
        state = row.state()
        if sent is None or sent[1] != state:
            changed[row.key] = state
        self._sent_rows[row.key] = (rev, state)

    def finish(self, sink: DisplaySink) -> None:
        """Final state of every row into the model and the fallback. Idempotent."""
        if self._finished:
            return
        self._finished = True
        self.closed = True
        changed: dict[str, dict[str, Any]] = {}
        for row in self.rows:
            row.finish()
            if self.widget is not None:
                self._collect(row, changed)
        if self.widget is not None:
            self.widget.push_rows(changed)
        self._update_fallback(sink)

    # -- a view opened mid-run ------------------------------------------------

    def _on_widget_msg(self, _widget: Any, content: Any, _buffers: Any) -> None:
        # May run on a comm thread: hand over to the loop.
        if isinstance(content, dict) and content.get("type") == "hello":
            self._call_soon(self._replay)

    def _replay(self) -> None:
        """Send each running terminal's kept output to the views (a reloaded page asked)."""
        if self.widget is None:
            return
        for row in self.rows:
            for tid, text in row.live_output():
                self.widget.send({"type": "reset", "row": row.key, "id": tid, "data": text})
