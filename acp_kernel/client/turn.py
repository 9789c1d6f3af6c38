"""A turn: the ordered events of one prompt, and the state they add up to.

Pure logic (no I/O, no asyncio in the state machine): ``apply_update`` takes
the raw ``update`` object of a ``session/update`` and returns the event it
makes. Events keep the raw update; ``event.model`` builds the SDK's pydantic
model on demand, so a 100k-chunk stream pays for a dict lookup and a small
dataclass per chunk, and validation only where something is rendered or kept.

Real agents are sloppy and the rules below are deliberate:
- a second ``tool_call`` with a known id is an update;
- a ``tool_call_update`` for an unknown id creates the call;
- ``content`` and ``locations`` in an update replace, other fields merge;
- a ``plan`` replaces the whole list;
- unknown update kinds are kept raw (:class:`UnknownUpdate`), never dropped;
- empty text chunks are ignored;
- messages are matched by ``messageId`` (see :meth:`Turn._chunk_by_id`).
"""

from __future__ import annotations

import asyncio
import re
import shlex
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, Optional

import msgspec

from ..protocol import framing
from ..services.events import SERVICE_EVENTS, FileWritten, Notice  # turn events the services emit too; their home is there
from .notebook import NO_ORIGIN, Origin
from .record import Provenance, turn_record

# sessionUpdate kind -> name of the SDK model (resolved lazily: the schema
# module costs ~0.8 s to import).
_MODELS = {
    "agent_message_chunk": "AgentMessageChunk",
    "user_message_chunk": "UserMessageChunk",
    "agent_thought_chunk": "AgentThoughtChunk",
    "tool_call": "ToolCallStart",
    "tool_call_update": "ToolCallProgress",
    "plan": "AgentPlanUpdate",
    "available_commands_update": "AvailableCommandsUpdate",
    "current_mode_update": "CurrentModeUpdate",
    "config_option_update": "ConfigOptionUpdate",
    "session_info_update": "SessionInfoUpdate",
    "usage_update": "UsageUpdate",
}

FINAL_STATUSES = frozenset({"completed", "failed", "cancelled"})
#: Warnings of one kind shown one by one before they are coalesced into a
#: single summary notice that is updated in place.
NOTICE_BURST = 3
#: Characters of a tool call's text content kept once its turn is compacted.
COMPACT_TOOL_TEXT = 2000
#: Locations of a tool call, and warning notices of a turn, kept once compacted.
COMPACT_ITEMS = 20
STOP_REASONS = frozenset({"end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"})
#: Characters of a tool call's command output kept (the end: it matters most);
#: ``Limits.tool_output_chars`` overrides it per client.
TOOL_OUTPUT_CHARS = 256 * 1024
#: Distinct ``messageId`` values one turn remembers (all kinds together). Past
#: it, a new id still starts a new message at the end (v1's rule) but is not
#: remembered: a later chunk naming it starts another message at the end, as
#: before messageId was honoured; a notice says so once.
MESSAGE_IDS = 1000
#: Update kinds whose role a message has: chunks append, whole messages (ACP v2
#: draft, ``schema/v2``: ``UserMessage``, ``AgentMessage``) replace.
_CHUNK_ROLES = {"agent_message_chunk": "agent", "agent_thought_chunk": "thought", "user_message_chunk": "user"}
_WHOLE_ROLES = {"agent_message": "agent", "agent_thought": "thought", "user_message": "user"}
_ROLE_NOUNS = {"agent": "message", "thought": "thought", "user": "prompt"}
#: ``_meta`` keys under which adapters stream command output ``{terminal_id, data}``:
#: codex-acp, claude-agent-acp and pi-acp use ``terminal_output`` (chunks, or the
#: whole output once), a TypeScript Codex adapter ``terminal_output_delta``.
_OUTPUT_META_KEYS = ("terminal_output", "terminal_output_delta")
#: Keys of a command result in ``rawOutput`` whose text is the command's output,
#: best first (Codex's ExecCommandEndEvent; pi's bash result details).
_RAW_OUTPUT_KEYS = ("aggregated_output", "formatted_output", "output")
#: Every member of a ``rawOutput`` (or its ``details``) that :meth:`ToolCall._take_raw_output`
#: reads: one without any (a file read's ``{"lines": 2}``) is passed over in one set test.
_RAW_OUTPUT_READ = frozenset((*_RAW_OUTPUT_KEYS, "stdout", "stderr", "exit_code", "exitCode", "details"))
#: The same members as JSON text, and the backslash any other spelling of them needs: a
#: ``rawOutput`` left unread (:class:`.framing.ToolUpdate`) holding none of these has no
#: member :meth:`ToolCall._take_raw_output` reads, so it stays unread.
_RAW_OUTPUT_MARKS = re.compile(b"|".join([*(re.escape(f'"{key}"'.encode()) for key in _RAW_OUTPUT_READ), rb"\\"]))
#: What a payload left as JSON text cannot hold unless it spells these (or has a ``\\u``
#: escape, which could spell any letter), so a question about it is answered unread: content
#: names a terminal (:attr:`ToolCall.terminal_ids`) only with ``terminalId``, holds a diff
#: (:attr:`ToolCall.diffs`) only with ``"diff"``; a ``rawInput`` names a command
#: (:attr:`ToolCall.command`) only with ``"command"`` or ``"cmd"``. A pattern each, starting
#: with a literal, is a fast scan; one alternation was tried at every byte (0.5 us on a
#: 95-byte content, against 0.07).
_ESCAPE = re.compile(rb"\\u")
_TERMINAL_KEY = re.compile(rb"terminalId")
_COMMAND_KEY = re.compile(rb'"c(?:ommand|md)"')
_DIFF_TYPE = re.compile(rb'"diff"')
#: Bytes of a payload below which it is scanned (or, for its text, read typed) on each
#: question; a longer one is read once and kept read (a 100 KB file read was scanned four
#: times a row, 25 us each, and its text copied on each read).
_SCAN_BELOW = 2048


