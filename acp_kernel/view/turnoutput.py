"""One turn, one output: the live view for notebooks (widgets, in-place updates).

A turn of many steps used to be many outputs, and JupyterLab shows at most
50 per cell: the end of a long turn, and a pending permission question, hid
behind "Show more outputs". Here the whole turn is one display: one widget
(:mod:`.turnwidget`, ``static/turn.js``) whose model holds the turn's ordered
blocks, plus the complete markdown and text of the turn in the same bundle
for readers without widgets (nbconvert, GitHub, a page without the widget
extension). Only a live turn is a widget: when the turn ends, the output is
replaced in place by a static one and the widget closes (:mod:`.finished`).

Traffic: blocks are synced at most ``rate_hz`` times a second, only the ones
that changed (completed text is sent once: the open tail of the message is
its own block, as in :mod:`.turnview`); terminal output travels as appended
deltas in custom messages, colours kept and every other escape sequence
removed (:mod:`.ansi`). The fallback (HTML, markdown and text, the last two
bounded as the finished turn's are) is rebuilt at block boundaries at most
every ``FALLBACK_INTERVAL`` seconds (each rebuild also
makes the page render the widget's view again), past ``FALLBACK_BIG``
characters only once it has doubled, not while a question waits for its
answer (so a half-filled form is not redrawn), and at the end. Once a page
shows the widget (its view sends ``{"type": "seen"}``), only every
``FALLBACK_STALE`` seconds: the fallback is then for a notebook saved while
the turn runs and read without the widget, not for the page.

Questions are answered inside the same output: the widget sends
``{"type": "answer", "block", "option"}`` or a form's ``submit`` /
``decline`` / ``cancel``; they may arrive on a comm thread and only call the
prompt's thread-safe methods; the block's new state is made on the loop
when the prompt's future settles.

Terminal frontends (no updates) keep :class:`.turnview.TurnView`'s
append-only mode; notebooks without widgets its markdown displays.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
import uuid
from collections.abc import Callable
from functools import partial
from typing import Any

from ..client import turn as tm
from ..safe import Html, Markdown, ignored, inert_html_inner, markdown, markdown_html, plain, prose_forms
from ..services import events as se
from .. import termsafe
from .ansi import AnsiStream, colour
from .coalesce import Coalescer
from .form import choices, field_kind, field_label, validate
from .markdown import BlockSplitter
from .frontend import NOTEBOOK, Frontend
from .sink import DisplaySink, widget_bundle
from .toolcall import RowForms, ToolCallRow, shared_layout
from .transcript import (
    elicitation_markdown,
    elicitation_outcome,
    kind_icon,
    notice_markdown,
    option_name,
    permission_markdown,
    plan_markdown,
    plan_text,
    status_line,
    status_markdown,
    thought_markdown,
    url_elicitation_markdown,
    url_elicitation_plain,
    url_state,
    user_markdown,
)
from .turnbase import TurnBase, notice_icon, outcome_of, record_metadata
from .turnwidget import DEFAULT_SHOWN, block_key, turn_widget_class
from .finished import FORM_LIMIT, LazySteps, Step, capped, run_of, run_spans, static_bundle, tool_html
from .form import UNSET
from .turnview import TurnView

log = logging.getLogger(__name__)

#: A thought or user run longer than this continues in a new block.
RUN_LIMIT = 16_000
#: Seconds between rebuilds of the markdown/text fallback while the turn runs.
FALLBACK_INTERVAL = 2.0
#: Characters (markdown and text) past which the fallback is rebuilt only when it has doubled
#: since the last rebuild, or after FALLBACK_STALE seconds: every interval, a long turn sent its
#: whole transcript again each time (a 60 s turn, 30 times); doubling bounds what the rebuilds
#: send to about twice the final transcript.
FALLBACK_BIG = 64_000
FALLBACK_STALE = 30.0
#: Seconds between redraws of a role's text from the model after the agent
#: replaced or appended to an earlier message (:class:`..client.turn.MessageEdit`).
REDRAW_INTERVAL = 1.0
#: The most blocks a page may ask to be shown ("Show N earlier" adds a hundred a click).
MAX_SHOWN = 1_000_000
#: The session's notice when the user cancels (client/session.py); once the turn
#: has ended it says what happened instead of staying "...".
CANCELLING = "cancelling"  # the key of the session's notice (client/session.py)


class Block:
    """One block of the turn: its widget state and its part of the fallback."""

    __slots__ = ("index", "key", "kind", "state", "md", "text", "sent", "row", "prompt", "form", "streams", "html", "html_of",
                 "state_of", "tool", "tool_of")

    def __init__(self, index: int, kind: str) -> None:
        self.index = index
        self.key = block_key(index)
        self.kind = kind
        self.state: dict[str, Any] = {"type": kind}
        self.md: Markdown = Markdown("")
        self.text = ""
        self.sent: Any = None  # the state last sent
        self.row: ToolCallRow | None = None
        self.prompt: Any = None
        self.form: Any = None  # an elicitation's fields, in order
        self.streams: dict[str, AnsiStream] = {}
        self.html: Html = Html("")  # the fallback's HTML of ``md``, made when the fallback is
        self.html_of: Markdown | None = None  # the ``md`` it was made from
        self.state_of: Any = None  # the row's revision ``state`` was made at (a tool call's block)
        self.tool: Html = Html("")  # a tool call's folded HTML (:func:`.finished.tool_html`)
        self.tool_of: tuple[Any, ...] | None = None  # what ``tool`` was made from

    def refresh(self) -> RowForms | None:
        """A tool call's markdown and text as its row stands now, and the row's forms they
        came from (nothing for other blocks: None)."""
        row = self.row
        if row is None:
            return None
        forms = row.forms()
        self.md, self.text = forms.md, forms.text
        return forms

    def fallback_html(self, chosen: Any = None, forms: RowForms | None = None) -> Html:
        """``md`` as HTML, rendered again only when ``md`` changed; a tool call folded
        under its header (:func:`.finished.tool_html`, open as the reader ``chosen`` or
        as the live row would be), its content rendered again only when the row's changed
        (``forms``: the row's, when the caller has them)."""
        row = self.row
        if row is None:
            if self.html_of is not self.md:
                self.html, self.html_of = inert_html_inner(self.md), self.md
            return self.html
        if forms is None:
            forms = row.forms()  # (made again only when the row changed)
        header, body, open_ = forms.header, forms.body_html, _opens(row, chosen)
        made = self.tool_of
        if made is None or made[0] is not body or made[1] is not header or made[2] != open_:
            self.tool, self.tool_of = tool_html(header, body, open_=open_), (body, header, open_)
        return self.tool


def _row_state(row: ToolCallRow) -> dict[str, Any]:
    """A tool call row's state for the turn widget: escape sequences gone
    (colours kept in output), raw input only where it adds something."""
    st = dict(row.state())
    st["title"] = termsafe.line(st.get("title"))
    st["text"] = colour(st.get("text") or "")
    st["diffs"] = [dict(d, path=termsafe.line(d.get("path")),
                        lines=[[op, termsafe.line(line)] for op, line in d.get("lines") or []])
                   for d in st.get("diffs") or []]
    st["terminals"] = [dict(t, command=termsafe.line(t.get("command")), note=termsafe.clean(t.get("note") or ""),
                            output=colour(t.get("output") or ""), exit=termsafe.line(t.get("exit")))
                       for t in st.get("terminals") or []]
    st["locations"] = [termsafe.line(loc) for loc in st.get("locations") or []]
    if row.call.status in ("cancelled", "failed"):
        for t in st["terminals"]:
            if not t["exit"] and not t.get("live"):
                t["exit"] = "no exit status: the call was " + row.call.status
    detail = st.get("detail")
    if detail is None:  # the raw input's JSON only when the call's own content says nothing more
        detail = row.detail(command_only=bool(st["text"] or st["diffs"] or st["terminals"]))
    st["detail"] = termsafe.clean(detail)
    st["type"] = "tool"
    return st


def _opens(row: ToolCallRow, chosen: Any) -> bool:
    """Whether a finished call shows unfolded, as the live row did (static/common.js):
    the reader's choice if they made one, else when it showed a terminal or failed."""
    if isinstance(chosen, bool):
        return chosen
    return row.shows_terminal() or row.call.status == "failed"


class TurnOutput(TurnBase):
    """Render one turn live as one output; see the module docstring.

    The same constructor as :class:`.turnview.TurnView` (``view_for`` picks).
    """

    def __init__(
        self,
        turn: tm.Turn,
        sink: DisplaySink,
        *,
        session: Any = None,
        rate_hz: float = 10.0,
        widgets: bool = True,
        frontend: Frontend | None = None,
        asker: Callable[[Any, Any], None] | None = None,
    ) -> None:
        super().__init__(turn, sink, session=session, rate_hz=rate_hz,
                         frontend=frontend if frontend is not None else NOTEBOOK)
        self.blocks: list[Block] = []
        self._row_blocks: dict[str, Block] = {}
        self._dirty: set[int] = set()
        #: Changed blocks not sent: out of the page's window (:meth:`_sync`), until it takes them in.
        self._deferred: set[int] = set()
        self._page_shown = 0  # the window the page said it shows ("shown" messages)
        self._tail: Block | None = None  # the open tail of agent text
        self._tail_sent = ""
        self._other: Block | None = None  # the open thought/user run
        self._other_parts: list[str] = []
        self._other_size = 0
        self._plan: Block | None = None
        self._notices: dict[str, Block] = {}
        self._lock = threading.Lock()
        self._fallback_at = 0.0
        self._fallback_handle: Any = None
        self._fallback_sent: tuple[str, str] | None = None  # the markdown and text last sent
        self._fallback_sent_at = 0.0
        #: A page shows the widget (its view said so): the fallback is then only for a notebook
        #: saved meanwhile and read without the widget, and is rebuilt every FALLBACK_STALE seconds.
        self._on_page = False
        #: Rows the reader opened or folded (block key -> open), as the page said in a message: the
        #: synced ``expanded`` can wait for the kernel to go idle (ipywidgets buffers a model's
        #: updates until the last one is answered), and the static end must keep the choices.
        self._chosen: dict[str, bool] = {}
        self._redraw: set[str] = set()  # roles whose text is drawn again from the model
        #: A redraw renders the role's whole text: at most one every REDRAW_INTERVAL.
        self._redraws = Coalescer(lambda: self._run(self._redraw_due), 1.0 / REDRAW_INTERVAL)
        self.display_id = f"acp-turn-{uuid.uuid4().hex[:12]}"
        self.widget = self._run(self._make_widget)
        self._run(self._display)
        self._subscribe()

    # -- plumbing -----------------------------------------------------------

    def _make_widget(self) -> Any:
        w = turn_widget_class()(layout=shared_layout(), turn=self.display_id)
        # MathJax skips the whole view, the reopened notebook's loader too (its
        # element carries the classes): agent text is never typeset as math.
        w.add_class("tex2jax_ignore")
        w.add_class("mathjax_ignore")
        w.on_msg(self._on_widget_msg)
        w.observe(lambda _change: self._call_soon(self._reveal), names="shown")
        return w

    def _display(self) -> None:
        self.sink.display(self._bundle(), display_id=self.display_id)
        self._fallback_at = self._fallback_sent_at = time.monotonic()

    def _new(self, kind: str) -> Block:
        block = Block(len(self.blocks), kind)
        self.blocks.append(block)
        self._dirty.add(block.index)
        return block

    def _touch(self, block: Block) -> None:
        self._dirty.add(block.index)
        self._ticker.poke()

    def _show_error(self, text: str) -> None:
        self._notice("error", text)

    # -- runs of text -----------------------------------------------------------

    def _close_run(self) -> None:
        """Something else comes next: the open text or thought run is final."""
        if self._in_text:
            self._flush_text(final=True)
            self._in_text = False
        if self._other is not None:
            self._flush_other()
            self._other = None
            self._other_parts = []
            self._other_size = 0
        self._boundary()

    def _open_text(self) -> None:
        pass  # the text's blocks are made as it completes (_flush_text)

    def _other_role(self) -> str | None:
        return self._other.kind if self._other is not None else None

    def _open_other(self, role: str) -> None:
        self._other = self._new(role)

    def _add_other(self, text: str) -> None:
        self._other_parts.append(text)
        self._other_size += len(text)

    def _text_block(self, block: Block, md: str, *, open_: bool) -> None:
        forms = None if open_ else prose_forms(md)
        if forms is None:
            block.state = {"type": "text", "html": markdown_html(md), "open": open_}
            block.md = markdown(md) if not open_ else Markdown("")
            block.text = md
        else:  # prose: one render for the widget and the saved output (its fallback HTML, made)
            block.md, block.html, block.text = forms
            block.html_of = block.md
            block.state = {"type": "text", "html": ignored(block.html), "open": False}
        self._dirty.add(block.index)

    def _flush_text(self, final: bool = False) -> None:
        if final:
            done, tail = self._splitter.cut(), ""
        else:
            done, tail = self._splitter.take_done(), self._splitter.tail()
        if done:
            block = self._tail if self._tail is not None else self._new("text")
            self._tail, self._tail_sent = None, ""
            self._text_block(block, done, open_=False)
            self._boundary()
        if tail and tail != self._tail_sent:
            if self._tail is None:
                self._tail = self._new("text")
            self._text_block(self._tail, tail, open_=True)
            self._tail.text = tail
            self._tail_sent = tail

    def _flush_other(self) -> None:
        block = self._other
        if block is None:
            return
        self._other_block(block, "".join(self._other_parts))

    def _other_block(self, block: Block, body: str) -> None:
        if block.kind == "thought":
            block.state = {"type": "thought", "text": termsafe.clean(body)}
            block.md, block.text = (thought_markdown(body), "Thinking: " + body) if body else (Markdown(""), "")
        else:
            block.state = {"type": "user", "text": termsafe.clean(body)}
            block.md, block.text = (user_markdown(body), "You: " + body) if body else (Markdown(""), "")
        self._dirty.add(block.index)

    # -- a message replaced: its role's text drawn again from the model -------------

    def _message_edit(self, ev: tm.MessageEdit) -> None:
        if ev.changed and ev.role in self.turn.edited:
            self._redraw.add(ev.role)
            self._redraws.poke()

    def _redraw_due(self) -> None:
        if not self.closed and self._redraw:
            self._redraw_now()
            self._sync()
            self._boundary()

    def _redraw_now(self) -> None:
        """Each role in ``_redraw``: its whole text, as the turn has it now, in the
        first block that showed it, the role's later blocks emptied (the simplest
        right answer: interleaving with tool calls is given up for an edited role).
        Text streamed after this continues in new blocks, as usual."""
        for role in sorted(self._redraw):
            body = self.turn.role_text(role)
            kind = "text" if role == "agent" else role
            blocks = [b for b in self.blocks if b.kind == kind]
            if role == "agent":
                self._splitter = BlockSplitter()  # what it held is in the model's text
                self._tail, self._tail_sent = None, ""
            elif self._other is not None and self._other.kind == role:
                self._other, self._other_parts, self._other_size = None, [], 0
            if not blocks:
                if not body:
                    continue
                self._close_run()
                blocks = [self._new(kind)]
            for i, block in enumerate(blocks):
                part = body if i == 0 else ""
                if role == "agent":
                    self._text_block(block, part, open_=False)
                else:
                    self._other_block(block, part)
        self._redraw.clear()

    # -- the coalesced flush -------------------------------------------------------

    def _flush_now(self) -> None:
        if self._in_text:
            self._flush_text()
        if self._other is not None:
            self._flush_other()
            if self._other_size > RUN_LIMIT:
                self._other, self._other_parts, self._other_size = None, [], 0
                self._boundary()
        self._sync()

    def _sync(self) -> None:
        """Terminal deltas first, then every changed block in one partial update, with the
        turn's block count. A block out of the page's window (all but the last ``shown``; a
        question is always in it) waits in ``_deferred``: the page draws only the window, and
        an unpaced turn's refresh sent every block it had made, its question at step 900
        behind 1,800 blocks of state (426 KB). "Show N earlier" raises ``shown``: the blocks
        it brings in are sent then (:meth:`_reveal`)."""
        if not self._dirty:
            return
        dirty, self._dirty = sorted(self._dirty), set()
        blocks = self.blocks
        first = self._window_start()
        changed: dict[str, dict[str, Any]] = {}
        for i in dirty:
            block = blocks[i]
            row = block.row
            if row is not None:
                self._send_output(block)
            if i < first and block.prompt is None:
                self._deferred.add(i)
                continue
            if row is not None:
                rev = row.revision()
                if block.state_of != rev:  # the row's state is made again only when the row changed
                    block.state, block.state_of = _row_state(row), rev
            if block.sent is not block.state and (block.sent is None or block.sent != block.state):
                changed[block.key] = block.state
                block.sent = block.state
        self.widget.push_blocks(changed, len(blocks))

    def _window_start(self) -> int:
        """The first block the page shows (questions aside): of its last ``shown``, the
        synced one or what the page said in a message (:meth:`_on_widget_msg`), the larger."""
        shown = self.widget.shown
        return len(self.blocks) - max(shown if type(shown) is int else DEFAULT_SHOWN, self._page_shown, 1)

    def _reveal(self) -> None:
        """The page shows more of the turn (``shown``, raised by "Show N earlier"): the
        deferred blocks now in its window, sent."""
        if self.closed:
            return
        first = self._window_start()
        back = {i for i in self._deferred if i >= first}
        if back:
            self._deferred -= back
            self._dirty |= back
            self._sync()

    def _send_output(self, block: Block) -> None:
        row = block.row
        assert row is not None
        for tid, data in row.take_output():
            stream = block.streams.setdefault(tid, AnsiStream())
            data = stream.feed(data)
            if data:
                self.widget.send({"type": "term", "block": block.key, "id": tid, "data": data})

    # -- the fallback ------------------------------------------------------------

    def markdown(self) -> Markdown:
        """The turn so far as markdown (what the saved notebook shows without widgets)."""
        parts = [b.md for b in self.blocks if b.md]
        return Markdown("\n\n").join(parts)

    def plain_text(self) -> str:
        return "\n".join(b.text for b in self.blocks if b.text)

    def _bundle(self, md: Markdown | None = None, text: str | None = None) -> dict[str, Any]:
        """The live output's bundle: the widget and the fallback of ``md`` and ``text`` (the
        turn's, made here when not given)."""
        md = self.markdown() if md is None else md
        text = (self.plain_text() if text is None else text) or "(the agent's turn)"
        self._fallback_sent = (md, text)
        if not md:
            return widget_bundle(self.widget, plain(text), Markdown("*(the agent's turn)*"))
        if len(md) > FORM_LIMIT or len(text) > FORM_LIMIT:  # bounded as the end's (.finished.capped)
            small = capped([Step(Html(""), b.md, b.text, source=b.text if b.kind == "text" else None)
                            for b in self.blocks if b.md or b.text])
            md, text = Markdown("\n\n").join(s.md for s in small if s.md), "\n".join(s.text for s in small if s.text)
        # The HTML of each block is kept with it: a rebuild renders only the blocks that changed.
        html = ignored(Html("\n").join(b.fallback_html() for b in self.blocks if b.md))
        return widget_bundle(self.widget, plain(text), md, html)

    def _boundary(self) -> None:
        """A block ended: the fallback follows, at most every FALLBACK_INTERVAL seconds."""
        if self.closed or self._fallback_handle is not None:
            return
        wait = self._fallback_at + FALLBACK_INTERVAL - time.monotonic()
        loop = self._loop
        if loop is None or loop.is_closed():
            if wait <= 0:
                self._update_fallback()
            return
        self._fallback_handle = loop.call_later(max(wait, 0.0), lambda: self._run(self._fallback_due))

    def _fallback_due(self) -> None:
        self._fallback_handle = None
        if not self.closed:
            self._update_fallback()

    def _asking(self) -> bool:
        return any(b.prompt is not None and b.state.get("state") == "asking" for b in self.blocks
                   if b.kind in ("permission", "form", "url"))

    def _update_fallback(self) -> None:
        if self._asking():
            return  # a re-render would redraw the question under the reader's hands
        if self._on_page and time.monotonic() - self._fallback_sent_at < FALLBACK_STALE:
            return  # the page shows the widget; the end replaces the output anyway
        self._refresh_rows()
        md, text = self.markdown(), self.plain_text()
        now = self._fallback_at = time.monotonic()
        sent = self._fallback_sent
        if (md, text or "(the agent's turn)") == sent:
            return
        size, last = len(md) + len(text), len(sent[0]) + len(sent[1]) if sent else 0
        if size > FALLBACK_BIG and size < 2 * last and now - self._fallback_sent_at < FALLBACK_STALE:
            return  # a big fallback goes again once it has doubled (or gone stale), not every interval
        self._fallback_sent_at = now
        self.sink.update(self._bundle(md, text), display_id=self.display_id)

    def _refresh_rows(self) -> None:
        """Each tool call's markdown and text as it stands now (the fallback's and the end's)."""
        for block in self.blocks:
            block.refresh()

    # -- everything else -------------------------------------------------------------

    def _line(self, md: Markdown, text: str) -> Block:
        self._close_run()
        block = self._new("line")
        block.state = {"type": "line", "text": termsafe.clean(text)}
        block.md, block.text = md, text
        self._touch(block)
        self._boundary()
        return block

    def _notice(self, level: str, message: str, block: Block | None = None) -> Block:
        if block is None:
            self._close_run()
            block = self._new("notice")
        block.state = {"type": "notice", "level": level, "text": termsafe.clean(str(message))}
        block.md, block.text = notice_markdown(level, message), notice_icon(level) + str(message)
        self._touch(block)
        self._boundary()
        return block

    def _notice_event(self, ev: Any) -> None:
        """A keyed notice (a summary the turn re-emits) is one block, updated in place."""
        key = getattr(ev, "key", None)
        if key:
            self._notices[key] = self._notice(ev.level, ev.text, self._notices.get(key))
        else:
            self._notice(ev.level, ev.text)

    def _new_row(self, call: tm.ToolCall) -> ToolCallRow:
        """A tool call is a block of its own."""
        self._close_run()
        block = self._new("tool")
        row = ToolCallRow(call, block.key, functools.partial(self._touch, block))
        block.row = row
        self.rows[call.id] = row
        self._row_blocks[call.id] = block
        block.md = Markdown("")  # filled when the fallback is rebuilt
        self._boundary()
        return row

    def _plan_event(self) -> None:
        entries = self.turn.plan
        if self._plan is None:
            self._close_run()
            self._plan = self._new("plan")
            self._boundary()
        block = self._plan
        block.state = {"type": "plan", "entries": [
            {"content": termsafe.line(e.get("content", "")), "status": str(e.get("status") or "pending")} for e in entries]}
        block.md, block.text = plan_markdown(entries), plan_text(entries)
        self._touch(block)

    # -- questions --------------------------------------------------------------------

    def _permission(self, prompt: se.PermissionPrompt) -> None:
        _call, detail = self._asked_call(prompt)
        self._close_run()
        block = self._new("permission")
        block.prompt = prompt
        block.state = {
            "type": "permission", "state": "asking", "icon": kind_icon(prompt.kind),
            "title": termsafe.line(prompt.title or "a tool call"), "detail": termsafe.clean(detail),
            "options": [{"id": str(o.get("optionId")), "name": termsafe.line(o.get("name")),
                         "kind": str(o.get("kind") or "")} for o in prompt.options],
            "chosen": "",
        }
        self._show_question(block)

    def _elicitation(self, prompt: se.ElicitationPrompt) -> None:
        self._close_run()
        block = self._new("form")
        block.prompt = prompt
        fields = []
        for name, schema in prompt.fields.items():
            kind = field_kind(schema)
            opts = choices(schema["items"] if kind == "multi" else schema) if kind in ("choice", "multi") else None
            values = [v for _, v in opts or []]
            default = schema.get("default")
            if kind == "choice":
                chosen: Any = values.index(default) if default in values else None  # no default: unset
            elif kind == "multi":
                chosen = [values.index(v) for v in default if v in values] if isinstance(default, list) else []
            elif kind == "boolean":
                chosen = bool(default)
            elif kind in ("integer", "number"):
                chosen = default if isinstance(default, (int, float)) and not isinstance(default, bool) else None
            else:
                chosen = default if isinstance(default, str) else ""
            fields.append({
                "name": termsafe.line(name), "label": termsafe.line(field_label(name, schema, name in prompt.required)),
                "kind": kind, "required": name in prompt.required,
                "choices": [termsafe.line(label) for label, _ in opts or []],
                "value": chosen, "description": termsafe.clean(str(schema.get("description") or "")),
                "placeholder": termsafe.line(schema.get("format") or ""),
            })
        block.form = list(prompt.fields)
        block.state = {"type": "form", "state": "asking", "qid": uuid.uuid4().hex, "html": markdown_html(prompt.message),
                       "fields": fields, "errors": []}
        self._show_question(block)

    def _url_elicitation(self, prompt: se.UrlElicitationPrompt) -> None:
        """A page to open: the host named, the message and the whole address as text;
        the page's JS opens it only on the user's click (static/turn.js)."""
        self._close_run()
        block = self._new("url")
        block.prompt = prompt
        block.state = {"type": "url", "state": "asking", "host": termsafe.line(prompt.host),
                       "hostUnicode": termsafe.line(prompt.host_unicode), "message": termsafe.clean(prompt.message),
                       "url": prompt.url}  # checked: http(s), no spaces or controls (services/elicitation.check_url)
        self._show_question(block)

    def _elicitation_completed(self, ev: se.ElicitationCompleted) -> None:
        block = next((b for b in self.blocks if b.prompt is ev.prompt), None)
        if block is None:
            super()._elicitation_completed(ev)
            return
        block.state = dict(block.state, state="completed")
        done = ev.prompt.future.done()
        self._prompt_fallback(block, outcome_of(ev.prompt.future) if done else None, answered=done)
        self._touch(block)
        self._ticker.flush_now()
        self._boundary()

    def _show_question(self, block: Block) -> None:
        """A question's block shows at once and follows its answer. The fallback (for a page
        that cannot show the widget) is not drawn again while a question waits: the page
        would relay, parse and draw the whole turn again, first before the question could be
        drawn (at step 900 of an unpaced turn: clickable after 0.58 s, 0.27 s without), or,
        later, under the reader's click. It follows the answer (_settled)."""
        self._prompt_fallback(block)
        self._touch(block)
        self._ticker.flush_now()  # a question shows at once
        self._watch(block.prompt, partial(self._settled, block))

    def _prompt_fallback(self, block: Block, outcome: Any = None, answered: bool = False) -> None:
        p = block.prompt
        if block.kind == "url":
            block.md = url_elicitation_markdown(p, outcome, answered=answered)
            block.text = url_elicitation_plain(p, outcome, answered=answered)
        elif block.kind == "permission":
            block.md = permission_markdown(p, outcome, answered=answered)
            if not answered:
                block.text = f"Permission requested: {p.title or 'a tool call'}\n" + (
                    f"What it runs or touches:\n{p.command}\n" if p.command else "") + "Options: " + " / ".join(
                    str(o["name"]) for o in p.options)
            else:
                block.text = f"Permission requested: {p.title or 'a tool call'} -> " + (
                    "cancelled" if outcome is None else f"chose {option_name(p.options, outcome)}")
        else:
            block.md = elicitation_markdown(p, outcome, answered=answered)
            block.text = f"The agent asks: {p.message}" + (f" -> {elicitation_outcome(outcome)}" if answered else "")

    def _settled(self, block: Block, outcome: Any) -> None:
        if block.state.get("state") != "asking":
            return
        state = dict(block.state)
        if block.kind == "permission":
            state["state"] = "cancelled" if outcome is None else "answered"
            state["chosen"] = "" if outcome is None else termsafe.line(option_name(block.prompt.options, outcome))
        elif block.kind == "url":
            state["state"] = url_state(block.prompt, outcome, answered=True)
        else:
            action = str(outcome.get("action")) if isinstance(outcome, dict) else "cancel"
            state["state"] = {"accept": "submitted", "decline": "declined"}.get(action, "cancelled")
        block.state = state
        self._prompt_fallback(block, outcome, answered=True)
        self._touch(block)
        if not self.closed:
            self._ticker.flush_now()
        self._boundary()

    def _on_widget_msg(self, _widget: Any, content: Any, _buffers: Any) -> None:
        """A click or a form from the page (maybe on a comm thread)."""
        if not isinstance(content, dict):
            return
        kind = content.get("type")
        if kind == "hello":
            self._call_soon(self._replay)
            return
        if kind == "seen":
            self._on_page = True  # (a bool: safe from a comm thread)
            return
        if kind == "shown":  # "Show N earlier": said in a message too, as the synced trait waits for idle
            shown = content.get("shown")
            if type(shown) is int and 0 < shown <= MAX_SHOWN:
                self._page_shown = max(self._page_shown, shown)  # (an int set: safe from a comm thread)
                self._call_soon(self._reveal)
            return
        key = content.get("block")
        if not isinstance(key, str) or not key.startswith("b:") or not key[2:].isdigit():
            return
        index = int(key[2:])
        block = self.blocks[index] if index < len(self.blocks) else None
        if kind == "expanded" and block is not None and isinstance(content.get("open"), bool):
            self._chosen[key] = content["open"]  # a dict item set: safe from a comm thread
            return
        if block is None or block.prompt is None or block.prompt.done:
            return
        if kind == "answer" and block.kind == "permission":
            option = content.get("option")
            if any(o.get("optionId") == option for o in block.prompt.options):
                with self._lock:  # two fast clicks: only the first one answers
                    if block.prompt.done:
                        return
                    block.prompt.answer(option)
        elif block.kind == "url" and kind in ("open", "decline", "cancel"):
            with self._lock:  # two fast clicks: only the first one answers
                if not block.prompt.done:
                    {"open": block.prompt.open, "decline": block.prompt.decline, "cancel": block.prompt.cancel}[kind]()
        elif block.kind == "form":
            if kind == "submit":
                self._submit(block, content.get("values"))
            elif kind == "decline":
                block.prompt.decline()
            elif kind == "cancel":
                block.prompt.cancel()

    def _submit(self, block: Block, values: Any) -> None:
        prompt = block.prompt
        if not isinstance(values, dict):
            return
        out: dict[str, Any] = {}
        for name in block.form:
            schema = prompt.fields[name]
            kind = field_kind(schema)
            value = values.get(name)
            opts = [v for _, v in (choices(schema["items"] if kind == "multi" else schema) or [])] if kind in ("choice", "multi") else []
            if kind == "choice":
                value = opts[value] if isinstance(value, int) and 0 <= value < len(opts) else UNSET
            elif kind == "multi":
                value = [opts[i] for i in value if isinstance(i, int) and 0 <= i < len(opts)] if isinstance(value, list) else []
            elif kind == "boolean":
                value = bool(value)
            elif kind in ("integer", "number"):
                value = value if isinstance(value, (int, float)) and not isinstance(value, bool) else UNSET
            else:
                value = value if isinstance(value, str) else UNSET
            out[name] = value
        content, errors = validate(prompt.fields, prompt.required, out)
        if not errors:
            try:
                with self._lock:
                    if prompt.done:
                        return
                    prompt.accept(content)
                return
            except ValueError as exc:
                errors = [str(exc)]
        self._call_soon(self._form_errors, block, [termsafe.line(e) for e in errors])

    def _form_errors(self, block: Block, errors: list[str]) -> None:
        block.state = dict(block.state, errors=errors)
        self._touch(block)

    def _replay(self) -> None:
        """A view opened mid-run asked for the running terminals' output kept so far."""
        for block in self.blocks:
            if block.row is not None:
                for tid, text in block.row.live_output():
                    self.widget.send({"type": "reset", "block": block.key, "id": tid, "data": colour(text)})

    # -- the end ---------------------------------------------------------------------

    def _close(self) -> None:
        if self.closed:
            return
        self._stop_listening()
        self._redraw.update(self.turn.edited)  # the end shows each edited role whole, as the transcript does
        if self._redraw:
            self._redraw_now()
        self._close_run()
        # No last sync of the widget's blocks: _finish replaces the widget with the static
        # output at once (that sync was a quarter of a 2,000-tool-call turn's time).
        self._ticker.close(flush=False)
        self.closed = True
        if self._fallback_handle is not None:
            self._fallback_handle.cancel()
            self._fallback_handle = None
        self._redraws.close()  # (nothing left: the end drew each edited role above)
        for block in self.blocks:
            if block.row is not None:
                block.row.end()
            elif block.prompt is not None and block.state.get("state") == "asking" and block.prompt.done:
                self._settled(block, outcome_of(block.prompt.future))
        if self.turn.done:
            cancelling = self._notices.get(CANCELLING)  # the session's keyed "cancelling..." notice
            if cancelling is not None:
                self._notice("info", "Cancel requested; the turn ended "
                             + ("cancelled" if self.turn.stop_reason == "cancelled" else "anyway"), cancelling)
            line = status_line(self.turn, self.session, files_read=self._files_read)
            block = self._new("status")
            block.state = {"type": "status", "text": line, "stop": str(self.turn.stop_reason or ("error" if self.turn.error else ""))}
            block.md, block.text = status_markdown(line), line
        self._finish()

    def _finish(self) -> None:
        """The finished turn becomes a static output in place and the widget closes
        (:mod:`.finished`: a saved notebook then reads everywhere, no widget model). Only the
        steps the saved output keeps are rendered (:class:`.finished.LazySteps`)."""
        chosen = {**(self.widget.expanded if isinstance(self.widget.expanded, dict) else {}), **self._chosen}
        blocks = self.blocks
        # A tool call's row always shows its header: filled without rendering it.
        spans = run_spans([(b.kind, b.row is not None or bool(b.md or b.text)) for b in blocks])

        def step(i: int) -> Step:
            kind, idx = spans[i]
            if len(idx) == 1:  # (a tool call, a notice...: run_of of one block is that block's step)
                block = blocks[idx[0]]
                return self._final_step(block, chosen.get(block.key))
            return run_of(kind, [self._final_step(blocks[j], chosen.get(blocks[j].key)) for j in idx])

        self.sink.update(static_bundle(LazySteps(len(spans), step)), record_metadata(self.turn),
                         display_id=self.display_id)
        self.widget.retire()

    @staticmethod
    def _final_step(block: Block, chosen: Any) -> Step:
        forms = block.refresh()
        if forms is not None:  # a tool call: its forms as the row stands, looked up once
            return Step(block.fallback_html(chosen, forms), forms.md, forms.text)
        return Step(block.fallback_html(chosen) if block.md else Html(""), block.md, block.text,
                    source=block.text if block.kind == "text" else None)


def view_for(turn: tm.Turn, sink: DisplaySink, *, frontend: Frontend | None = None, widgets: bool = True,
             **kwargs: Any) -> Any:
    """The live view a frontend needs: one output (a widget) for notebooks,
    :class:`.turnview.TurnView` (markdown displays, or append-only) otherwise."""
    fe = frontend if frontend is not None else Frontend(widgets=widgets)
    if fe.widgets and fe.updates and widgets:
        return TurnOutput(turn, sink, frontend=fe, **kwargs)
    return TurnView(turn, sink, frontend=fe, **kwargs)

