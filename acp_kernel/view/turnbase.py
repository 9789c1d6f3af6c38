"""What the two live views of a turn share: event dispatch, threads, the ticker.

:class:`.turnview.TurnView` (markdown displays, or append-only for terminal
frontends) and :class:`.turnoutput.TurnOutput` (the turn as one widget) read
the same events in the same way; they differ only in what an event becomes.
This base does the reading (subscription and replay in the cell's context,
the renderer-error guard, hopping onto the loop, the rate-limited flush),
dispatches each event through one table keyed by its kind (:data:`HANDLERS`,
see :mod:`.eventtable`) and calls a subclass's hooks for the output.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from ..client import turn as tm
from ..client.record import KEY as RECORD_KEY
from ..safe import Markdown
from ..services import events as se
from .coalesce import Coalescer
from .eventtable import unhandled
from .frontend import Frontend
from .markdown import BlockSplitter
from .sink import CellContext, DisplaySink
from .toolcall import ToolCallRow
from .transcript import (
    LINES,
    completed_markdown,
    completed_plain,
    prompt_tool_call_id,
    resolved_markdown,
    resolved_plain,
    status_line,
    url_elicitation_markdown,
    url_elicitation_plain,
)


def record_metadata(turn: tm.Turn) -> dict[str, Any]:
    """The finished turn's output metadata: its record (:mod:`acp_kernel.client.record`),
    which a saved notebook keeps with the cell."""
    record = turn.record
    return {RECORD_KEY: record} if record is not None else {}


log = logging.getLogger(__name__)


def notice_icon(level: str) -> str:
    """The plain-text prefix of a notice."""
    return {"error": "[error] ", "warning": "[warning] "}.get(level, "")


def outcome_of(fut: asyncio.Future[Any]) -> Any:
    """A settled prompt's outcome; ``None`` when it was cancelled or failed."""
    return None if fut.cancelled() or fut.exception() is not None else fut.result()