def _unread_without(raw: Any, key: re.Pattern[bytes]) -> bool:
    """Whether ``raw`` is a payload still as JSON text, short enough to be scanned, that
    cannot hold ``key`` (it spells neither the key nor an escape)."""
    return (type(raw) is msgspec.Raw and len(raw) < _SCAN_BELOW and key.search(raw) is None
            and _ESCAPE.search(raw) is None)


def command_of(raw_input: Any) -> str:
    """The command line a tool call's rawInput names, if it names one."""
    if isinstance(raw_input, dict):
        cmd = raw_input.get("command") or raw_input.get("cmd")
        if isinstance(cmd, list) and all(isinstance(c, str) for c in cmd):
            return shlex.join(cmd)
        if isinstance(cmd, str):
            return cmd
    return ""


def update_model(raw: dict[str, Any]) -> Any:
    """The SDK model for a raw update (raises pydantic's ValidationError)."""
    from ..protocol.schema import models  # lazy: start-up time

    name = _MODELS.get(raw.get("sessionUpdate"))  # type: ignore[arg-type]
    if name is None:
        raise ValueError(f"no model for update kind {raw.get('sessionUpdate')!r}")
    return getattr(models, name).model_validate(raw)


class _Raw:
    """Mixin: events built from an update keep it, and validate on demand."""

    __slots__ = ()
    raw: dict[str, Any]

    @property
    def model(self) -> Any:
        return update_model(self.raw)


_CHUNK_KINDS = {"agent": "agent_message_chunk", "thought": "agent_thought_chunk", "user": "user_message_chunk"}


class Chunk(msgspec.Struct, _Raw, gc=False):
    """A piece of a message or thought. ``text`` is empty for non-text content.

    A plain text chunk (nothing but kind, type and text) does not keep its
    update dict, and the chunk itself is not tracked by the garbage collector
    (``gc=False``: it refers only to strings and its update, never back to
    itself): 100k kept objects are what a full collection walks over and
    over. ``raw`` rebuilds the update on demand.
    """

    role: str  # "agent", "thought" or "user"
    text: str
    _raw: Optional[dict[str, Any]] = None
    #: The agent's ``messageId`` (ACP v1): chunks of one message share it.
    message_id: Optional[str] = None

    @property
    def raw(self) -> dict[str, Any]:  # type: ignore[override]
        if self._raw is not None:
            return self._raw
        raw: dict[str, Any] = {"sessionUpdate": _CHUNK_KINDS[self.role], "content": {"type": "text", "text": self.text}}
        if self.message_id is not None:
            raw["messageId"] = self.message_id
        return raw

    @property
    def content(self) -> Any:
        return self.raw.get("content")

    def __repr__(self) -> str:
        return f"Chunk(role={self.role!r}, text={self.text!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Chunk) and (self.role, self.text, self.raw) == (other.role, other.text, other.raw)


class _Message:
    """One message of a turn, by role: the text set before it (a blank line
    apart from the last message) and its text, as the pieces that came.

    ``pieces[0]`` is the separator; the rest is the body. Its length is
    counted lazily (:meth:`size`): each piece once, on the slow path only, so
    the streaming path appends a piece and does nothing else.
    """

    __slots__ = ("id", "pieces", "counted", "length")

    def __init__(self, mid: str | None, sep: str = "") -> None:
        self.id = mid
        self.pieces: list[str] = [sep]
        self.counted = 1
        self.length = 0

    def size(self) -> int:
        """Characters of the body (not the separator)."""
        pieces = self.pieces
        if self.counted < len(pieces):
            for i in range(self.counted, len(pieces)):
                self.length += len(pieces[i])
            self.counted = len(pieces)
        return self.length

    def body(self) -> str:
        return "".join(self.pieces[1:])

    def replace(self, text: str) -> None:
        del self.pieces[1:]
        if text:
            self.pieces.append(text)
        self.counted, self.length = len(self.pieces), len(text)


class _Payload:
    """A field of :class:`ToolCall` that may hold an update's JSON text (a :class:`msgspec.Raw`
    of :class:`.framing.ToolUpdate`): read on first use, as :func:`.framing.classify` would
    have read it, and kept read. ``listed``: a value that is not a list reads as ``[]``, as
    :meth:`ToolCall.merge` takes it."""

    __slots__ = ("slot", "listed")

    def __init__(self, slot: str, listed: bool = False) -> None:
        self.slot, self.listed = slot, listed

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        if obj is None:
            return self
        value = getattr(obj, self.slot)
        if type(value) is msgspec.Raw:
            value = framing.payload(value)
            if self.listed and type(value) is not list:
                value = []
            setattr(obj, self.slot, value)
        return value

    def __set__(self, obj: Any, value: Any) -> None:
        setattr(obj, self.slot, value)


