"""Tool calls in the cell: one row per call, the same for every live view.

:class:`ToolCallRow` holds a call's row state (what the turn widget,
``static/turn.js``, draws), its markdown and text, and the terminals it
shows: their output arrives live (deltas for the widget, :meth:`take_output`),
the last ``TERM_KEEP`` characters land in the state at the end.
:class:`RowDisplay` is a row as its own markdown display, updated in place,
for frontends without widgets (:class:`.turnview.TurnView`).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import shlex
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from ..services import events as se
from ..client.turn import ToolCall, command_of
from .diff import diff_from_content
from ..safe import Html, Markdown, bundle
from .truncate import truncate_head, truncate_tail
from .sink import DisplaySink
from .transcript import (
    STATUS,
    TerminalSnapshot,
    call_facts,
    call_output,
    kind_icon,
    location_text,
    tool_call_body_forms,
    tool_call_final_plain,
    tool_call_header_forms,
    tool_call_plain,
)

TERM_KEEP = 64 * 1024  # characters of terminal output kept in the final row state
#: The row's terminal id for command output the agent sent itself (no client terminal).
AGENT_OUTPUT = "agent-output"
TEXT_KEEP = 64 * 1024
DETAIL_LINE = 100  # a tool call's raw input up to this long is shown on one line
STATIC = Path(__file__).parent / "static"

log = logging.getLogger(__name__)


def esm_source(name: str) -> str:
    """A widget's module: ``static/common.js`` (shared helpers) followed by ``static/<name>``, as one module."""
    return "".join((STATIC / f).read_text(encoding="utf-8") for f in ("common.js", name))


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


class RowForms(NamedTuple):
    """A tool call row's static forms (the fallback's and the saved output's), made in one
    pass: a finished turn renders hundreds of rows (a named tuple: made in half the time of
    a frozen dataclass)."""

    header: str  #: :func:`.transcript.tool_call_plain`: icon, title and status on one line
    md: Markdown  #: the header (:func:`.transcript.tool_call_header_forms`), then the body
    html: Html  #: ``md`` as :func:`~acp_kernel.safe.inert_html_inner` makes it
    body: Markdown  #: the content below the header
    body_html: Html  #: ``body`` as :func:`~acp_kernel.safe.inert_html_inner` makes it
    text: str  #: :func:`.transcript.tool_call_final_plain`


class ToolCallRow:
    """One tool call and the terminals it shows: its row state and its markdown."""

    def __init__(self, call: ToolCall, key: str, on_dirty: Callable[[], None]) -> None:
        self.call = call
        self.key = key  # the row's key in the turn widget's model
        self.feeds: dict[str, _TermFeed] = {}
        self._on_dirty = on_dirty
        self.version = 0  # bumped on every change the row hears of (see touch)
        self._content_seen: Any = None
        self._content_state: tuple[str, list[dict[str, Any]]] = ("", [])
        self._cache: dict[str, tuple[Any, Any]] = {}  # what -> (revision, value)
        self._agent_sent = 0  # characters of the agent-sent output streamed so far (dropped ones counted)

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
            "detail": "" if agent is not None else None,  # None: :meth:`detail` makes it when asked
            "text": text,
            "diffs": diffs,
            "locations": [location_text(loc) for loc in call.locations],
            "terminals": terminals,
        }

    def shows_terminal(self) -> bool:
        """Whether the row's state lists a terminal (:meth:`state`'s ``terminals``), without
        building that state: a finished turn asks it of every row it keeps."""
        if self.feeds:
            return True
        output, _, exit_code = call_output(self.call)
        return bool(output) or exit_code is not None

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
            "command": self.call.command or "output",
            "note": "",
            "output": "" if live else kept,
            "truncated": dropped or cut,
            "exit": f"exit code {exit_code}" if exit_code is not None else "",
            "live": live,
        }

    def snapshots(self) -> dict[str, TerminalSnapshot]:
        """Each attached terminal as the transcript shows it; one the call ended
        without (cancelled, failed) says that it has no exit status."""
        snaps = {tid: f.snapshot() for tid, f in self.feeds.items()}
        if self.call.status in ("cancelled", "failed"):
            for tid, snap in snaps.items():
                if not snap.exit:
                    snaps[tid] = dataclasses.replace(snap, exit="no exit status: the call was " + self.call.status)
        return snaps

    def forms(self) -> RowForms:
        """The row's static forms as it stands, made together and kept until it changes."""
        return self._cached("forms", self._make_forms)

    def _make_forms(self) -> RowForms:
        call, snaps = self.call, self.snapshots()
        facts = call_facts(call)  # (read once for the body and the text)
        body, body_html = tool_call_body_forms(call, snaps, facts=facts)
        head_md, head_html = tool_call_header_forms(call)
        header = tool_call_plain(call)
        # (our Markdown and Html, joined as text: the header's paragraph, then the body)
        md, html = (Markdown(f"{head_md}\n\n{body}"), Html(f"{head_html}{body_html}")) if body else (head_md, head_html)
        return RowForms(header, md, html, body, body_html, tool_call_final_plain(call, snaps, header=header, facts=facts))

    def markdown(self) -> Markdown:
        """The row's markdown: its header, then its body."""
        return self.forms().md

    def body_markdown(self) -> Markdown:
        """The call's content without its header (the static view folds it under the header)."""
        return self.forms().body

    def plain(self) -> str:
        return self.forms().header

    def final_plain(self) -> str:
        """:func:`.transcript.tool_call_final_plain` of the row as it stands (the fallback's text)."""
        return self.forms().text

    def detail(self, *, command_only: bool = False) -> str:
        """The line under the title: the command the raw input holds, else (unless
        ``command_only``: the row shows content that says more) the raw input as JSON."""
        return self._cached("command" if command_only else "detail", lambda: self._detail(command_only))

    def _detail(self, command_only: bool) -> str:
        raw = self.call.raw_input
        if raw is None or self.call.terminal_ids:
            return ""
        cmd = command_of(raw)
        if cmd:
            return "$ " + truncate_tail(cmd, 2000)[0]
        return "" if command_only else truncate_tail(_json_text(raw), 2000)[0]

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
        if not self.call.output:  # none yet (a finished turn asks every row)
            return ""
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

    def end(self) -> None:
        """The turn is over: output not taken yet is dropped (:meth:`take_output`), and each
        terminal's final output kept (:meth:`finish`). A row with no terminal and no output
        from the agent has neither to do (most rows of a long turn)."""
        if self.feeds or self.call.output:
            self.take_output()
            self.finish()

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


class RowDisplay:
    """A tool call row as its own markdown display, updated in place when
    its markdown changes (rate-limited by the view)."""

    def __init__(self, row: ToolCallRow) -> None:
        self.row = row
        self.display_id = f"acp-tools-{uuid.uuid4().hex[:12]}"
        self._sent_md = ""

    def bundle(self) -> dict[str, Any]:
        forms = self.row.forms()
        self._sent_md = forms.md
        return bundle(forms.md, forms.header, forms.html)

    def sync(self, sink: DisplaySink) -> None:
        """Take the terminal output heard so far; show the row again if its markdown changed."""
        self.row.take_output()
        if self.row.markdown() != self._sent_md:
            sink.update(self.bundle(), display_id=self.display_id)

    def finish(self, sink: DisplaySink) -> None:
        """The final state (terminal output kept, listening stopped). Idempotent."""
        self.row.finish()
        self.sync(sink)
