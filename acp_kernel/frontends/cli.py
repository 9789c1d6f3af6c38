"""``acp-kernel``: the command line (headless prompts, agent list, demo agent).

Exit codes of ``acp-kernel prompt`` (distinct so scripts can tell them apart):
0 end_turn, 1 agent failure, 2 usage or config error, 3 authentication
required, 4 refusal, 5 cancelled (by the agent), 6 max_tokens or
max_turn_requests; 130 SIGINT (Ctrl-C), 143 SIGTERM, 129 SIGHUP (the turn is
cancelled and the agent's process tree ended first).

Everything the agent wrote is cleaned of terminal control and escape
sequences before it is printed (:mod:`acp_kernel.termsafe`); a permission
question shows the real command or paths from the tool call's ``rawInput``,
not only the agent's title.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import dataclasses
import functools
import json
import os
import re
import shlex
import signal
import sys
import time
from typing import Any, NoReturn, Sequence, TextIO

# What a permission question shows, and form answers typed on a terminal: shared with stdin questions.
from .process import freeze_start_up, tune_own_process
from .ask import RAW_INPUT_SHOWN, action_details, check_answer, field_question, parse_answer, permission_question  # noqa: F401
from .._version import VERSION
from ..termsafe import clean, json_safe, json_safe_utf8, line, lines_clean, scan
from ..errors import AcpError, AuthRequired

EXIT_OK, EXIT_AGENT, EXIT_USAGE, EXIT_AUTH, EXIT_REFUSAL, EXIT_CANCELLED, EXIT_LIMIT = range(7)
STOP_EXIT = {
    "end_turn": EXIT_OK,
    "refusal": EXIT_REFUSAL,
    "cancelled": EXIT_CANCELLED,
    "max_tokens": EXIT_LIMIT,
    "max_turn_requests": EXIT_LIMIT,
}


#: Exit codes when a signal ends the run: 128 + the signal number, as shells report it.
EXIT_SIGNAL = {signal.SIGINT: 130, signal.SIGTERM: 143, signal.SIGHUP: 129}
_STOP_SIGNALS = tuple(EXIT_SIGNAL)


# -- pure: events as JSON or as clean lines ------------------------------------


def _jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {}
        for f in dataclasses.fields(value):
            if f.name in ("future", "loop", "terminal", "request") or f.name.startswith("_"):
                continue
            out[f.name] = _jsonable(getattr(value, f.name))
        return out
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return repr(value)


@functools.cache
def _event_kinds() -> tuple[Any, ...]:
    """The turn's event classes, imported on the first event (start-up time), not on each
    (an import statement in a function cost a microsecond per event)."""
    from ..client.turn import Chunk, Notice, PlanEvent, StateEvent, ToolCallEvent, UnknownUpdate  # lazy: start-up time

    return Chunk, Notice, PlanEvent, StateEvent, ToolCallEvent, UnknownUpdate


def event_json(event: Any) -> dict[str, Any]:
    """One event as one JSON object for ``--format json``."""
    Chunk, Notice, PlanEvent, StateEvent, ToolCallEvent, UnknownUpdate = _event_kinds()

    kind = type(event)
    if kind is Chunk:
        return {"type": event.role, "text": event.text} if event.text else {"type": event.role, "content": event.content}
    if kind is ToolCallEvent:
        return _tool_json(event, event.wire)
    if kind is PlanEvent:
        return {"type": "plan", "entries": event.entries}
    if kind is StateEvent:
        return {"type": event.kind, "update": event.raw}
    if kind is UnknownUpdate:
        return {"type": "unknown_update", "kind": event.kind, "update": event.raw}
    if kind is Notice:
        return {"type": "notice", "level": event.level, "text": event.text}
    return {"type": _snake(kind.__name__), **_jsonable(event)}


def _tool_json(event: Any, update: Any) -> dict[str, Any]:
    """A tool call event's JSON object (:func:`_tool_struct` as a dict), its ``update`` as
    given (the agent's JSON text, or the dict for json to write)."""
    return _struct_dict(_tool_struct(event, update))


def _snake(name: str) -> str:
    return "".join("_" + c.lower() if c.isupper() and i else c.lower() for i, c in enumerate(name))


def _block(text: Any) -> str:
    """Multi-line agent-derived text, cleaned, continuation lines indented:
    a newline in it cannot start a line that looks like one of ours."""
    return clean(str(text)).replace("\n", "\n  ")


#: ACP's tool kinds and statuses: words with nothing to clean (any other is cleaned).
_PLAIN_WORDS = frozenset({"read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode",
                          "other", "pending", "in_progress", "completed", "failed", "cancelled"})


def _tool_line(event: Any) -> str | None:
    c = event.call
    if event.new or c.final:  # its start and its end; progress in between is not a line
        kind, status = c.kind or "other", c.status
        return (f"[tool] {kind if kind in _PLAIN_WORDS else line(kind)}: {line(c.title or c.id)} "
                f"({status if status in _PLAIN_WORDS else line(status)})")
    return None


#: What the text CLI shows under a finished tool call: diff lines per diff, lines of output.
DETAIL_DIFF_LINES = 40
DETAIL_OUTPUT_LINES = 12


def _quiet_read(call: Any) -> bool:
    """A read that completed: its line says what was read, and nothing is printed under it
    unless asked (``--show-reads``). What a read returns is the file, which the agent needed
    and the person at the terminal did not ask for (agents' own UIs, Claude Code's, Codex's,
    Gemini CLI's, show a read as one line; acpx has ``--suppress-reads``). A read that failed
    or was cancelled still shows what it said."""
    return call.kind == "read" and call.status == "completed"


@functools.cache
def _detail_parts() -> tuple[Any, Any, Any]:
    """:func:`tool_detail`'s renderers, imported on the first call (start-up time) and not on
    each (a function-level import cost 7 us of a 17 us call)."""
    from ..view.diff import diff_from_content  # lazy: start-up time
    from ..view.transcript import snapshot, tool_call_final_lines  # lazy: start-up time

    return diff_from_content, snapshot, tool_call_final_lines


def tool_detail(call: Any, terminals: dict[str, Any], *, colour: bool = False) -> str:
    """What a terminal user sees under a finished tool call (as Zed's or acpx's output
    shows it): each diff (unified, cut at :data:`DETAIL_DIFF_LINES` lines) and the tail of
    its output with the exit code (a client terminal's, or what the agent sent), every
    line cleaned and indented. ``terminals``: terminal id -> ``TerminalStarted``."""
    diff_from_content, snapshot, tool_call_final_lines = _detail_parts()
    out: list[str] = []
    for item in call.diffs:
        view = diff_from_content(item, max_lines=DETAIL_DIFF_LINES)
        for op, text in view.lines:
            cleaned = clean(text, oneline=True)
            tint = {"+": "32", "-": "31", "@": "36"}.get(op) if colour else None
            out.append("    " + (f"\x1b[{tint}m{cleaned}\x1b[0m" if tint else cleaned))
        if view.truncated:
            out.append(f"    ... the diff goes on (+{view.added} -{view.removed} in all)")
    snaps = {tid: snapshot(started) for tid, started in terminals.items() if tid in call.terminal_ids} if terminals else {}
    body = tool_call_final_lines(call, snaps)
    if len(body) > DETAIL_OUTPUT_LINES:
        body = [f"    ... {len(body) - DETAIL_OUTPUT_LINES} lines above"] + body[-DETAIL_OUTPUT_LINES:]
    if body:  # indented by four already; each line cleaned (one scan says when none needs it)
        text = "\n".join(body)
        out.append(text if lines_clean(text) else "\n".join([clean(ln, oneline=True) for ln in body]))
    return "\n".join(out)


def _plan_line(event: Any) -> str:
    marks = {"completed": "x", "in_progress": "~"}
    return "[plan] " + "; ".join(
        f"[{marks.get(e.get('status'), ' ')}] {line(e.get('content', ''))}" for e in event.entries)


def _state_line(event: Any) -> str | None:
    raw = event.raw if isinstance(event.raw, dict) else {}
    if event.kind == "current_mode_update":
        return f"[mode] {line(str(raw.get('currentModeId', '')))}"
    if event.kind == "usage_update":
        return f"[usage] {line(str(raw.get('used', '?')))} of {line(str(raw.get('size', '?')))} tokens"
    return None  # commands, config options, session info: state the CLI keeps, not news


def _terminal_started(event: Any) -> str:
    via = " (shell line run through the shell)" if event.via_shell else ""
    return f"[terminal] {line(shlex.join(str(a) for a in event.argv))}{via}"


def _terminal_exited(event: Any) -> str:
    status = event.exit_status
    how = f"signal {status.signal}" if status.signal else f"status {status.exit_code}"
    return f"[terminal] {line(event.terminal_id)} ended ({line(event.how)}, {line(how)})"


def _url_lines(event: Any) -> str:
    """A page the agent asks to open (the CLI declines it before it is an event; a
    reader of the events is told what it was): the host, the message, the address."""
    reads = f" (it reads {line(event.host_unicode)})" if event.host_unicode else ""
    return (f"[open page] the agent asks you to open a page on {line(event.host)}{reads}\n"
            f"  {_block(event.message)}\n  address: {line(event.url)}")


def _permission_line(event: Any) -> str:
    return (f"[permission] {line(event.title or event.tool_call_id)}: "
            f"{line(event.option_kind or 'cancelled')} ({line(event.by)})")


def _edit_line(event: Any) -> str | None:
    """The agent changed an earlier message: stdout already has what was streamed
    (a terminal cannot take it back), so stderr says what the message reads now."""
    if not event.changed:
        return None
    if event.replaced:
        return (f"[message] the agent replaced an earlier {event.noun} ({line(event.message_id)}); "
                f"it now reads:\n  {_block(event.text)}")
    return f"[message] the agent added to an earlier {event.noun} ({line(event.message_id)}):\n  {_block(event.text)}"


#: What ``--format text`` says on stderr of each turn event kind, by class name (no
#: import of the turn module at start-up). Every kind of ``client.turn.TURN_EVENTS``
#: has an entry, a silent one explicitly ``None``-returning (tests/view/test_event_kinds.py).
DESCRIBE: dict[str, Any] = {
    "Chunk": lambda e: None,  # agent text goes to stdout; thoughts and user echoes are not printed
    "MessageEdit": _edit_line,
    "ToolCallEvent": _tool_line,
    "PlanEvent": _plan_line,
    "StateEvent": _state_line,
    "UnknownUpdate": lambda e: f"[update] unknown kind {line(repr(e.kind))} kept",
    "Notice": lambda e: f"[{line(e.level)}] {_block(e.text)}",
    "TerminalStarted": _terminal_started,
    "TerminalExited": _terminal_exited,
    "FileRead": lambda e: f"[fs] read {line(e.path)}",
    "FileWritten": lambda e: f"[fs] written {line(e.path)}",
    "PermissionResolved": _permission_line,
    "PermissionPrompt": lambda e: None,  # asked by the asker
    "ElicitationPrompt": lambda e: None,  # asked by the asker
    "UrlElicitationPrompt": _url_lines,
    "ElicitationCompleted": lambda e: f"[open page] the agent says the page on {line(e.prompt.host)} is done",
}


def describe(event: Any) -> str | None:
    """A one-line account of an event for stderr in ``--format text`` (None: nothing to say).

    Every agent-derived field is cleaned (:mod:`acp_kernel.termsafe`); a kind not in
    :data:`DESCRIBE` says its name rather than nothing.
    """
    say = DESCRIBE.get(type(event).__name__)
    if say is None:
        return f"[event] {line(type(event).__name__)}"
    return say(event)


# -- I/O: streams that survive closed pipes, lines read without a thread --------


class _Out:
    """A text stream that never raises: the first failed write (a closed pipe
    as in ``2>&1 | head -1``, a hung-up terminal) marks it broken, points its
    file descriptor at /dev/null (so exit does not complain) and drops the rest."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.broken = False
        self._binary: Any = None  # the stream's binary buffer when it writes UTF-8 (None: not looked for yet)

    def write(self, text: str) -> None:
        if self.broken or not text:
            return
        try:
            try:
                self.stream.write(text)
            except UnicodeEncodeError:
                enc = getattr(self.stream, "encoding", None) or "utf-8"
                self.stream.write(text.encode(enc, "replace").decode(enc))
            self.stream.flush()
        except (OSError, ValueError):  # BrokenPipeError, EIO, a closed file
            self._break()

    def write_utf8(self, data: bytes) -> None:
        """UTF-8 text as bytes: into the stream's binary buffer when the stream writes UTF-8
        (after its text layer, flushed), so a JSON line of a file read is not decoded and
        encoded again; else as text."""
        if self.broken or not data:
            return
        if self._binary is None:
            self._binary = _utf8_buffer(self.stream) or False
        if self._binary is False:
            self.write(data.decode())
            return
        try:
            self.stream.flush()  # text written to the stream by anyone else goes first
            self._binary.write(data)
            self._binary.flush()
        except (OSError, ValueError):  # as write
            self._break()

    def _break(self) -> None:
        """A write failed: drop the rest, and point the descriptor at /dev/null."""
        self.broken = True
        _to_devnull(self.stream)

    def isatty(self) -> bool:
        try:
            return not self.broken and self.stream.isatty()
        except (OSError, ValueError):
            return False


def _utf8_buffer(stream: TextIO) -> Any:
    """The binary buffer under a text stream that writes UTF-8, else None. (Its error handler
    does not matter: what goes there is valid UTF-8, no lone surrogate left: json_safe.)"""
    import codecs  # lazy: start-up time

    buffer = getattr(stream, "buffer", None)
    try:
        utf8 = codecs.lookup(stream.encoding).name == "utf-8"
    except (AttributeError, LookupError, TypeError):
        return None
    return buffer if utf8 and buffer is not None else None


def _to_devnull(stream: TextIO) -> None:
    try:
        fd = stream.fileno()
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, fd)
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


class _Lines:
    """Lines typed on the terminal, read when the event loop says fd 0 is
    readable (``add_reader``): no thread that could block exit, and a wait
    that is cancelled like any other await."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buf = b""
        self.closed = False

    def discard_typeahead(self) -> None:
        """Drop what was typed before the question was shown: an answer must
        not come from keys pressed before the person could read it."""
        self.buf = b""
        try:
            import termios

            termios.tcflush(self.fd, termios.TCIFLUSH)
        except (ImportError, OSError):
            pass

    async def readline(self) -> str | None:
        """The next line, or None at end of input (Ctrl-D, a closed or hung-up stdin)."""
        loop = asyncio.get_running_loop()
        while b"\n" not in self.buf:
            if self.closed:
                return None
            ready: asyncio.Future[None] = loop.create_future()

            def wake(f: asyncio.Future[None] = ready) -> None:
                if not f.done():
                    f.set_result(None)

            try:
                loop.add_reader(self.fd, wake)
            except (OSError, ValueError):
                self.closed = True
                return None
            try:
                await ready
            finally:
                loop.remove_reader(self.fd)
            try:
                data = os.read(self.fd, 4096)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
                self.closed = True
            if not data:
                rest, self.buf = self.buf, b""
                return rest.decode(errors="replace") if rest else None
            self.buf += data
        text, _, self.buf = self.buf.partition(b"\n")
        return text.decode(errors="replace")


class _Printer:
    """Subscribes to a turn and writes it out, as text or as JSON lines.

    Output is gathered and written once per burst of events (a loop
    callback), not once per event: one system call per 32-byte chunk would
    cost more than parsing it. Agent text is cleaned of terminal controls
    (plain colours kept only on a TTY); JSON has C1 and bidi controls escaped.
    """

    def __init__(self, fmt: str, out: _Out, err: _Out, *, colour: bool = False, show_reads: bool = False) -> None:
        self.fmt, self.out, self.err = fmt, out, err
        self.colour = colour
        self.show_reads = show_reads  # text: what a completed read returned, under its line (_quiet_read)
        self.removed = 0
        self._buf: list[Any] = []  # stdout text not written yet (json: as UTF-8)
        #: Not made safe yet (after _buf, before anything else), made safe once per burst
        #: (:meth:`_clean_raw`): agent text (text), or JSON lines as UTF-8 (json: msgspec writes
        #: a chunk's line into it, no str made per chunk).
        self._raw: list[str] = []
        self._jbuf = bytearray()
        #: Tool call events' JSON lines not written yet (json: :meth:`_json_tool`), written into
        #: ``_jbuf`` by one ``encode_lines`` before anything after them.
        self._tools: list[Any] = []
        self._notes: list[str] = []  # stderr lines not written yet (one of the two is empty)
        self._carry = ""
        self._scheduled = False
        self._ended = False
        self._terminals: dict[str, Any] = {}  # terminal id -> TerminalStarted, for the calls' output
        self._detailed: set[str] = set()  # tool calls whose detail was printed

    @property
    def broken(self) -> bool:
        return self.out.broken

    def _emit(self, text: str) -> None:
        if self._notes:  # stderr lines gathered before this text go out first
            self._write_notes()
        if self._raw or self._jbuf or self._tools:
            self._clean_raw()
        self._buf.append(text.encode() if self.fmt == "json" else text)
        self._schedule()

    def _schedule(self) -> None:
        if not self._scheduled:
            self._scheduled = True
            try:
                asyncio.get_running_loop().call_soon(self.flush)
            except RuntimeError:
                self.flush()

    def flush(self) -> None:
        self._scheduled = False
        if self._raw or self._jbuf or self._tools:
            self._clean_raw()
        if self._buf:
            if self.fmt == "json":
                data = b"".join(self._buf)
                self._buf.clear()
                self.out.write_utf8(data)
            else:
                text = "".join(self._buf)
                self._buf.clear()
                self.out.write(text)
        if self._notes:
            self._write_notes()

    def _write_notes(self) -> None:
        data = "".join(self._notes)
        self._notes.clear()
        self.err.write(data)

    def note(self, text: str) -> None:
        """A line for stderr, after what is already buffered for stdout. Lines
        in a row are gathered like stdout's (a tool-call burst is thousands of
        them: one write each woke the reader of a pipe each time); a switch
        between the streams writes what came before, so the order holds."""
        if self._buf or self._raw or self._jbuf or self._tools:
            self.flush()
        self._notes.append(text + "\n")
        if not self._scheduled:
            self._schedule()

    def _emit_raw(self, text: str) -> None:
        """Agent text (text) or a JSON line (json), made safe once per burst, not once per
        chunk (a scan per 32-character chunk cost a third of the text path): a sequence split
        across the chunks of one burst is then seen whole."""
        if self._notes:
            self._write_notes()
        if self.fmt == "json":  # (a lone surrogate the std encoder kept passes: escaped at the flush)
            if self._tools:
                self._write_tools()
            self._jbuf += text.encode(errors="surrogatepass")
        else:
            self._raw.append(text)
        self._schedule()

    def _json_tool(self, event: Any) -> None:
        """A tool call's JSON line (:func:`event_json`), its update as the agent's own JSON text
        (a busy turn is mostly these): the call as it stands now, kept until the burst's lines
        are written at once (:meth:`_write_tools`)."""
        if self._notes:
            self._write_notes()
        self._tools.append(_tool_struct(event, event.wire))
        if not self._scheduled:
            self._schedule()

    def _write_tools(self) -> None:
        """The kept tool call lines into the burst's buffer, by one ``encode_lines`` (one call
        per line cost a third of the JSON path); a burst it cannot write (a lone surrogate)
        is written line by line, as :func:`_encode`."""
        tools = self._tools
        try:
            self._jbuf += _msgspec_encoder().encode_lines(tools)
        except (UnicodeEncodeError, TypeError, ValueError, OverflowError):
            for tool in tools:
                self._jbuf += _tool_bytes(tool)
        tools.clear()

    def _tool_text(self, event: Any) -> str | None:
        """What ``--format text`` says on stderr of a tool call event: its line at its start
        and end (:func:`describe`), then, once, what it did (:func:`tool_detail`; not what a
        completed read returned, unless ``show_reads``: :func:`_quiet_read`)."""
        text = _tool_line(event)
        call = event.call
        if call.final and call.id not in self._detailed:
            self._detailed.add(call.id)
            if not self.show_reads and _quiet_read(call):
                return text
            detail = tool_detail(call, self._terminals, colour=self.colour)
            if detail:
                text = f"{text}\n{detail}" if text else detail
        return text

    def _json_chunk(self, role: str, text: str) -> None:
        """A chunk's JSON line, written by msgspec into the burst's buffer (a str per chunk,
        built and joined, cost four times as much)."""
        if self._notes:
            self._write_notes()
        if self._tools:
            self._write_tools()
        buf = self._jbuf
        start = len(buf)
        prefix = _CHUNK_LINE.get(role) or _chunk_line(role)
        buf += prefix
        try:
            _msgspec_encoder().encode_into(text, buf, -1)
        except (UnicodeEncodeError, TypeError, ValueError, OverflowError):  # a lone surrogate: as _encode
            del buf[start:]
            buf += prefix + _std_encode(text).encode(errors="surrogatepass")
        buf += b"}\n"
        self._schedule()

    def _clean_raw(self) -> None:
        if self._tools:
            self._write_tools()
        if self._jbuf:  # json_safe escapes character by character (lone surrogates too): the join is safe
            self._buf.append(json_safe_utf8(self._jbuf))
            self._jbuf.clear()
            return
        text = self._carry + "".join(self._raw)
        self._raw.clear()
        self._carry = ""
        if text.endswith("\r"):  # maybe half of a "\r\n" split across bursts
            self._carry, text = "\r", text[:-1]
        cleaned, removed = scan(text, colour=self.colour)
        self.removed += removed
        self._buf.append(cleaned)

    def __call__(self, event: Any) -> None:
        if self._ended:
            return  # a late update (after a cancel): the turn keeps it, the end line stays last
        if event is None:
            self._ended = True
            if self._raw or self._jbuf or self._tools:
                self._clean_raw()  # (it may leave a "\r" carried)
            if self._carry:  # a lone "\r" at the very end
                self._carry = ""
                self._emit(clean("\r"))
                self.removed += 1
            self.flush()
            return
        name = type(event).__name__
        if self.fmt == "json":
            if name == "ToolCallEvent":
                self._json_tool(event)
            elif name == "Chunk" and event.text:
                self._json_chunk(event.role, event.text)
            else:
                self._emit_raw(_encode(event_json(event)) + "\n")
            return
        if name == "ToolCallEvent":  # (the most of a busy turn)
            text = self._tool_text(event)
            if text:
                self.note(text)
            return
        if name == "Chunk" and event.role == "agent":
            self._emit_raw(event.text)
            return
        if name in ("PermissionPrompt", "ElicitationPrompt"):
            return  # handled by the asker
        text = describe(event)
        if text:
            self.note(text)
        if name == "TerminalStarted":
            self._terminals[event.terminal_id] = event


_std_encode = json.JSONEncoder(ensure_ascii=False, default=repr).encode


@functools.cache
def _msgspec_encoder() -> Any:
    """msgspec's encoder, made on the first JSON line: the other commands never import
    msgspec (a turn imports it with the protocol anyway)."""
    import msgspec

    return msgspec.json.Encoder(enc_hook=repr)


@functools.cache
def _tool_line_type() -> Any:
    """The JSON line of a tool call event, as msgspec writes it (``type`` first, then these
    fields in order), made on the first tool call (msgspec is imported then). The one place
    its shape is written: :func:`_tool_json` is its dict."""
    import msgspec

    class ToolLine(msgspec.Struct, tag_field="type", tag="tool_call", gc=False):
        new: Any
        id: Any
        title: Any
        kind: Any
        status: Any
        update: Any

    return ToolLine


def _tool_struct(event: Any, update: Any) -> Any:
    """A tool call event's line (:func:`_tool_line_type`): the call as it stands now."""
    c = event.call
    return _tool_line_type()(event.new, c.id, c.title, c.kind, c.status, update)


def _struct_dict(tool: Any) -> dict[str, Any]:
    return {"type": "tool_call", **{name: getattr(tool, name) for name in tool.__struct_fields__}}


def _tool_bytes(tool: Any) -> bytes:
    """One kept tool call line (:func:`_tool_struct`) as bytes; one msgspec cannot write (a
    lone surrogate, from an update read as a dict) is written by json, its update read from
    the agent's JSON text first (json cannot write JSON text)."""
    try:
        return _msgspec_encoder().encode(tool) + b"\n"
    except (UnicodeEncodeError, TypeError, ValueError, OverflowError):
        import msgspec  # lazy: start-up time (imported already: the line is a msgspec struct)

        from ..protocol.framing import payload  # lazy: start-up time

        fields = _struct_dict(tool)
        if type(fields["update"]) is msgspec.Raw:
            fields["update"] = payload(fields["update"])
        return (_std_encode(fields) + "\n").encode(errors="surrogatepass")


def _chunk_line(role: str) -> bytes:
    """The start of a chunk's JSON line, up to its text."""
    return ('{"type":' + json_safe(_encode(role)) + ',"text":').encode()


#: :func:`_chunk_line` of the roles a turn's chunks have.
_CHUNK_LINE = {role: b'{"type":"' + role.encode() + b'","text":' for role in ("agent", "thought", "user")}


def _encode(value: Any) -> str:
    """One event as JSON text (``ensure_ascii=False``: the caller escapes what a
    terminal must not see). msgspec writes it five to ten times faster than
    json; a string it cannot write as UTF-8 (a lone surrogate the agent sent
    as an escape, which json reads) is written by json, as before."""
    try:
        return _msgspec_encoder().encode(value).decode("utf-8")
    except (UnicodeEncodeError, TypeError, ValueError, OverflowError):
        return _std_encode(value)


def json_error(stage: str, headline: str, detail: str = "") -> str:
    """An ``error`` event and the ``end`` that follows it, as JSON lines: how a
    ``--format json`` run that stops before its turn says why (``stage``: usage,
    config; start-up failures say ``start``), so a program reading stdout never has
    to parse stderr. ``headline`` is whole, newlines and all (a config file's path
    may hold one, so its first line is not its headline)."""
    error = {"type": "error", "stage": stage, "headline": headline, "detail": detail}
    end = {"type": "end", "stopReason": None, "error": headline}
    return "".join(json_safe(_encode(e)) + "\n" for e in (error, end))


def _stopped(args: argparse.Namespace, out: _Out, err: _Out, stage: str, message: str,
             shown: str | None = None) -> int:
    """A run stopped before its turn: said on stderr (``shown``, else ``message``), and with
    ``--format json`` as events on stdout too; the usage exit status."""
    if args.format == "json":
        out.write(json_error(stage, message))
    err.write(f"acp-kernel: {shown if shown is not None else message}\n")
    return EXIT_USAGE


class _Asker:
    """Asks permission and form questions on the terminal, one at a time.

    Questions go to stderr and answers come from stdin (a TTY). A question
    the agent or a cancel answers meanwhile stops waiting at once; end of
    input (Ctrl-D, a closed terminal) or a broken stderr rejects/cancels.
    """

    def __init__(self, printer: _Printer, lines: _Lines) -> None:
        self.printer = printer
        self.lines = lines
        self.turn: Any = None
        self._queue: list[Any] = []
        self._task: asyncio.Task[None] | None = None

    def __call__(self, event: Any) -> None:
        if type(event).__name__ in ("PermissionPrompt", "ElicitationPrompt"):
            self._queue.append(event)
            if self._task is None or self._task.done():
                self._task = asyncio.ensure_future(self._work())

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
        for prompt in self._queue:
            prompt.cancel()
        self._queue.clear()

    async def _work(self) -> None:
        while self._queue:
            prompt = self._queue.pop(0)
            if prompt.done:
                continue
            try:
                if type(prompt).__name__ == "PermissionPrompt":
                    await self._permission(prompt)
                else:
                    await self._form(prompt)
            finally:
                if not prompt.done:
                    prompt.cancel()

    async def _read(self, prompt: Any) -> str | None:
        """A line, or None at end of input; raises _Answered if the prompt
        was answered (cancelled) while waiting."""
        read = asyncio.ensure_future(self.lines.readline())
        try:
            await asyncio.wait({read, prompt.future}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not read.done():
                read.cancel()
                # Its reader must be gone before the next question adds one.
                await asyncio.wait({read})
        if read.cancelled():
            raise _Answered
        return read.result()

    def _say(self, text: str) -> bool:
        """Write to stderr (after the answer so far); False when nobody can see it."""
        self.printer.flush()
        self.printer.err.write(text)
        return not self.printer.err.broken

    _raw = _say

    async def _permission(self, prompt: Any) -> None:
        calls = getattr(self.turn, "tool_calls", {}) if self.turn is not None else {}
        tcid = getattr(getattr(prompt.request, "tool_call", None), "tool_call_id", None)
        self.lines.discard_typeahead()
        if not self._say(permission_question(prompt, calls.get(tcid))):
            prompt.reject()
            return
        self._raw("choose a number (empty = reject): ")
        try:
            answer = await self._read(prompt)
        except _Answered:
            self._say("\n(answered without you: the turn was cancelled)\n")
            return
        if answer is None:
            self._say("\n(end of input: rejected)\n")
            prompt.reject()
            return
        answer = answer.strip()
        options = prompt.options
        if answer.isdigit() and 1 <= int(answer) <= len(options):
            prompt.answer(options[int(answer) - 1]["optionId"])
        else:
            prompt.reject()

    async def _form(self, prompt: Any) -> None:
        from ..view.form import UNSET, validate  # lazy: start-up time

        self.lines.discard_typeahead()
        head = f"\n[form] the agent asks: {_block(prompt.message)}\n"
        if not self._say(head):
            prompt.decline()
            return
        try:
            self._raw("answer it? [y/N] ")
            first = await self._read(prompt)
            if first is None:
                self._say("\n(end of input: cancelled)\n")
                prompt.cancel()
                return
            if first.strip().lower() not in ("y", "yes"):
                self._say("(declined)\n")
                prompt.decline()
                return
            values: dict[str, Any] = {}
            for name, schema in prompt.fields.items():
                required = name in prompt.required
                while True:
                    self._raw(field_question(name, schema, required))
                    text = await self._read(prompt)
                    if text is None:
                        self._say("\n(end of input: cancelled)\n")
                        prompt.cancel()
                        return
                    value, problems = check_answer(name, schema, required, text)
                    if not problems:
                        break
                    self._say("  ! " + line("; ".join(problems)) + "\n")
                if value is not UNSET:
                    values[name] = value
            content, problems = validate(prompt.fields, prompt.required, values)
            if problems:  # cannot happen field by field, but never send a bad answer
                self._say("  ! " + line("; ".join(problems)) + " (declined)\n")
                prompt.decline()
                return
            try:
                prompt.accept(content)
            except ValueError as exc:
                self._say("  ! " + line(str(exc)) + " (declined)\n")
                prompt.decline()
        except _Answered:
            self._say("\n(answered without you: the turn was cancelled)\n")


class _Answered(AcpError):
    """The question was answered (cancelled) while the person was asked."""


# -- signals --------------------------------------------------------------------


class _Stopper:
    """SIGINT, SIGTERM and SIGHUP, in every state of a run.

    The first signal cancels the run's task (agent start, session set-up,
    the turn, a question): the turn is cancelled per the protocol, the agent
    closed, and the run exits 128 + the signal number. A signal while the
    client is already closing, or a second one, kills the agent's process
    tree at once (SIGKILL), so closing cannot be held up.
    """

    def __init__(self, err: _Out) -> None:
        self.err = err
        self.signum: int | None = None
        self.closing = False
        self.client: Any = None
        self.task: asyncio.Task[Any] | None = None

    def install(self) -> None:
        loop = asyncio.get_running_loop()
        self.task = asyncio.current_task()
        for sig in _STOP_SIGNALS:
            try:
                loop.add_signal_handler(sig, self.on_signal, sig)
            except (NotImplementedError, RuntimeError, ValueError):  # pragma: no cover - Windows
                pass

    @property
    def exit_code(self) -> int:
        return EXIT_SIGNAL.get(self.signum, 128 + (self.signum or 0))  # type: ignore[call-overload]

    def on_signal(self, signum: int) -> None:
        first = self.signum is None
        if first:
            self.signum = signum
            name = signal.Signals(signum).name
            self.err.write(f"\nacp-kernel: {name}: stopping the turn and the agent\n")
        if self.closing or not first:
            if self.client is not None:
                self.client.kill_now()
            return
        if self.task is not None:
            self.task.cancel()


class _Signalled(AcpError):
    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


# -- the prompt command ---------------------------------------------------------


async def run_prompt(args: argparse.Namespace, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    from ..client.registry import ConfigError, adhoc_agent, load_config  # lazy: start-up time
    from ..client.session import Client  # lazy: start-up time

    out_, err_ = _Out(out), _Out(err)
    stopper = _Stopper(err_)
    stopper.install()
    try:
        config = load_config(missing_ok=False)
        if args.agent_command is not None:
            try:
                spec = adhoc_agent(args.agent_command)
            except AcpError as exc:
                raise AcpError(f"--agent-command: {exc}") from None
        else:
            spec = config.agent(args.agent or config.default_agent)
    except (ConfigError, AcpError) as exc:
        return _stopped(args, out_, err_, "config", str(exc), _block(exc))
    if args.prompt:
        text = " ".join(args.prompt)
    else:
        piped: str | None = getattr(args, "stdin_text", None)
        text = piped if piped is not None else ("" if _isatty(sys.stdin) else _read_stdin())
    text, replaced = prompt_text(text)
    if replaced:
        err_.write(f"acp-kernel: the prompt held {replaced} byte(s) that are not valid "
                   f"{_input_encoding()}; each was replaced with U+FFFD (\ufffd)\n")
    if not text.strip():
        return _stopped(args, out_, err_, "usage", "no prompt given (pass it as arguments or on stdin)")
    policy = args.permissions or config.permissions or "ask"
    interactive = _isatty(sys.stdin) and policy in ("ask", "allow-reads")
    settings = config.client_settings(policy)
    # One turn and exit: the schema is imported only if the agent asks something that needs it.
    client = Client(spec, cwd=args.cwd, settings=settings, mcp_servers=config.mcp_servers, interactive=interactive,
                    warm_schema=False)
    stopper.client = client
    colour = args.format == "text" and out_.isatty() and "NO_COLOR" not in os.environ
    printer = _Printer(args.format, out_, err_, colour=colour, show_reads=args.show_reads)
    asker = _Asker(printer, _Lines(sys.stdin.fileno())) if interactive else None
    code = EXIT_AGENT
    try:
        code = await _converse(client, text, args, printer, asker, stopper)
    except asyncio.CancelledError:
        if stopper.signum is None:
            raise
        task = asyncio.current_task()
        if task is not None:
            task.uncancel()
    finally:
        if asker is not None:
            asker.close()
        stopper.closing = True
        await client.close()
        stopper.client = None  # closed: its pids may belong to others from now on
        if printer.removed and args.format == "text":
            err_.write(f"acp-kernel: {printer.removed} terminal control character(s) or escape sequence(s) "
                       "in the agent's text were removed or shown as symbols\n")
        if stopper.signum is not None:
            err_.write(f"acp-kernel: stopped by {signal.Signals(stopper.signum).name}; the agent is closed\n")
    return stopper.exit_code if stopper.signum is not None else code


async def _converse(client: Any, text: str, args: argparse.Namespace, printer: _Printer,
                    asker: _Asker | None, stopper: _Stopper) -> int:
    """Start the agent, open a session, run one turn; the exit code."""
    from ..client.discovery import first_start_download  # lazy: start-up time
    from ..client.lifecycle import Unavailable, open_session, start_agent  # lazy: start-up time
    from ..client.startup import starting_line  # lazy: start-up time

    err = printer.err
    spec = client.spec
    download = first_start_download(spec)
    starting = starting_line(spec, download)
    if args.format == "json":
        printer._emit(json_safe(_encode({"type": "starting", "agent": spec.name, "text": starting,
                                         "download": download})) + "\n")
        printer.flush()
    elif err.isatty():  # progress for a person; a log or a script reading stderr gets no noise
        err.write(f"acp-kernel: {line(starting)}\n")
    try:  # the controller's start-up: the agent closed and the failure explained when it cannot
        # The text format's tool call renderers, imported while the agent starts (3 ms, idle then).
        session = await open_session(await start_agent(client, meanwhile=_detail_parts if args.format == "text" else None))
    except Unavailable as exc:
        failure = exc.failure
        if args.format == "json":
            facts = failure.as_json() if failure is not None else {"headline": str(exc)}
            printer._emit(json_safe(_encode({"type": "error", "stage": "start", **facts})) + "\n")
            printer._emit(json_safe(_encode({"type": "end", "stopReason": None,
                                             "error": failure.headline if failure else str(exc)})) + "\n")
            printer.flush()
        err.write(f"acp-kernel: {_block(failure.plain() if failure is not None else exc)}\n")
        return EXIT_AUTH if isinstance(exc.cause, AuthRequired) else EXIT_AGENT
    freeze_start_up()
    for event in session.background.events:  # asked before the turn began: answered unasked, said here
        if type(event).__name__ == "Notice" and getattr(event, "kind", None) == "between-turns":
            printer(event)
    turn = session.begin(text)
    # Each event as it comes (not in runs): a line says the call's state at its event.
    turn.subscribe(printer)
    if asker is not None:
        asker.turn = turn
        turn.subscribe(asker)
        session.background.subscribe(asker)  # a question asked before the turn began
    try:
        await session.finish(turn)
    except asyncio.CancelledError:
        if stopper.signum is not None:
            await session.cancel()  # per the spec, bounded by its grace
        raise
    if args.format == "text" and turn.text and not turn.text.endswith("\n"):
        printer._emit("\n")
    if args.format == "json":
        printer._emit(json_safe(_encode({"type": "end", "stopReason": turn.stop_reason, "error": turn.error,
                                         "record": turn.record})) + "\n")
    printer.flush()
    if turn.error:
        if args.format == "text":
            err.write(f"acp-kernel: {_block(turn.error)}\n")
        return EXIT_AGENT
    return STOP_EXIT.get(turn.stop_reason or "", EXIT_AGENT)


_SURROGATE = re.compile("[\ud800-\udfff]")


def prompt_text(text: str) -> tuple[str, int]:
    """The prompt as valid Unicode: bytes that did not decode (Python keeps
    them as lone surrogates, which JSON would carry and agents choke on)
    become U+FFFD. Returns the text and how many were replaced."""
    return _SURROGATE.subn("\ufffd", text)


def _input_encoding() -> str:
    return (getattr(sys.stdin, "encoding", None) or "utf-8").upper().replace("UTF8", "UTF-8")


def _read_stdin() -> str:
    """All of stdin, decoded as the locale says, undecodable bytes kept as
    surrogates (:func:`prompt_text` replaces them): never a traceback."""
    stream = getattr(sys.stdin, "buffer", None)
    if stream is None:
        return sys.stdin.read()
    return stream.read().decode(getattr(sys.stdin, "encoding", None) or "utf-8", "surrogateescape")


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (OSError, ValueError, AttributeError):
        return False


def prompt_main(args: argparse.Namespace) -> int:
    """``acp-kernel prompt``: the run, with signals handled from the first
    instruction (reading the prompt from stdin included) to exit."""

    def stop(signum: int, frame: Any) -> None:
        raise _Signalled(signum)

    for sig in _STOP_SIGNALS:
        signal.signal(sig, stop)
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):  # not a test's StringIO
            try:
                stream.reconfigure(errors="replace")
            except ValueError:
                pass
    try:
        if not args.prompt and not _isatty(sys.stdin):
            args.stdin_text = _read_stdin()
        code = _run(run_prompt(args))
    except (_Signalled, KeyboardInterrupt) as exc:
        signum = exc.signum if isinstance(exc, _Signalled) else signal.SIGINT
        _Out(sys.stderr).write(f"\nacp-kernel: stopped by {signal.Signals(signum).name}\n")
        code = EXIT_SIGNAL.get(signal.Signals(signum), 128 + signum)
    for sig in _STOP_SIGNALS:
        signal.signal(sig, signal.SIG_DFL if sig != signal.SIGINT else signal.default_int_handler)
    _exit_now_if_stuck(code)
    return code


def _run(main: Any) -> int:
    """``asyncio.run`` without its wait for the default executor's threads:
    one blocked for good (a read that never returns) must not hold the exit.
    Everything the run started is closed by the time ``main`` returns."""
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(main)
    finally:
        try:
            tasks = [t for t in asyncio.all_tasks(loop) if not t.done()]
            for task in tasks:
                task.cancel()
            if tasks:
                loop.run_until_complete(asyncio.wait(tasks, timeout=2.0))
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()  # shuts the executor down without waiting


def _exit_now_if_stuck(code: int, grace: float = 1.0) -> None:
    """A worker thread still blocked after ``grace`` would hold interpreter
    exit forever (its join at exit): flush and leave without waiting for it."""
    import threading

    deadline = time.monotonic() + grace
    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join(max(0.0, deadline - time.monotonic()))
    stuck = [t for t in threading.enumerate() if t is not threading.main_thread() and t.is_alive() and not t.daemon]
    if stuck:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)


#: How ``acp-kernel agents`` shows each state.
STATE_WORDS = {"installed": "installed", "downloadable": "downloadable", "missing": "missing", "broken": "broken"}


def run_agents(out: TextIO = sys.stdout, err: TextIO = sys.stderr, *, refresh: bool = False) -> int:
    """The agents, each installed / downloadable (a launcher fetches it on
    first use) / missing (with how to install it) / broken (the program is
    there but ``--version`` fails), and its own CLI for passthrough terminals."""
    from ..client import discovery  # lazy: start-up time
    from ..client.registry import ConfigError, load_config  # lazy: start-up time

    try:
        config = load_config(missing_ok=False, refresh_registry=refresh)
    except ConfigError as exc:
        err.write(f"acp-kernel: {_block(exc)}\n")
        return EXIT_USAGE
    names = sorted(config.agents, key=lambda n: (n != "demo", n))
    specs = [config.agents[n] for n in names]
    programs = [discovery.which(s.program(), {**os.environ, **s.env}) for s in specs]
    probes = discovery.probe_all(p for p in programs if p)
    rows = []
    for spec in specs:
        state = discovery.availability(spec, probe_version=True, probes=probes)
        default = " (default)" if spec.name == config.default_agent else ""
        rows.append((spec, spec.name + default, line(spec.title), STATE_WORDS[state.state], state))
    widths = [max(len(str(r[i])) for r in rows + [(None, "agent", "title", "status", None)]) for i in (1, 2, 3)]
    pad = " " * (sum(widths) + 6)
    out.write(f"{'agent':<{widths[0]}}  {'title':<{widths[1]}}  {'status':<{widths[2]}}  command\n")
    for spec, name, title, word, state in rows:
        out.write(f"{name:<{widths[0]}}  {title:<{widths[1]}}  {word:<{widths[2]}}  {line(shlex.join(spec.command))}\n")
        for note in _agent_notes(spec, state) + _source_notes(spec):
            out.write(f"{pad}{line(note)}\n")
        if spec.passthrough is not None:
            # the registry's own version probe for the CLI (kimi's bare script must not run)
            cli = discovery.program_availability(spec.passthrough, spec.env, probe_version=True)
            found = "" if cli.state == "installed" else f" ({'not installed' if cli.state == 'missing' else 'broken'}: {cli.detail})"
            shown = discovery.shown_command(spec.passthrough.command, spec.env)
            out.write(f"{pad}passthrough: {line(shown)}{line(found)}\n")
    out.write(f"\nconfig file: {config.path}\n")
    if config.registry:
        out.write(f"agent registry: {line(config.registry)}\n")
    for note in config.registry_notes:
        out.write(f"  {line(note)}\n")
    return EXIT_OK


def _source_notes(spec: Any) -> list[str]:
    """Where the agent comes from (built-in, the config file, a registry), and what a registry says of it."""
    notes = [f"source: {spec.source}" + (f"; also in {spec.listed}" if spec.listed else "")]
    if spec.description and not spec.listed:
        notes.append(f"{spec.version} · {spec.description}" if spec.version else spec.description)
    if spec.homepage and not spec.listed:
        notes.append(spec.homepage)
    return notes


def _agent_notes(spec: Any, state: Any) -> list[str]:
    """The lines under an agent: what the first start downloads, what to install, how to sign in."""
    notes = []
    if state.state == "downloadable":
        notes.append(state.detail)
    elif state.state == "broken":
        notes.append(f"broken: {state.detail}")
    elif state.state == "missing":
        notes.append(f"missing: {state.detail}")
        if spec.install:
            notes.append(f"install: {spec.install}")
    if state.state != "missing" and (spec.env_keys or spec.login):
        ways = [f"set {' or '.join(spec.env_keys)}"] if spec.env_keys else []
        ways += [f"run `{spec.login}` once"] if spec.login else []
        notes.append("sign in: " + ", or ".join(ways))
    return notes


def run_install(args: argparse.Namespace) -> int:
    from .install import install  # lazy: start-up time
    from ..client.registry import load_config  # lazy: start-up time

    spec = None
    if args.agent:
        try:
            spec = load_config(missing_ok=False).agent(args.agent)
        except Exception as exc:  # ConfigError or unknown agent
            print(f"acp-kernel: {exc}", file=sys.stderr)
            return EXIT_USAGE
    prefix = args.prefix or (None if args.user else sys.prefix)
    path = install(spec, user=args.user, prefix=prefix)
    print(f"installed kernelspec in {path}")
    return EXIT_OK


EXIT_CODES_HELP = """\
exit codes:
  0    the turn ended (end_turn)
  1    the agent failed: it could not start, exited, or answered with an error
  2    usage or configuration error (nothing was sent)
  3    the agent requires authentication (log in, or set its API key)
  4    the agent refused (refusal)
  5    the turn was cancelled (by the agent)
  6    a limit was reached (max_tokens or max_turn_requests)
  130  SIGINT (Ctrl-C), 143 SIGTERM, 129 SIGHUP: the turn was cancelled and the agent ended

The prompt is read from stdin when none is given. Bytes in it that are not
valid in the locale's encoding are replaced with U+FFFD (with a warning).
In --format json every event is one JSON object per line on stdout, starting
with {"type": "starting", ...} and ending with {"type": "end", ...}; the end
of a turn carries its "record" (agent, model, mode, usage, tool calls, files
written: what a notebook keeps in the output's metadata). Text chunks the
agent sent back to back and that arrived together are one "agent" event.
"""


def _directory(path: str) -> str:
    """``--cwd``: an existing directory, or a usage error (exit 2) that names it."""
    if not os.path.isdir(path):
        what = "not a directory" if os.path.exists(path) else "no such directory"
        raise argparse.ArgumentTypeError(f"{what}: {line(path)}")
    return path


class _Parser(argparse.ArgumentParser):
    """argparse's parser; in a run that asked for ``--format json`` a usage error is
    also an ``error`` event on stdout (argparse prints it to stderr and exits 2).
    Subparsers are made of the same class (argparse's default)."""

    json_errors = False

    def error(self, message: str) -> NoReturn:
        if _Parser.json_errors:
            _Out(sys.stdout).write(json_error("usage", message))
            sys.stdout.flush()
        super().error(message)


def _wants_json(argv: Sequence[str]) -> bool:
    """``--format json`` (or ``--format=json``) among the words, before parsing:
    a usage error is found while parsing."""
    words = list(argv)
    return "--format=json" in words or any(a == "--format" and b == "json" for a, b in zip(words, words[1:]))


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="acp-kernel", description="Work with ACP coding agents from Jupyter and the shell.",
        epilog="Run `acp-kernel COMMAND --help` for a command's options. With no command, this help "
               "is printed and the exit status is 2 (a usage error).")
    parser.add_argument("--version", action="version", version=f"acp-kernel {VERSION}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("prompt", help="send one prompt to an agent and print the turn",
                       description="Send one prompt to an agent and print the turn: the answer on stdout, "
                       "tool calls, plans and questions on stderr.",
                       epilog=EXIT_CODES_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    who = p.add_mutually_exclusive_group()
    who.add_argument("--agent", help="a known or configured agent (see `acp-kernel agents`)")
    who.add_argument("--agent-command", help="any ACP agent command line, e.g. 'my-agent --acp'")
    p.add_argument("--cwd", default=None, type=_directory, help="the session's working directory (default: here)")
    p.add_argument("--permissions", choices=["ask", "allow-reads", "allow-all", "deny"], default=None,
                   help="how to answer permission requests (default: config, else ask; "
                   "with nobody to ask, requests are rejected)")
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.add_argument("--show-reads", action="store_true",
                   help="text: print what each completed read returned under its line (default: the line "
                   "only; json has it always)")
    p.add_argument("prompt", nargs="*", help="the prompt (default: read stdin)")

    ag = sub.add_parser("agents", help="list known and configured agents: installed, downloadable on first use, "
                        "missing or broken, and where each comes from")
    ag.add_argument("--refresh", action="store_true",
                    help="fetch the agent registry named in the config file now, even if the cached copy is fresh")

    i = sub.add_parser("install", help="install the ACP Agent kernelspec (or one bound to an agent)")
    where = i.add_mutually_exclusive_group()
    where.add_argument("--user", action="store_true", help="for this user only")
    where.add_argument("--sys-prefix", action="store_true", help="into this Python environment (default)")
    where.add_argument("--prefix", help="under this prefix")
    i.add_argument("--agent", help="bind the kernelspec to this agent (\"ACP: Claude Code\")")
    sub.add_parser("demo-agent", help="run the built-in demo ACP agent on stdio (a script, no model)")
    r = sub.add_parser("report", help="what produced each answer in saved notebooks: turns, agents, models, "
                       "time and cost, tool calls, files written (from the records turns keep in their outputs)")
    r.add_argument("notebooks", nargs="+", metavar="NOTEBOOK", help="a saved .ipynb")
    r.add_argument("--format", choices=["text", "json"], default="text")
    m = sub.add_parser("mcp", help="run the notebook MCP server on stdio (agents start it from the "
                       "entry a notebook session offers)")
    m.add_argument("--connection-file", required=True, help="the kernel's connection file")
    m.add_argument("--token", required=True, help="the token the kernel issued for the session")
    return parser


def run_report(args: argparse.Namespace) -> int:
    """``acp-kernel report``: one report per notebook; a file that is not one is said on
    stderr (exit 1), the others are still reported."""
    from . import report  # lazy: start-up time

    status = EXIT_OK
    for path in args.notebooks:
        try:
            summary = report.load(path)
        except report.ReportError as exc:
            sys.stderr.write(f"acp-kernel: {exc}\n")
            status = EXIT_AGENT
            continue
        sys.stdout.write(report.json_report(path, summary) if args.format == "json" else report.text_report(path, summary))
    return status


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["demo-agent"]:
        from ..demo.agent import main as demo_main  # lazy: start-up time

        return demo_main(argv[1:]) or 0
    parser = build_parser()
    _Parser.json_errors = _wants_json(argv)
    args = parser.parse_args(argv)
    if args.command is None:  # like `pip`: the help, not argparse's one-line error
        parser.print_help()
        return EXIT_USAGE
    if args.command == "agents":
        try:
            return run_agents(refresh=args.refresh)
        except BrokenPipeError:  # `acp-kernel agents | head`
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - nothing more to write
            return EXIT_OK
    if args.command == "install":
        return run_install(args)
    if args.command == "prompt":
        from ..protocol.scope import adopt_orphans  # lazy: start-up time

        adopt_orphans()  # a daemon the agent double-forks is re-parented here and ended with it
        tune_own_process()
        return prompt_main(args)
    if args.command == "report":
        return run_report(args)
    if args.command == "mcp":
        from ..notebook_mcp.server import main as mcp_main  # lazy: start-up time

        return mcp_main(["--connection-file", args.connection_file, "--token", args.token])
    return EXIT_USAGE


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