class ToolCall(msgspec.Struct, gc=False):
    """The live state of one tool call, merged from all its updates.

    Not tracked by the garbage collector (``gc=False``): a long turn keeps
    thousands, which full collections walked over and over. It refers to
    the agent's data only, never back to itself or to a view, so it can be
    in no reference cycle.
    """

    id: str
    title: str = ""
    kind: Optional[str] = None
    status: str = "pending"
    # The payloads, as values or still as JSON text (:class:`_Payload`): ``content``,
    # ``locations``, ``raw_input`` and ``raw_output`` read them.
    _content: Any = msgspec.field(default_factory=list)
    _locations: Any = msgspec.field(default_factory=list)
    _raw_input: Any = None
    _raw_output: Any = None
    announced: bool = True  # False when first seen as an update for an unknown id
    updates: int = 0
    #: Command output sent outside ``content`` (``_meta.terminal_output`` and
    #: its deltas, appended; else the text of a command result in
    #: ``rawOutput``), '' if none. Only the last ``output_limit`` characters
    #: are kept; ``output_dropped`` counts the ones cut from the front.
    output: str = ""
    output_dropped: int = 0
    output_limit: int = TOOL_OUTPUT_CHARS
    #: The command's exit code (``_meta.terminal_exit`` or ``rawOutput``), if sent.
    exit_code: Optional[int] = None
    #: True once the agent sent ``_meta.terminal_*`` for this call: a
    #: ``terminal`` content item then names a display-only terminal of the
    #: agent's (its output is :attr:`output`), not one this client created.
    agent_terminal: bool = False

    content = _Payload("_content", listed=True)
    locations = _Payload("_locations", listed=True)
    raw_input = _Payload("_raw_input")
    raw_output = _Payload("_raw_output")

    def take(self, update: framing.ToolUpdate) -> None:
        """:meth:`merge` of an update read typed: the same state, its payloads left as JSON
        text until read (a ``rawOutput`` is read now only if it holds a member that counts)."""
        self.updates += 1
        # A payload not sent is an empty Raw (false).
        if update.title is not None:
            self.title = update.title
        if update.kind is not None:
            self.kind = update.kind
        if update.status is not None:
            self.status = update.status
        if update.content:
            self._content = update.content
        if update.locations:
            self._locations = update.locations
        if update.rawInput:
            self._raw_input = update.rawInput
        if update.meta:
            meta = framing.payload(update.meta)
            if type(meta) is dict:
                self._take_meta(meta)
        if raw_output := update.rawOutput:
            self._raw_output = raw_output
            if _RAW_OUTPUT_MARKS.search(raw_output):
                self._take_raw_output(self.raw_output)

    def merge(self, raw: dict[str, Any]) -> None:
        self.updates += 1
        title = raw.get("title")
        if isinstance(title, str):
            self.title = title
        kind = raw.get("kind")
        if isinstance(kind, str):
            self.kind = kind
        status = raw.get("status")
        if isinstance(status, str):
            self.status = status
        # Replaced, not appended; kept by reference (the update is not reused).
        if "content" in raw:
            content = raw["content"]
            self.content = content if type(content) is list else []
        if "locations" in raw:
            locations = raw["locations"]
            self.locations = locations if type(locations) is list else []
        if "rawInput" in raw:
            self.raw_input = raw["rawInput"]
        # Streamed output first: a command result in rawOutput fills in only
        # what was not streamed.
        meta = raw.get("_meta")
        if type(meta) is dict:
            self._take_meta(meta)
        if "rawOutput" in raw:
            self.raw_output = raw["rawOutput"]
            self._take_raw_output(raw["rawOutput"])

    def _append_output(self, data: str) -> None:
        if not data:
            return
        out = self.output + data
        limit = max(0, self.output_limit)
        if len(out) > limit:
            self.output_dropped += len(out) - limit
            out = out[len(out) - limit:] if limit else ""
        self.output = out

    def _take_exit(self, code: Any) -> None:
        if type(code) is int:
            self.exit_code = code

    def _take_meta(self, meta: dict[str, Any]) -> None:
        """``_meta.terminal_info`` / ``terminal_output`` / ``terminal_output_delta``
        / ``terminal_exit`` (codex-acp, claude-agent-acp, pi-acp): a display-only
        terminal that lives in the agent, reported through metadata."""
        for key in _OUTPUT_META_KEYS:
            chunk = meta.get(key)
            if type(chunk) is dict:
                self.agent_terminal = True
                data = chunk.get("data")
                if type(data) is str:
                    self._append_output(data)
        exit_ = meta.get("terminal_exit")
        if type(exit_) is dict:
            self.agent_terminal = True
            self._take_exit(exit_.get("exit_code"))
        if type(meta.get("terminal_info")) is dict:
            self.agent_terminal = True

    def _take_raw_output(self, raw_output: Any) -> None:
        """A command result in ``rawOutput`` (Codex's ExecCommandEndEvent:
        ``aggregated_output``, ``exit_code``; pi: ``details.stdout``, ``exitCode``):
        its exit code always, its text only when nothing was streamed and the
        text content does not show it already (codex-acp streams it there)."""
        if type(raw_output) is not dict or _RAW_OUTPUT_READ.isdisjoint(raw_output):
            return
        for where in (raw_output, raw_output.get("details")):
            if type(where) is not dict:
                continue
            if self.exit_code is None:
                self._take_exit(where.get("exit_code", where.get("exitCode")))
            if self.output:
                continue
            text = next((where[k] for k in _RAW_OUTPUT_KEYS if type(where.get(k)) is str and where[k]), None)
            if text is None:
                parts = [where[k] for k in ("stdout", "stderr") if type(where.get(k)) is str and where[k]]
                text = "\n".join(p.rstrip("\n") for p in parts) + "\n" if parts else None
            if text and text.strip() not in self.text:  # not when the content already shows it
                self._append_output(text)

    @property
    def terminal_ids(self) -> list[str]:
        # Content still as its JSON text names no terminal unless it spells "terminalId" (or
        # escapes a letter): a view asks on every update, and need not read the rest.
        if _unread_without(self._content, _TERMINAL_KEY):
            return []
        return [
            c["terminalId"]
            for c in self.content
            if isinstance(c, dict) and c.get("type") == "terminal" and isinstance(c.get("terminalId"), str)
        ]

    @property
    def diffs(self) -> list[dict[str, Any]]:
        if _unread_without(self._content, _DIFF_TYPE):
            return []
        return [c for c in self.content if isinstance(c, dict) and c.get("type") == "diff"]

    @property
    def command(self) -> str:
        """The command line its ``rawInput`` names (:func:`command_of`); raw input still as
        JSON text that spells no such key is not read for it."""
        if _unread_without(self._raw_input, _COMMAND_KEY):
            return ""
        return command_of(self.raw_input)

    @property
    def text(self) -> str:
        content = self._content
        if type(content) is msgspec.Raw and 0 < len(content) < _SCAN_BELOW:  # all text items, in one typed pass
            texts = framing.text_items(content)
            if texts is not None:
                return "\n".join(texts)
        parts = []
        for c in self.content:
            if isinstance(c, dict) and c.get("type") == "content":
                inner = c.get("content")
                if isinstance(inner, dict) and isinstance(inner.get("text"), str):
                    parts.append(inner["text"])
        return "\n".join(parts)

    @property
    def final(self) -> bool:
        return self.status in FINAL_STATUSES

    def compact(self, limit: int = COMPACT_TOOL_TEXT) -> None:
        """Keep id, title, kind, status and a bounded text of the content;
        drop raw input/output and diffs (they can be whole files)."""
        lines = []  # what the dropped content was first, so the cut below keeps it
        for c in self.content:
            if isinstance(c, dict) and c.get("type") == "diff":
                lines.append(f"(diff of {str(c.get('path'))[:500]})")
            elif isinstance(c, dict) and c.get("type") == "terminal":
                lines.append(f"(terminal {str(c.get('terminalId'))[:100]})")
        if content_text := self.text:
            lines.append(content_text)
        text = "\n".join(lines)
        if len(text) > limit:
            text = text[:limit] + f"... ({len(text) - limit:,} more characters not kept)"
        self.content = [{"type": "content", "content": {"type": "text", "text": text}}] if text else []
        self.locations = self.locations[:COMPACT_ITEMS]
        self.raw_input = None
        self.raw_output = None
        if len(self.output) > limit:
            self.output_dropped += len(self.output) - limit
            self.output = self.output[len(self.output) - limit:]


