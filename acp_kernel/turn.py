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
- empty text chunks are ignored.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, Optional

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
STOP_REASONS = frozenset({"end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"})


def update_model(raw: dict[str, Any]) -> Any:
    """The SDK model for a raw update (raises pydantic's ValidationError)."""
    from acp import schema

    name = _MODELS.get(raw.get("sessionUpdate"))  # type: ignore[arg-type]
    if name is None:
        raise ValueError(f"no model for update kind {raw.get('sessionUpdate')!r}")
    return getattr(schema, name).model_validate(raw)


class _Raw:
    """Mixin: events built from an update keep it, and validate on demand."""

    __slots__ = ()
    raw: dict[str, Any]

    @property
    def model(self) -> Any:
        return update_model(self.raw)


_CHUNK_KINDS = {"agent": "agent_message_chunk", "thought": "agent_thought_chunk", "user": "user_message_chunk"}


class Chunk(_Raw):
    """A piece of a message or thought. ``text`` is empty for non-text content.

    A plain text chunk (nothing but kind, type and text) does not keep its
    update dict: 100k kept dicts are what the garbage collector scans over
    and over. ``raw`` rebuilds it on demand.
    """

    __slots__ = ("role", "text", "_raw")

    def __init__(self, role: str, text: str, raw: dict[str, Any] | None = None) -> None:
        self.role = role  # "agent", "thought" or "user"
        self.text = text
        self._raw = raw

    @property
    def raw(self) -> dict[str, Any]:  # type: ignore[override]
        if self._raw is not None:
            return self._raw
        return {"sessionUpdate": _CHUNK_KINDS[self.role], "content": {"type": "text", "text": self.text}}

    @property
    def content(self) -> Any:
        return self.raw.get("content")

    def __repr__(self) -> str:
        return f"Chunk(role={self.role!r}, text={self.text!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Chunk) and (self.role, self.text, self.raw) == (other.role, other.text, other.raw)


@dataclass
class ToolCall:
    """The live state of one tool call, merged from all its updates."""

    id: str
    title: str = ""
    kind: Optional[str] = None
    status: str = "pending"
    content: list[Any] = field(default_factory=list)
    locations: list[Any] = field(default_factory=list)
    raw_input: Any = None
    raw_output: Any = None
    announced: bool = True  # False when first seen as an update for an unknown id
    updates: int = 0

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
        if "rawOutput" in raw:
            self.raw_output = raw["rawOutput"]

    @property
    def terminal_ids(self) -> list[str]:
        return [
            c["terminalId"]
            for c in self.content
            if isinstance(c, dict) and c.get("type") == "terminal" and isinstance(c.get("terminalId"), str)
        ]

    @property
    def diffs(self) -> list[dict[str, Any]]:
        return [c for c in self.content if isinstance(c, dict) and c.get("type") == "diff"]

    @property
    def text(self) -> str:
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


@dataclass(slots=True)
class ToolCallEvent(_Raw):
    """A tool call was announced (``new``) or changed; ``call`` is the live state."""

    call: ToolCall
    new: bool
    raw: dict[str, Any]


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
class Notice:
    """Something a person should know: agent noise, a protocol problem, a decision."""

    level: str  # "info", "warning" or "error"
    text: str
    session_id: Optional[str] = None


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
    _message: list[str] = field(default_factory=list, repr=False)
    _thought: list[str] = field(default_factory=list, repr=False)
    _listeners: list[Callable[[Any], None]] = field(default_factory=list, repr=False)

    # -- reading ------------------------------------------------------------

    @property
    def text(self) -> str:
        """The agent's message so far."""
        return "".join(self._message)

    @property
    def thoughts(self) -> str:
        return "".join(self._thought)

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

    def subscribe(self, listener: Callable[[Any], None]) -> Callable[[], None]:
        """Call ``listener(event)`` for each new event, inline; returns an unsubscribe."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def add(self, event: Any) -> None:
        if self.ended is not None:
            self.late_events += 1
        self.events.append(event)
        for listener in self._listeners:
            listener(event)

    def apply_update(self, update: Any) -> Any:
        """Turn one raw ``update`` into an event, fold it into the state, add it."""
        event = self._event_for(update)
        if event is not None:
            self.add(event)
        return event

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
                text = content.get("text")
                if type(text) is not str:
                    text = ""
                elif not text:
                    return None  # empty chunks happen; they carry nothing
                elif len(update) == 2 and len(content) == 2:
                    keep = None  # plain text: rebuilt on demand
            if kind == "agent_message_chunk":
                self._message.append(text)
                return Chunk("agent", text, keep)
            if kind == "agent_thought_chunk":
                self._thought.append(text)
                return Chunk("thought", text, keep)
            return Chunk("user", text, keep)
        if kind == "tool_call" or kind == "tool_call_update":
            tid = update.get("toolCallId")
            if type(tid) is not str or not tid:
                return UnknownUpdate(kind, update)
            call = self.tool_calls.get(tid)
            new = call is None
            if new:
                call = ToolCall(tid, announced=kind == "tool_call")
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
            return StateEvent(kind, update)
        return UnknownUpdate(str(kind), update)

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
        self.ended = time.time()
        for listener in list(self._listeners):
            listener(None)  # None marks the end for listeners

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
