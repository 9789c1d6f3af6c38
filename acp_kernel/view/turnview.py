"""The live view of one turn: its events become display messages on a sink.

Traffic grows with the text, not its square:
- message text is split into completed blocks and an open tail
  (:mod:`.markdown`); the tail is one display updated at most ``rate_hz``
  times a second, and when blocks complete, that display gets its final
  content and a new tail display starts after it, so completed text is sent
  once and never again;
- thoughts (and user text) are one display per run, updated at the same rate;
- each tool call is one markdown display, updated at the same rate when
  its markdown changed (:mod:`.toolcall`).

Notebooks with widgets get :class:`.turnoutput.TurnOutput` instead
(:func:`.turnoutput.view_for` picks): this view never draws a widget, so
its questions are markdown, answered through stdin (``asker``) or by nobody.

Order is kept: before any new output is appended, the open run (text,
thoughts, or tool calls) is closed (a text display gets its final content),
so a tool call that starts mid-message sits between the text before and
after it.

Events arrive on the loop thread (inline from ``Turn.add``); a rendering
failure is logged and shown, never raised into the connection's reader.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable
from functools import partial
from typing import Any

from ..services import events as se
from ..client import turn as tm
from ..safe import bundle, markdown
from ..safe import Markdown
from .frontend import Frontend
from .markdown import BlockSplitter
from .sink import DisplaySink
from .toolcall import RowDisplay, ToolCallRow
from .transcript import (
    notice_markdown,
    plan_markdown,
    plan_text,
    status_line,
    status_markdown,
    thought_html,
    thought_markdown,
    user_markdown,
)
from .turnbase import TurnBase, notice_icon, outcome_of, record_metadata
from .prompts import ElicitationForm, PermissionForm

log = logging.getLogger(__name__)

#: A thought or user run longer than this is closed and continued in a new display.
RUN_LIMIT = 16_000


def _new_id(prefix: str) -> str:
    return f"acp-{prefix}-{uuid.uuid4().hex[:12]}"


class _TextRun:
    """The open run of agent message text: completed blocks go out once, the tail is updated.

    Completed blocks carry markdown and text (terminal frontends print the
    text); the interim tail carries markdown only, since only notebooks,
    which render the markdown, apply its updates. ``updates=False`` (a
    terminal frontend) never shows a tail: blocks appear as they complete.
    """

    def __init__(self, splitter: BlockSplitter, updates: bool = True) -> None:
        self.splitter = splitter
        self.updates = updates
        self.tail_id: str | None = None
        self.tail_sent = ""

    def flush(self, sink: DisplaySink, final: bool = False) -> None:
        if final:
            done, tail = self.splitter.cut(), ""
        else:
            done, tail = self.splitter.take_done(), self.splitter.tail()
        if done:
            data = _text_bundle(done)
            if self.tail_id is not None:
                sink.update(data, display_id=self.tail_id)  # the tail display becomes these blocks
                self.tail_id = None
                self.tail_sent = ""
            else:
                sink.display(data)
        if tail and tail != self.tail_sent and self.updates:
            if self.tail_id is None:
                self.tail_id = _new_id("text")
                sink.display(_tail_bundle(tail), display_id=self.tail_id)
            else:
                sink.update(_tail_bundle(tail), display_id=self.tail_id)
            self.tail_sent = tail
        if final:
            self.tail_id = None
            self.tail_sent = ""


class _OtherRun:
    """An open run of thoughts or user text: one display, updated."""

    def __init__(self, role: str) -> None:
        self.role = role
        self.parts: list[str] = []
        self.size = 0
        self.display_id: str | None = None
        self.sent_size = -1

    def add(self, text: str) -> None:
        self.parts.append(text)
        self.size += len(text)

    def bundle(self) -> dict[str, Any]:
        return _other_bundle(self.role, "".join(self.parts))

    def flush(self, sink: DisplaySink, *, final: bool = True, updates: bool = True) -> None:
        if self.size == self.sent_size or not self.parts or (not updates and not final):
            return
        if self.display_id is None:
            self.display_id = _new_id(self.role)
            sink.display(self.bundle(), display_id=self.display_id)
        else:
            sink.update(self.bundle(), display_id=self.display_id)
        self.sent_size = self.size


def _other_bundle(role: str, text: str) -> dict[str, Any]:
    """Thoughts or the user's text, as one display."""
    if role == "thought":
        return bundle(thought_markdown(text), "Thinking: " + text, thought_html(text))
    return bundle(user_markdown(text), "You: " + text)