class ToolCallEvent(msgspec.Struct, _Raw, gc=False):
    """A tool call was announced (``new``) or changed; ``call`` is the live
    state. Not tracked by the garbage collector, as :class:`Chunk`."""

    call: ToolCall
    new: bool
    #: The update: a dict, or the line it came in (read typed, :meth:`Turn.apply_tool`), read
    #: again into the dict :func:`.framing.classify` makes when ``raw`` is first asked for.
    _update: Any

    @property
    def raw(self) -> dict[str, Any]:  # type: ignore[override]
        update = self._update
        if type(update) is bytes:
            update = self._update = framing.update_of(update)
        return update

    @property
    def wire(self) -> Any:
        """The update for msgspec to write as JSON: the agent's JSON text of it, cut from
        its line (not read), else :attr:`raw`."""
        update = self._update
        return framing.update_text(update) if type(update) is bytes else update


@dataclass(slots=True)
class PlanEvent(_Raw):
    entries: list[dict[str, Any]]
    raw: dict[str, Any]


@dataclass(slots=True)
class StateEvent(_Raw):
    """Session-level state: commands, mode, config options, session info, usage."""

    kind: str
    raw: dict[str, Any]


@dataclass(slots=True)
class UnknownUpdate:
    """An update kind this client does not know; kept, shown raw."""

    kind: str
    raw: Any


@dataclass(slots=True)
class MessageEdit(_Raw):
    """A message of the turn changed other than at the end of the text: the
    agent ``replaced`` it (a whole-message update, or the message sent again
    whole: ``text`` is its whole text now, '' when cleared) or, not
    ``replaced``, appended ``text`` to an earlier message. ``text`` empty and
    not ``replaced``: nothing changed (the same text again, or a
    whole-message update without ``content``). The turn's text by role
    (:meth:`Turn.role_text`) is the truth; a renderer draws the role's text
    from it again (:attr:`Turn.edited`)."""

    role: str
    message_id: str
    text: str
    replaced: bool
    raw: dict[str, Any]

    @property
    def model(self) -> Any:
        return update_model(self.raw) if self.raw.get("sessionUpdate") in _MODELS else self.raw

    @property
    def changed(self) -> bool:
        return self.replaced or bool(self.text)

    @property
    def noun(self) -> str:
        """What the changed text is, said to a reader: message, thought or prompt."""
        return _ROLE_NOUNS.get(self.role, "message")


#: Every kind of event a turn holds, in one list: the update events above,
#: then the services' (:data:`acp_kernel.services.events.SERVICE_EVENTS`).
#: Each renderer is a table keyed by these (tests/view/test_event_kinds.py).
TURN_EVENTS: tuple[type, ...] = (Chunk, MessageEdit, ToolCallEvent, PlanEvent, StateEvent, UnknownUpdate, *SERVICE_EVENTS)


def _compact_prompt(prompt: Any) -> Any:
    """A prompt's text blocks; embedded resources and images (whole files)
    become what names them."""
    if not isinstance(prompt, list):
        return prompt
    out: list[Any] = []
    for block in prompt:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind in ("text", "resource_link"):
            out.append(block)
        elif kind == "resource" and isinstance(block.get("resource"), dict):
            uri = str(block["resource"].get("uri", ""))
            out.append({"type": "resource_link", "uri": uri, "name": uri.rsplit("/", 1)[-1] or uri})
        else:
            out.append({"type": "text", "text": f"({kind} not kept)"})
    return out