class TurnBase:
    """Reads one turn's events and hands them to the subclass's hooks.

    A subclass sets up its own state after ``super().__init__`` and then
    calls :meth:`_subscribe`. Hooks: ``_close_run``, ``_open_text``,
    ``_other_role``, ``_open_other``, ``_add_other``, ``_message_edit``, ``_flush_now``,
    ``_line``, ``_notice``, ``_notice_event``, ``_plan_event``,
    ``_new_row``, ``_permission``, ``_elicitation``, ``_show_error``,
    ``_close``.
    """

    def __init__(self, turn: tm.Turn, sink: DisplaySink, *, session: Any, rate_hz: float, frontend: Frontend) -> None:
        self.turn = turn
        self.sink = sink
        self.session = session
        self.frontend = frontend
        try:
            self._loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            self._loop = None
        self._ticker = Coalescer(self._flush, rate_hz)
        self._splitter = BlockSplitter()
        self._in_text = False  # agent message text is the open run
        self.rows: dict[str, ToolCallRow] = {}  # tool call id -> row
        self._terminals: dict[str, se.TerminalStarted] = {}
        self._asked: set[str] = set()  # tool calls whose permission was asked in this view
        self._files_read = 0
        self.closed = False
        self.errors = 0
        self._unsubscribe: Callable[[], None] | None = None
        # The view's work runs in the context of the cell that made it: widget
        # comm messages (and IPython's displays) take their parent from there
        # (see CellContext). A sink that has its own (IPythonSink) is used.
        self._run: Callable[..., Any] = getattr(sink, "run_in_context", None) or CellContext().run

    def _subscribe(self) -> None:
        """Replay the events already in the turn, then follow it."""
        run = self._run
        for event in list(self.turn.events):
            run(self._on_event, event)
        self._unsubscribe = self.turn.subscribe(self._heard, runs=self._heard_tools)
        if self.turn.done:
            self.close()

    def _stop_listening(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None

    # -- plumbing -----------------------------------------------------------

    def _call_soon(self, fn: Callable[..., None], *args: Any) -> None:
        """Run on the loop thread, in the cell's context (widget messages may come from another thread)."""
        loop = self._loop
        if loop is None or loop.is_closed():
            self._run(fn, *args)
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            self._run(fn, *args)
        else:
            loop.call_soon_threadsafe(self._run, fn, *args)

    def _heard(self, event: Any) -> None:
        """A turn event, as it arrives. The stream's bulk, agent text while its
        run is open, only feeds the splitter (no output, so no need to enter the
        cell's context: the ticker's flush does); everything else goes through
        :meth:`_on_event` in the cell's context."""
        if type(event) is tm.Chunk and self._in_text and event.role == "agent" and not self.closed:
            self._chunk(event)  # with its run open: the splitter and the ticker only
            return
        self._run(self._on_event, event)

    def _heard_tools(self, events: list[tm.ToolCallEvent]) -> None:
        """The tool call events of one read (most of a busy turn): one entry into the
        cell's context for all of them, each as :meth:`_on_event` takes it."""
        if not self.closed:
            self._run(self._on_tools, events)

    def _on_tools(self, events: list[tm.ToolCallEvent]) -> None:
        ticker = self._ticker
        ticker.hold()  # one poke for the run
        try:
            for event in events:
                if self.closed:
                    return
                try:
                    self._tool_call(event)
                except Exception as exc:
                    self._failed(exc, event)
        finally:
            ticker.release()

    def _on_event(self, event: Any) -> None:
        if self.closed:
            return
        try:
            if event is None:
                self.close()
                return
            handler = HANDLERS.get(type(event))
            if handler is not None:
                handler(self, event)
            else:
                self._line(*unhandled(event, type(self).__name__))
        except Exception as exc:
            self._failed(exc, event)

    def _failed(self, exc: Exception, event: Any) -> None:
        """A handler raised: logged, and the first few shown in the cell; the view goes on."""
        self.errors += 1
        log.exception("turn view failed on %r", type(event).__name__, exc_info=exc)
        if self.errors <= 3:
            try:
                self._show_error(f"(renderer error: {type(exc).__name__}: {exc})")
            except Exception:
                log.debug("could not show the renderer error", exc_info=True)

    def _watch(self, prompt: Any, settled: Callable[[Any], None]) -> None:
        """Call ``settled(outcome)`` on the loop once the prompt's future settles."""
        fut = prompt.future

        def done(f: asyncio.Future[Any]) -> None:
            self._call_soon(settled, outcome_of(f))

        if fut.done():
            done(fut)
        else:
            fut.add_done_callback(done)

    def _flush(self) -> None:
        """The coalesced work (the ticker's callback), in the cell's context."""
        self._run(self._flush_now)

    # -- events -------------------------------------------------------------

    def _chunk(self, ev: tm.Chunk) -> None:
        if not ev.text:
            return
        if ev.role == "agent":
            if not self._in_text:
                self._close_run()
                self._open_text()
                self._in_text = True
            self._splitter.feed(ev.text)
        else:
            if self._other_role() != ev.role:
                self._close_run()
                self._open_other(ev.role)
            self._add_other(ev.text)
        self._ticker.poke()

    def _tool_call(self, ev: tm.ToolCallEvent) -> None:
        call = ev.call
        row = self.rows.get(call.id)
        if row is None:
            row = self._new_row(call)
        terminals = self._terminals
        for tid in call.terminal_ids if terminals else ():  # (none started: nothing to attach, nothing to read)
            started = terminals.get(tid)
            if started is not None and tid not in row.feeds:
                row.attach(started)
        row.touch()

    def _terminal_exited(self, ev: se.TerminalExited) -> None:
        for row in self.rows.values():
            if ev.terminal_id in row.feeds:
                row.terminal_exited(ev)

    def _resolved(self, ev: se.PermissionResolved) -> None:
        if not (ev.by in ("user", "cancelled") and ev.tool_call_id in self._asked):
            self._line(resolved_markdown(ev), resolved_plain(ev))

    def _file_read(self, ev: se.FileRead) -> None:
        self._files_read += 1  # counted in the status line

    def _terminal_started(self, ev: se.TerminalStarted) -> None:
        self._terminals[ev.terminal_id] = ev
        if ev.note:
            self._notice("info", ev.note)
        for row in self.rows.values():
            if ev.terminal_id in row.call.terminal_ids and ev.terminal_id not in row.feeds:
                row.attach(ev)

    def _asked_call(self, prompt: se.PermissionPrompt) -> tuple[tm.ToolCall | None, str]:
        """The tool call a permission prompt is about (noted as asked here), and
        what actually runs or is touched, as the broker identified it (the
        title is the agent's word)."""
        tid = prompt_tool_call_id(prompt)
        if tid:
            self._asked.add(tid)
        call = self.turn.tool_calls.get(tid) if tid else None
        raw_input = getattr(getattr(prompt.request, "tool_call", None), "raw_input", None)
        detail = getattr(prompt, "command", "") or tm.command_of(raw_input if raw_input is not None else (call.raw_input if call else None))
        return call, detail

    def _url_elicitation(self, prompt: se.UrlElicitationPrompt) -> None:
        """A page to open. Only the turn widget can show it (:class:`.turnoutput.TurnOutput`
        overrides this); a view without one declines it at once, host and address as text."""
        prompt.decline()
        outcome = {"action": "decline"}
        self._line(url_elicitation_markdown(prompt, outcome, answered=True),
                   url_elicitation_plain(prompt, outcome, answered=True))

    def _elicitation_completed(self, ev: se.ElicitationCompleted) -> None:
        self._line(completed_markdown(ev), completed_plain(ev))

    # -- hooks with one meaning for both -------------------------------------

    def _line(self, md: Markdown, text: str) -> Any:
        raise NotImplementedError

    def _notice(self, level: str, text: str) -> Any:
        raise NotImplementedError

    # -- hooks each subclass draws its own way (listed in the class docstring) ----

    def _close_run(self) -> None:
        raise NotImplementedError

    def _open_text(self) -> None:
        raise NotImplementedError

    def _other_role(self) -> str | None:
        raise NotImplementedError

    def _open_other(self, role: str) -> None:
        raise NotImplementedError

    def _add_other(self, text: str) -> None:
        raise NotImplementedError

    def _message_edit(self, ev: tm.MessageEdit) -> None:
        raise NotImplementedError

    def _flush_now(self) -> None:
        raise NotImplementedError

    def _notice_event(self, ev: Any) -> None:
        raise NotImplementedError

    def _plan_event(self) -> None:
        raise NotImplementedError

    def _new_row(self, call: tm.ToolCall) -> ToolCallRow:
        raise NotImplementedError

    def _permission(self, prompt: se.PermissionPrompt) -> None:
        raise NotImplementedError

    def _elicitation(self, prompt: se.ElicitationPrompt) -> None:
        raise NotImplementedError

    def _show_error(self, text: str) -> None:
        raise NotImplementedError

    def _close(self) -> None:
        raise NotImplementedError

    # -- the end --------------------------------------------------------------

    def flush(self) -> None:
        """Send what the rate limit is holding back, now (e.g. before the
        caller blocks, or in tests)."""
        if not self.closed:
            self._ticker.flush_now()

    def close(self) -> None:
        """Flush everything final (see the subclass's ``_close``). Idempotent."""
        if self.closed:
            return
        self._run(self._close)

    @property
    def status(self) -> str:
        return status_line(self.turn, self.session, files_read=self._files_read)


def _line_of(line: Callable[[Any], tuple[Markdown, str]]) -> Callable[[TurnBase, Any], None]:
    return lambda view, ev: view._line(*line(ev))


#: The live views' table: one handler per kind of :data:`acp_kernel.client.turn.TURN_EVENTS`
#: (one-line kinds come from :data:`.transcript.LINES`); each calls the view's
#: method, so a subclass's hook is the one that runs.
HANDLERS: dict[type, Callable[[TurnBase, Any], None]] = {
    tm.Chunk: lambda view, ev: view._chunk(ev),
    tm.MessageEdit: lambda view, ev: view._message_edit(ev),
    tm.ToolCallEvent: lambda view, ev: view._tool_call(ev),
    tm.PlanEvent: lambda view, ev: view._plan_event(),
    tm.StateEvent: lambda view, ev: None,  # mode and usage go into the status line at the end
    se.Notice: lambda view, ev: view._notice_event(ev),
    se.TerminalStarted: lambda view, ev: view._terminal_started(ev),
    se.TerminalExited: lambda view, ev: view._terminal_exited(ev),
    se.PermissionPrompt: lambda view, ev: view._permission(ev),
    se.PermissionResolved: lambda view, ev: view._resolved(ev),
    se.ElicitationPrompt: lambda view, ev: view._elicitation(ev),
    se.UrlElicitationPrompt: lambda view, ev: view._url_elicitation(ev),
    se.ElicitationCompleted: lambda view, ev: view._elicitation_completed(ev),
    se.FileRead: lambda view, ev: view._file_read(ev),
    **{kind: _line_of(line) for kind, line in LINES.items()},
}