_EDITED_NOTE = ("The agent changed an earlier {} of this turn; its text as it now reads "
                "is shown again at the end of the turn.")


def _text_bundle(md: str) -> dict[str, Any]:
    """Final message text: markdown, and the same text for ``text/plain``."""
    return bundle(markdown(md), md)


def _tail_bundle(md: str) -> dict[str, Any]:
    """The open tail, refreshed often: markdown only. A ``text/plain`` copy
    would double the traffic of every refresh, and only notebooks (which
    render the markdown) apply the refreshes; the final content has both."""
    return bundle(markdown(md), derive=False)


class TurnView(TurnBase):
    """Render one turn live into ``sink``; see the module docstring.

    Subscribes on construction and replays events already in the turn.
    ``close()`` flushes the final state (idempotent); it also runs when the
    turn ends. ``frontend`` says what the cell's frontend can show
    (:mod:`.frontend`; its ``widgets`` is not read: this view draws none);
    without updates (a terminal frontend) every output is appended once,
    final, with ``text/plain`` a console prints. ``asker``
    (``asker(prompt, tool_call)``) takes the questions when the frontend
    answers through stdin (``frontend.ask == "stdin"``).
    """

    def __init__(
        self,
        turn: tm.Turn,
        sink: DisplaySink,
        *,
        session: Any = None,
        rate_hz: float = 10.0,
        frontend: Frontend | None = None,
        asker: Callable[[Any, Any], None] | None = None,
    ) -> None:
        super().__init__(turn, sink, session=session, rate_hz=rate_hz,
                         frontend=frontend if frontend is not None else Frontend(widgets=False))
        self.updates = self.frontend.updates
        self.asker = asker if self.frontend.ask == "stdin" else None
        self._text: _TextRun | None = None
        self._other: _OtherRun | None = None
        self.displays: dict[str, RowDisplay] = {}  # tool call id -> its display (with updates)
        self._dirty_rows: set[str] = set()
        self._notice_ids: dict[str, str] = {}  # summary notice key -> display id
        self._dirty_notices: dict[str, Any] = {}  # summaries changed since the last flush
        self._notice_sent: dict[str, str] = {}  # summary key -> text shown (append-only mode)
        self._last_notice: dict[str, Any] = {}  # summary key -> its latest event (append-only mode)
        self._plan_id: str | None = None
        self._plan_sent = ""  # the plan's text as last shown (append-only mode)
        self._plan_dirty = False
        self._final_shown: set[str] = set()  # tool calls whose final line was appended (append-only mode)
        self._order: dict[str, int] = {}  # tool call id -> order of appearance
        self._shown_forms: set[str] = set()  # display ids of forms shown as updatable displays
        self.forms: list[Any] = []  # PermissionForm / ElicitationForm, in order
        self._edited: list[str] = []  # roles whose earlier message the agent changed, in order
        self._subscribe()

    # -- plumbing -----------------------------------------------------------

    def _show_error(self, text: str) -> None:
        self._append(bundle(plain_text=text))

    def _line(self, md: Markdown, text: str) -> None:
        self._append(bundle(md, text))

    def _append(self, data: dict[str, Any], display_id: str | None = None) -> None:
        """A new output at the end: close the open text run first, so order holds."""
        self._close_run()
        self.sink.display(data, display_id=display_id)

    def _close_run(self) -> None:
        if self._text is not None:
            self._text.flush(self.sink, final=True)
            self._text = None
            self._in_text = False
        if self._other is not None:
            self._other.flush(self.sink, updates=self.updates)
            self._other = None

    def _flush_now(self) -> None:
        """The coalesced work: text tail, thought run, dirty tool call rows, plan, notices."""
        if self._text is not None:
            self._text.flush(self.sink)
        if self._other is not None:
            full = self._other.size > RUN_LIMIT
            self._other.flush(self.sink, final=full, updates=self.updates)
            if full:
                self._other = None
        if self._dirty_rows:
            ids, self._dirty_rows = self._dirty_rows, set()
            if self.updates:
                self._sync_rows(ids)
            else:
                self._append_settled_rows(ids)
        if self._plan_dirty:
            self._plan_dirty = False
            self._append_plan()
        if self._dirty_notices:
            dirty, self._dirty_notices = self._dirty_notices, {}
            for key, ev in dirty.items():
                self.sink.update(self._notice_bundle(ev.level, ev.text), display_id=self._notice_ids[key])

    def _sync_rows(self, ids: set[str]) -> None:
        """Each changed row's display, in order of appearance."""
        for tid in sorted(ids, key=lambda i: self._order.get(i, -1)):
            shown = self.displays.get(tid)
            if shown is not None:
                shown.sync(self.sink)

    # -- text ---------------------------------------------------------------

    def _open_text(self) -> None:
        self._text = _TextRun(self._splitter, self.updates)

    def _other_role(self) -> str | None:
        return self._other.role if self._other is not None else None

    def _open_other(self, role: str) -> None:
        self._other = _OtherRun(role)

    def _add_other(self, text: str) -> None:
        assert self._other is not None
        self._other.add(text)

    def _message_edit(self, ev: tm.MessageEdit) -> None:
        """The agent replaced, or appended to, an earlier message. Displays here
        are appended and final (a console cannot take back what it printed), so:
        a line says so at once, the role's whole text as the turn has it follows
        at the end, once per role."""
        if ev.changed and ev.role in self.turn.edited and ev.role not in self._edited:
            self._edited.append(ev.role)
            self._notice("info", _EDITED_NOTE.format(ev.noun))

    # -- everything else ------------------------------------------------------

    def _notice(self, level: str, text: str) -> None:
        self._append(self._notice_bundle(level, text))

    @staticmethod
    def _notice_bundle(level: str, text: str) -> dict[str, Any]:
        return bundle(notice_markdown(level, text), notice_icon(level) + str(text))

    def _notice_event(self, ev: Any) -> None:
        """A summary of repeated warnings (``key`` set) is one display,
        updated in place at the view's rate as the turn re-emits it (append
        only: shown once, and its last wording again at the end)."""
        key = getattr(ev, "key", None)
        if key is None:
            self._notice(ev.level, ev.text)
        elif key not in self._notice_ids:
            self._notice_ids[key] = _new_id("notice")
            self._notice_sent[key] = str(ev.text)
            self._append(self._notice_bundle(ev.level, ev.text), display_id=self._notice_ids[key])
        elif not self.updates:
            self._last_notice[key] = ev
        else:
            self._dirty_notices[key] = ev
            self._ticker.poke()

    def _dirty(self, tool_call_id: str) -> None:
        self._dirty_rows.add(tool_call_id)
        self._ticker.poke()

    def _new_row(self, call: tm.ToolCall) -> ToolCallRow:
        """A row of its own at the end: a display updated in place, or (append
        only) a line now (title and state) and another once it settles."""
        def on_dirty(cid: str = call.id) -> None:
            self._dirty(cid)

        self._order[call.id] = len(self._order)
        row = ToolCallRow(call, f"row:{self._order[call.id]}", on_dirty)
        self.rows[call.id] = row
        if not self.updates:
            forms = row.forms()
            self._append(bundle(forms.md, forms.header, forms.html))
            return row
        shown = RowDisplay(row)
        self.displays[call.id] = shown
        self._append(shown.bundle(), display_id=shown.display_id)
        return row

    def _append_settled_rows(self, ids: Iterable[str], *, final: bool = False) -> None:
        """Append only: each row that settled (or every row, at the end) shows its final line once."""
        for tid in sorted(ids, key=lambda i: self._order.get(i, -1)):
            row = self.rows.get(tid)
            if row is None or tid in self._final_shown:
                continue
            if final:
                row.end()
            else:
                row.take_output()
                if not row.settled():
                    continue
            self._final_shown.add(tid)
            forms = row.forms()
            self._append(bundle(forms.md, forms.text, forms.html))

    def _plan_event(self) -> None:
        if not self.updates:
            self._plan_dirty = True
            self._ticker.poke()
            return
        entries = self.turn.plan
        data = bundle(plan_markdown(entries), plan_text(entries))
        if self._plan_id is None:
            self._plan_id = _new_id("plan")
            self._append(data, display_id=self._plan_id)
        else:
            self.sink.update(data, display_id=self._plan_id)

    def _append_plan(self) -> None:
        """Append only: the plan again, when its text changed since it was last shown."""
        entries = self.turn.plan
        plain = plan_text(entries)
        if entries and plain != self._plan_sent:
            self._plan_sent = plain
            self._append(bundle(plan_markdown(entries), plain))

    def _settled(self, form: Any, outcome: Any) -> None:
        if form.answered:
            return
        form.resolved(outcome)
        if self.updates and form.display_id in self._shown_forms:
            self.sink.update(form.bundle(), display_id=form.display_id)
        else:
            self._append(form.bundle())

    def _show_form(self, form: Any, call: Any) -> None:
        self.forms.append(form)
        if self.asker is not None:
            # Asked through stdin: the question is the input prompt; the cell
            # gets the outcome once it is answered.
            self.asker(form.prompt, call)
        elif self.updates:
            self._shown_forms.add(form.display_id)
            self._append(form.bundle(), display_id=form.display_id)
        else:
            self._append(form.bundle())
        self._watch(form.prompt, partial(self._settled, form))

    def _permission(self, prompt: se.PermissionPrompt) -> None:
        call, detail = self._asked_call(prompt)
        form = PermissionForm(prompt, widgets=False, detail=detail)
        self._show_form(form, call)

    def _elicitation(self, prompt: se.ElicitationPrompt) -> None:
        form = ElicitationForm(prompt)
        self._show_form(form, None)

    # -- the end --------------------------------------------------------------

    def _close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self._stop_listening()
        self._close_run()  # before the ticker's last flush, so the tail is not sent twice
        self._ticker.close()
        if self.updates:
            for shown in self.displays.values():
                try:
                    shown.finish(self.sink)
                except Exception:
                    log.exception("finishing a tool call row failed")
        else:
            self._append_settled_rows(list(self.rows), final=True)
            self._append_plan()
            for key, ev in self._last_notice.items():
                if str(ev.text) != self._notice_sent.get(key):
                    self._append(self._notice_bundle(ev.level, ev.text))
        for form in self.forms:
            if not form.answered and form.prompt.done:
                self._settled(form, outcome_of(form.prompt.future))
        for role in self._edited:  # the changed text, whole, as it reads now
            body = self.turn.role_text(role)
            if role == "agent":
                self.sink.display(_text_bundle(body) if body else bundle(plain_text="(the message was cleared)"))
            elif body:
                self.sink.display(_other_bundle(role, body))
        if self.turn.done:
            line = status_line(self.turn, self.session, files_read=self._files_read)
            self.sink.display(bundle(status_markdown(line), line), record_metadata(self.turn))