@dataclass
class Turn:
    """The events of one prompt, in arrival order, and what they add up to."""

    session_id: str
    prompt: Any = None
    events: list[Any] = field(default_factory=list)
    tool_calls: dict[str, ToolCall] = field(default_factory=dict)
    plan: list[dict[str, Any]] = field(default_factory=list)
    usage: Optional[dict[str, Any]] = None
    stop_reason: Optional[str] = None
    error: Optional[str] = None
    #: True when the client gave up waiting for the agent to end a cancelled turn.
    forced: bool = False
    started: float = field(default_factory=time.time)
    ended: Optional[float] = None
    late_events: int = 0
    #: True once :meth:`compact` dropped what only a live view needs.
    compacted: bool = False
    #: Characters of command output kept per tool call (:attr:`ToolCall.output`).
    tool_output_limit: int = TOOL_OUTPUT_CHARS
    #: Who answers, in which session, under what policy (:class:`.record.Provenance`; the session sets it).
    provenance: Optional[Provenance] = None
    #: The notebook request (and cell) this turn runs for: the page groups its proposals there.
    origin: Origin = NO_ORIGIN
    _record: Optional[dict[str, Any]] = field(default=None, repr=False)
    #: What the record reads, kept as events arrive (a scan of 100,000 chunk events took 50 ms).
    _mode: Optional[str] = field(default=None, repr=False)
    files_written: list[FileWritten] = field(default_factory=list, repr=False)
    #: Roles (agent, thought, user) whose text changed other than at its end
    #: (:class:`MessageEdit`): a renderer shows their text from the model.
    edited: set[str] = field(default_factory=set)
    #: The messages of each role, in order (:class:`_Message`).
    _messages: dict[str, list[_Message]] = field(
        default_factory=lambda: {role: [_Message(None)] for role in ("agent", "thought", "user")}, repr=False)
    #: The pieces of the last message of each role: where the stream appends.
    _message: list[str] = field(default_factory=list, repr=False)
    _thought: list[str] = field(default_factory=list, repr=False)
    _user: list[str] = field(default_factory=list, repr=False)
    #: Messages by ``messageId``, per role; at most :data:`MESSAGE_IDS` in all.
    _ids: dict[str, dict[str, _Message]] = field(
        default_factory=lambda: {"agent": {}, "thought": {}, "user": {}}, repr=False)
    _id_count: int = field(default=0, repr=False)
    #: The ``messageId`` of the last chunk (any kind) that had one, while that
    #: message is the last of its role (else None): its chunks take the streaming path.
    _last_mid: Optional[str] = field(default=None, repr=False)
    _listeners: list[Callable[[Any], None]] = field(default_factory=list, repr=False)
    #: Listeners that take a run of tool call events in one call (:meth:`subscribe`'s ``runs``).
    _runs: dict[Callable[[Any], None], Callable[[list[Any]], None]] = field(default_factory=dict, repr=False)
    #: Called once the turn has ended, before its listeners hear it (:meth:`on_ending`).
    _ending: list[Callable[[], None]] = field(default_factory=list, repr=False)
    _repeats: dict[str, int] = field(default_factory=dict, repr=False)
    _summaries: dict[str, Notice] = field(default_factory=dict, repr=False)
    _summary_sent: dict[str, tuple[int, float]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self._message = self._messages["agent"][-1].pieces
        self._thought = self._messages["thought"][-1].pieces
        self._user = self._messages["user"][-1].pieces

    # -- reading ------------------------------------------------------------

    @property
    def text(self) -> str:
        """The agent's message so far."""
        return self.role_text("agent")

    @property
    def thoughts(self) -> str:
        return self.role_text("thought")

    def role_text(self, role: str) -> str:
        """The text of one role (agent, thought, user): its messages in order,
        each as it stands now (replaced, cleared or appended to by id)."""
        messages = self._messages[role]
        if len(messages) == 1:
            return "".join(messages[0].pieces)
        if role not in self.edited:
            return "".join(["".join(m.pieces) for m in messages])
        out: list[str] = []  # edited: a cleared message leaves no blank line behind
        for m in messages:
            body = m.body()
            if body:
                if out:
                    out.append(m.pieces[0])
                out.append(body)
        return "".join(out)

    @property
    def done(self) -> bool:
        return self.ended is not None

    @property
    def notices(self) -> list[Notice]:
        return [e for e in self.events if type(e) is Notice]

    def __repr__(self) -> str:
        state = self.stop_reason or ("error" if self.error else "running")
        return (
            f"<Turn {state}: {len(self.text)} chars, {len(self.tool_calls)} tool calls, "
            f"{len(self.events)} events>"
        )

    # -- writing ------------------------------------------------------------

    def subscribe(self, listener: Callable[[Any], None],
                  runs: Callable[[list[Any]], None] | None = None) -> Callable[[], None]:
        """Call ``listener(event)`` for each new event, inline; returns an unsubscribe. With
        ``runs``, the tool call events of one read (:meth:`apply_tools`) go to ``runs(events)``
        in one call instead, once they are all in :attr:`events`: each call then reads as it
        stands after the read (right for a view; a reader of each update's own state, as the
        CLI's lines, takes events one by one)."""
        self._listeners.append(listener)
        if runs is not None:
            self._runs[listener] = runs

        def unsubscribe() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)
            self._runs.pop(listener, None)

        return unsubscribe

    def on_ending(self, fn: Callable[[], None]) -> None:
        """Call ``fn()`` when the turn ends (:meth:`finish`), before any listener hears of it
        (a view renders the finished turn then): a hook on the end alone, with no call for
        each event as a listener has."""
        self._ending.append(fn)

    def add(self, event: Any) -> None:
        if type(event) is Notice and event.level != "info" and event.key is None:
            group = event.kind or event.text
            n = self._repeats.get(group, 0) + 1
            self._repeats[group] = n
            if n > NOTICE_BURST:
                self._coalesce(group, event)
                return
        elif type(event) is FileWritten:
            self.files_written.append(event)
        if self.ended is not None:
            self.late_events += 1
        self.events.append(event)
        for listener in self._listeners:
            listener(event)

    def _coalesce(self, group: str, notice: Notice) -> None:
        """Fold a repeated warning into its kind's summary. Listeners hear of
        the summary at counts 1, 2, 5, 10, 20, 50, ... or a second after they
        last did, and at the end: a bounded number of re-emissions, however
        many thousand repeats."""
        summary = self._summaries.get(group)
        if summary is None:
            summary = Notice(notice.level, "", notice.session_id, notice.kind,
                             key=f"notice-{id(self):x}-{len(self._summaries)}", count=0)
            self._summaries[group] = summary
        if notice.level == "error":
            summary.level = "error"
        summary.count += 1
        summary.text = f"... and {summary.count:,} more like this; the last: {notice.text}"
        if summary.count == 1:
            self.events.append(summary)
            self._summary_sent[group] = (1, time.monotonic())
            for listener in self._listeners:
                listener(summary)
            return
        count = summary.count
        now = time.monotonic()
        digits = str(count)
        if digits[0] in "125" and digits[1:].strip("0") == "" or now - self._summary_sent[group][1] >= 1.0:
            self._reemit(group, summary, now)

    def _reemit(self, group: str, summary: Notice, now: float) -> None:
        self._summary_sent[group] = (summary.count, now)
        for listener in self._listeners:
            listener(summary)

    def _flush_summaries(self) -> None:
        """At the end: every summary's final count reaches the listeners."""
        now = time.monotonic()
        for group, summary in self._summaries.items():
            if self._summary_sent.get(group, (0, 0.0))[0] != summary.count:
                self._reemit(group, summary, now)

    def apply_update(self, update: Any) -> Any:
        """Turn one raw ``update`` into an event, fold it into the state, add it."""
        event = self._event_for(update)
        if event is not None:
            self.add(event)
        return event

    def apply_tool(self, update: framing.ToolUpdate, line: bytes) -> Any:
        """:meth:`apply_update` of a tool call update read typed from ``line``
        (:func:`.framing.typed_update`): the same event, its payloads read only when asked."""
        self.apply_tools([(self.session_id, update, line)], 0, 1)
        return self.events[-1]

    def apply_tools(self, run: list[tuple[str, framing.ToolUpdate, bytes]], start: int, stop: int) -> None:
        """:meth:`apply_tool` of each of ``run[start:stop]`` (``(session id, update, line)``),
        in one loop: a burst of tool calls is most of a busy turn's updates. A listener's
        failure is raised once every update has been taken."""
        calls, limit, failed = self.tool_calls, self.tool_output_limit, None
        # What add() does with an event that is neither a notice nor a file written.
        keep, listeners, late, runs = self.events.append, self._listeners, self.ended is not None, self._runs
        made: list[Any] | None = None
        if runs:
            made, listeners = [], [x for x in listeners if x not in runs]
        for i in range(start, stop):
            _, update, line = run[i]
            try:
                tid = update.toolCallId
                call = calls.get(tid)
                new = call is None
                if call is None:
                    if not tid:
                        if made:  # the run so far first: listeners hear events in order
                            err = self._deliver(made)
                            failed, made = failed or err, []
                        self.apply_update(framing.update_of(line))
                        continue
                    call = calls[tid] = ToolCall(tid, announced=update.sessionUpdate == "tool_call", output_limit=limit)
                call.take(update)
                event = ToolCallEvent(call, new, line)
                if late:
                    self.late_events += 1
                keep(event)
                if made is not None:
                    made.append(event)
                for listener in listeners:
                    listener(event)
            except Exception as exc:
                failed = failed or exc
        if made:
            err = self._deliver(made)
            failed = failed or err
        if failed is not None:
            raise failed

    def _deliver(self, made: list[Any]) -> Exception | None:
        """A run of tool call events to each ``runs`` listener; the first failure, returned."""
        failed = None
        for take in list(self._runs.values()):
            try:
                take(made)
            except Exception as exc:
                failed = failed or exc
        return failed

    def apply_texts(self, kind: str, texts: list[str], message_id: str | None = None) -> None:
        """:meth:`apply_update` of each of a run of chunks that are only text, all with
        ``message_id`` (or none): what the client reads typed. The run goes on as one chunk
        where the dict reading would stream each piece at the end of the last message; a
        piece that would start or name a message (its id is not the last chunk's) is read
        as its dict is, alone, so the replay rule sees exactly the pieces the agent sent."""
        i, n = 0, len(texts)
        if message_id is not None:
            while i < n and message_id != self._last_mid:
                if texts[i]:  # (an empty chunk is nothing, on either path)
                    self.apply_update({"sessionUpdate": kind, "content": {"type": "text", "text": texts[i]},
                                       "messageId": message_id})
                i += 1
        text = texts[i] if n - i == 1 else "".join(texts[i:])
        if text:
            self.add(self._chunk(kind, text, None, message_id))

    def _chunk(self, kind: str, text: str, keep: dict[str, Any] | None, mid: str | None) -> Chunk:
        """A chunk of the last message of its role (not by messageId: see below)."""
        if kind == "agent_message_chunk":
            self._message.append(text)
            return Chunk("agent", text, keep, mid)
        if kind == "agent_thought_chunk":
            self._thought.append(text)
            return Chunk("thought", text, keep, mid)
        self._user.append(text)
        return Chunk("user", text, keep, mid)

    def _event_for(self, update: Any) -> Any:
        if type(update) is not dict:
            return Notice("warning", f"ignored a session/update whose update is not an object: {update!r:.200}")
        kind = update.get("sessionUpdate")
        if kind == "agent_message_chunk" or kind == "agent_thought_chunk" or kind == "user_message_chunk":
            content = update.get("content")
            if type(content) is not dict:
                return UnknownUpdate(kind, update)
            text = ""
            keep: dict[str, Any] | None = update
            if content.get("type") == "text":
                got = content.get("text")
                if type(got) is not str:
                    text = ""
                elif not got:
                    return None  # empty chunks happen; they carry nothing
                else:
                    text = got
                    if len(update) == 2 and len(content) == 2:
                        keep = None  # plain text: rebuilt on demand
            if len(update) > 2 and type(mid := update.get("messageId")) is str:
                if mid != self._last_mid and text:
                    return self._chunk_by_id(_CHUNK_ROLES[kind], mid, text, update, content)
                if len(update) == 3 and len(content) == 2 and content.get("type") == "text":
                    keep = None  # plain text of the message being streamed: rebuilt on demand
            else:
                mid = None
            return self._chunk(kind, text, keep, mid)
        if kind in _WHOLE_ROLES:
            return self._whole_message(_WHOLE_ROLES[kind], update)
        if kind == "tool_call" or kind == "tool_call_update":
            tid = update.get("toolCallId")
            if type(tid) is not str or not tid:
                return UnknownUpdate(kind, update)
            call = self.tool_calls.get(tid)
            new = call is None
            if new:
                call = ToolCall(tid, announced=kind == "tool_call", output_limit=self.tool_output_limit)
                self.tool_calls[tid] = call
            call.merge(update)  # type: ignore[union-attr]
            return ToolCallEvent(call, new, update)  # type: ignore[arg-type]
        if kind == "plan":
            entries = update.get("entries")
            self.plan = [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []
            return PlanEvent(self.plan, update)
        if kind == "usage_update":
            self.usage = update
            return StateEvent(kind, update)
        if kind in _MODELS:
            if kind == "current_mode_update" and type(mode := update.get("currentModeId")) is str:
                self._mode = mode
            return StateEvent(kind, update)
        return UnknownUpdate(str(kind), update)

    # -- messages by messageId (the slow path) ---------------------------------
    #
    # The rule, from the protocol's repository (b7f0005): v1 ``prompt-turn.mdx``
    # "Message IDs" (chunks with the same ``messageId`` belong to the same
    # message; a changed one indicates a new message) and the v2 draft
    # (``docs/rfds/v2/message-updates.mdx``, ``schema/v2`` ``AgentMessage``):
    # chunks append their content to the message with the matching id;
    # ``user_message`` / ``agent_message`` / ``agent_thought`` upsert it by id,
    # ``content`` replacing all its content (``null`` and ``[]`` clear it,
    # omitted leaves it), in the order received. Here, per role:
    #
    # 1. a chunk with the id of the last chunk that had one, or with no id,
    #    appends at the end of the role's text (the streaming path: no lookup);
    # 2. a chunk with an id not seen in the turn starts a new message at the
    #    end, a blank line apart from the last (:meth:`_separator`);
    # 3. a chunk naming an earlier message of the turn appends to THAT
    #    message (:class:`MessageEdit`, not a copy at the end) -- unless it is
    #    that message sent again whole (an agent replaying after a reconnect or
    #    resume): its text equals, or starts with and extends, the message's
    #    whole text. Then it replaces the message (equal: nothing changes).
    #    The replay rule is ours, not the spec's (a v1 agent has no other way
    #    to re-send); it is checked only when the id differs from the last
    #    chunk's, so a message re-sent whole straight after its own chunks
    #    appends, as the spec says chunks do;
    # 4. a whole-message update replaces the message's text (a new id: a new
    #    message at the end);
    # 5. whatever changes only the end of the last message streams on as a
    #    plain :class:`Chunk` (the new part only); anything else is a
    #    :class:`MessageEdit`, and the role goes into :attr:`edited`.
    #
    # Bounds: at most :data:`MESSAGE_IDS` ids are remembered (then rule 2
    # without remembering, and a notice once); the replay check costs the
    # length of the text the agent sent, since a message's length is counted
    # once per piece (:meth:`_Message.size`).

    def _separator(self, role: str, text: str) -> str:
        """What sets a new message apart from the role's text before it: a
        blank line, as far as the text does not already end (or the new one
        begin) with one. User text has none (as before messageId)."""
        if role == "user":
            return ""
        last = self._messages[role][-1].pieces
        before = "".join(last[-2:])
        if not before or before.endswith("\n\n") or text.startswith("\n\n"):
            return ""
        return "\n" if before.endswith("\n") or text.startswith("\n") else "\n\n"

    def _new_message(self, role: str, mid: str, text: str) -> tuple[_Message, str]:
        """A message at the end of the role's text, remembered by id while
        under the bound; returns it and its separator."""
        sep = self._separator(role, text)
        msg = _Message(mid, sep)
        self._messages[role].append(msg)
        if role == "agent":
            self._message = msg.pieces
        elif role == "thought":
            self._thought = msg.pieces
        else:
            self._user = msg.pieces
        if self._id_count < MESSAGE_IDS:
            self._id_count += 1
            self._ids[role][mid] = msg
        elif self._id_count == MESSAGE_IDS:
            self._id_count += 1
            self.add(Notice("warning", f"the agent used more than {MESSAGE_IDS:,} message ids in one turn; "
                                       "later messages are shown in the order they come, not matched by id",
                            kind="message-ids"))
        return msg, sep

    def _chunk_by_id(self, role: str, mid: str, text: str, update: dict[str, Any], content: dict[str, Any]) -> Any:
        """A text chunk whose ``messageId`` is not the last chunk's (rules 2, 3, 5 above)."""
        plain = len(update) == 3 and len(content) == 2 and content.get("type") == "text"
        msg = self._ids[role].get(mid)
        if msg is None:
            self._last_mid = mid
            msg, sep = self._new_message(role, mid, text)
            msg.pieces.append(text)
            return Chunk(role, sep + text, update if sep or not plain else None, mid)
        last = msg is self._messages[role][-1]
        # The streaming path appends at the end: only the last message's id may take it.
        self._last_mid = mid if last else None
        have = msg.size()
        if have and len(text) >= have and text.startswith(msg.body()):  # the message again, whole
            return self._set_text(role, msg, mid, text, update)
        msg.pieces.append(text)
        if last:
            return Chunk(role, text, None if plain else update, mid)
        self.edited.add(role)
        return MessageEdit(role, mid, text, False, update)

    def _whole_message(self, role: str, update: dict[str, Any]) -> Any:
        """``user_message`` / ``agent_message`` / ``agent_thought`` (ACP v2
        draft): an upsert by ``messageId``; ``content`` replaces the message's
        text (its text blocks, joined), ``null`` or ``[]`` clears it, omitted
        leaves it (rule 4 above)."""
        kind = update.get("sessionUpdate")
        mid = update.get("messageId")
        content = update.get("content")
        if type(mid) is not str or not (content is None or type(content) is list):
            return UnknownUpdate(str(kind), update)
        msg = self._ids[role].get(mid)
        self._last_mid = mid if msg is None or msg is self._messages[role][-1] else None
        if "content" not in update:
            if msg is None:
                self._new_message(role, mid, "")
            return MessageEdit(role, mid, "", False, update)  # _meta only: the text stays
        text = "".join(b["text"] for b in content or () if type(b) is dict and b.get("type") == "text"
                       and type(b.get("text")) is str)
        if msg is None:
            msg, sep = self._new_message(role, mid, text)
            if not text:
                return MessageEdit(role, mid, "", False, update)
            msg.pieces.append(text)
            return Chunk(role, sep + text, update, mid)
        return self._set_text(role, msg, mid, text, update)

    def _set_text(self, role: str, msg: _Message, mid: str, text: str, update: dict[str, Any]) -> Any:
        """``msg``'s text becomes ``text`` (rules 3 to 5 above): nothing changes when it
        is the same; the last message that only grows streams on with its new end;
        anything else replaces it (an edit of the role's text)."""
        have = msg.size()
        if have == len(text) and msg.body() == text:
            return MessageEdit(role, mid, "", False, update)
        if msg is self._messages[role][-1] and have and len(text) > have and text.startswith(msg.body()):
            msg.pieces.append(text[have:])
            return Chunk(role, text[have:], update, mid)
        msg.replace(text)
        self.edited.add(role)
        return MessageEdit(role, mid, text, True, update)

    def finish(self, stop_reason: Optional[str], *, error: Optional[str] = None, forced: bool = False) -> None:
        """End the turn. Tool calls still open are marked failed (the turn
        ended in an error) or cancelled (any other end), so nothing shows as
        running forever; when the agent ended the turn normally, a notice
        names them. A late update with a real final status still overrides."""
        if self.ended is not None:
            return
        self.stop_reason = stop_reason
        self.error = error
        self.forced = forced
        status = "failed" if error is not None else "cancelled"
        open_calls = [call for call in self.tool_calls.values() if not call.final]
        if open_calls and error is None and stop_reason != "cancelled":
            # A normal end with calls still open: the agent abandoned them. Say so.
            names = ", ".join(repr(c.title or c.id) for c in open_calls[:5])
            more = f" and {len(open_calls) - 5} more" if len(open_calls) > 5 else ""
            self.add(Notice(
                "warning",
                f"the agent ended the turn with {len(open_calls)} tool call(s) still open "
                f"({names}{more}); shown as cancelled",
            ))
        for call in open_calls:
            call.status = status
        self._flush_summaries()
        self.ended = time.time()
        ending, self._ending = self._ending, []
        for fn in ending:
            fn()
        for listener in list(self._listeners):
            listener(None)  # None marks the end for listeners

    def last_mode(self) -> Optional[str]:
        """The mode the agent last switched to in this turn (``current_mode_update``), if any."""
        return self._mode

    @property
    def record(self) -> Optional[dict[str, Any]]:
        """The finished turn's record (:mod:`.record`: agent, model, usage, tool calls,
        files written); None while it runs. Made once, before :meth:`compact` could drop
        what it counts."""
        if self._record is None and self.ended is not None:
            self._record = turn_record(self)
        return self._record

    def compact(self) -> None:
        """Drop what only a live view needed, keep what a reader of an old
        turn uses: the final text (one chunk), tool calls in their final state
        (bounded content), the plan, the mode, up to ``COMPACT_ITEMS``
        warnings, usage and the stop reason. Thoughts, per-chunk events,
        service events and unknown updates go. Only for finished turns."""
        if self.compacted or self.ended is None:
            return
        _ = self.record  # made from the whole turn first
        events: list[Any] = []
        run: list[str] = []

        def end_run() -> None:
            if run:
                events.append(Chunk("agent", "".join(run)))
                run.clear()

        plan_seen = False
        warnings = 0
        mode: Any = None
        # An edited text stands whole, from the model, where it began.
        whole, placed = "agent" in self.edited, False
        for ev in self.events:
            t = type(ev)
            if whole and (t is Chunk or t is MessageEdit) and ev.role == "agent":
                if not placed:
                    placed = True
                    run.append(self.text)
                continue
            if t is Chunk:
                if ev.role == "agent" and ev.text:
                    run.append(ev.text)
            elif t is ToolCallEvent:
                if ev.new:
                    end_run()
                    events.append(ToolCallEvent(ev.call, True, {"sessionUpdate": "tool_call", "toolCallId": ev.call.id}))
            elif t is PlanEvent:
                if not plan_seen:
                    plan_seen = True
                    end_run()
                    events.append(PlanEvent(self.plan, {"sessionUpdate": "plan", "entries": self.plan}))
            elif t is StateEvent:
                if ev.kind == "current_mode_update":
                    mode = ev
            elif t is Notice and ev.level != "info" and warnings < COMPACT_ITEMS:
                end_run()
                events.append(ev)
                warnings += 1
        end_run()
        if mode is not None:
            events.append(mode)
        for call in self.tool_calls.values():
            call.compact()
        self.events = events
        text = self.text
        self._messages = {role: [_Message(None)] for role in ("agent", "thought", "user")}
        self._messages["agent"][0].replace(text)
        self._ids = {"agent": {}, "thought": {}, "user": {}}
        self._last_mid = None
        self.edited = set()
        self.__post_init__()
        self._listeners = []
        self._runs = {}
        self._ending = []
        self._repeats = {}
        self._summaries = {}
        self._summary_sent = {}
        self.prompt = _compact_prompt(self.prompt)
        self.compacted = True

    # -- async consumption --------------------------------------------------

    async def stream(self) -> AsyncIterator[Any]:
        """Every event in order, then stop when the turn ends. A slow consumer
        misses nothing: it reads the list by index, it is never handed a queue
        that could drop."""
        wake = asyncio.Event()
        unsubscribe = self.subscribe(lambda event: wake.set())
        try:
            index = 0
            while True:
                while index < len(self.events):
                    yield self.events[index]
                    index += 1
                if self.ended is not None:
                    return
                wake.clear()
                if index < len(self.events) or self.ended is not None:
                    continue
                await wake.wait()
        finally:
            unsubscribe()
