"""Builders for raw ACP updates and service events, as an agent and the services send them."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from acp_kernel.services import events as se
from acp_kernel.services.terminals import ExitStatus


def text(t: str, kind: str = "agent_message_chunk") -> dict[str, Any]:
    return {"sessionUpdate": kind, "content": {"type": "text", "text": t}}


def thought(t: str) -> dict[str, Any]:
    return text(t, "agent_thought_chunk")


def tool_call(tid: str, title: str, kind: str = "execute", status: str = "pending", **extra: Any) -> dict[str, Any]:
    return {"sessionUpdate": "tool_call", "toolCallId": tid, "title": title, "kind": kind, "status": status, **extra}


def tool_update(tid: str, **fields: Any) -> dict[str, Any]:
    return {"sessionUpdate": "tool_call_update", "toolCallId": tid, **fields}


def plan(*entries: tuple[str, str]) -> dict[str, Any]:
    return {
        "sessionUpdate": "plan",
        "entries": [{"content": c, "status": s, "priority": "medium"} for c, s in entries],
    }


class FakeTerminal:
    """The subscribe/output API of acp_kernel.services.terminals.Terminal, driven by the test."""

    def __init__(self) -> None:
        self.chunks: list[str] = []
        self.exit_status: ExitStatus | None = None
        self._out: list[Callable[[str], None]] = []
        self._exit: list[Callable[[ExitStatus], None]] = []

    def output(self) -> tuple[str, bool]:
        return "".join(self.chunks), False

    def subscribe(self, on_output=None, on_exit=None, *, replay: bool = True):
        if on_output is not None:
            if replay and self.chunks:
                on_output("".join(self.chunks))
            self._out.append(on_output)
        if on_exit is not None:
            if self.exit_status is not None:
                on_exit(self.exit_status)
            else:
                self._exit.append(on_exit)

        def unsubscribe() -> None:
            if on_output in self._out:
                self._out.remove(on_output)
            if on_exit in self._exit:
                self._exit.remove(on_exit)

        return unsubscribe

    def emit(self, data: str) -> None:
        self.chunks.append(data)
        for cb in list(self._out):
            cb(data)

    def exit(self, code: int = 0) -> None:
        self.exit_status = ExitStatus(code, None)
        for cb in list(self._exit):
            cb(self.exit_status)
        self._exit.clear()

    @property
    def subscribers(self) -> int:
        return len(self._out)


def terminal_started(tid: str, terminal: Any, argv: tuple[str, ...] = ("make", "test"), note: str = "") -> se.TerminalStarted:
    return se.TerminalStarted("s1", tid, argv, "/tmp", False, terminal, note)


def permission_prompt(title: str = "Run rm -rf build", kind: str = "execute", tool_call_id: str = "t1") -> se.PermissionPrompt:
    from acp.schema import RequestPermissionRequest

    options = [
        {"optionId": "approve", "name": "Allow once", "kind": "allow_once"},
        {"optionId": "approve_for_session", "name": "Always allow", "kind": "allow_always"},
        {"optionId": "abort", "name": "Reject", "kind": "reject_once"},
    ]
    request = RequestPermissionRequest.model_validate(
        {
            "sessionId": "s1",
            "toolCall": {"toolCallId": tool_call_id, "title": title, "kind": kind, "rawInput": {"command": "rm -rf build"}},
            "options": options,
        }
    )
    loop = asyncio.get_running_loop()
    return se.PermissionPrompt(
        session_id="s1",
        request=request,
        options=[dict(o, rawKind=o["kind"]) for o in options],
        kind=kind,
        future=loop.create_future(),
        loop=loop,
        title=title,
    )


def elicitation_prompt() -> se.ElicitationPrompt:
    fields = {
        "name": {"type": "string", "title": "Project name", "minLength": 2},
        "count": {"type": "integer", "minimum": 1, "maximum": 10},
        "ratio": {"type": "number"},
        "public": {"type": "boolean", "default": False},
        "license": {"type": "string", "enum": ["MIT", "Apache-2.0"]},
        "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b", "c"]}},
    }
    loop = asyncio.get_running_loop()
    return se.ElicitationPrompt(
        session_id="s1",
        message="Configure <b>the</b> project",
        schema={"type": "object", "properties": fields, "required": ["name", "count"]},
        fields=fields,
        required=["name", "count"],
        future=loop.create_future(),
        loop=loop,
    )


#: A hostile message: raw HTML, a code span across a line break, math, a bare address.
URL_MESSAGE = "Sign in <img src=x onerror=alert(1)> `a\nb` $x$ $$y$$ \\(z\\) at https://evil.example/ or www.evil.example"


def url_prompt(url: str = "http://127.0.0.1:9/signin?next=%2F&a=<b>", host: str = "127.0.0.1",
               message: str = URL_MESSAGE, host_unicode: str = "") -> se.UrlElicitationPrompt:
    loop = asyncio.get_running_loop()
    return se.UrlElicitationPrompt(
        session_id="s1", elicitation_id="e1", message=message, url=url, host=host,
        future=loop.create_future(), loop=loop, host_unicode=host_unicode,
    )


class Frontend:
    """What a widget frontend receives over the comms (``comm_open``/``comm_msg``),
    and each model's state as it applies them (partial ``update`` messages merge)."""

    def __init__(self) -> None:
        self.messages: list[tuple[str, str, dict[str, Any]]] = []  # (msg_type, comm_id, data)
        self.models: dict[str, dict[str, Any]] = {}

    def record(self, msg_type: str, comm_id: str, data: dict[str, Any]) -> None:
        self.messages.append((msg_type, comm_id, data))
        if msg_type == "comm_open":
            self.models[comm_id] = dict(data.get("state", {}))
        elif msg_type == "comm_msg" and data.get("method") in ("update", "echo_update"):
            self.models.setdefault(comm_id, {}).update(data.get("state", {}))

    def opens(self, anywidget_id: str | None = None) -> list[str]:
        """Comm ids of the models opened (with this ``_anywidget_id``, if given)."""
        return [cid for kind, cid, data in self.messages if kind == "comm_open"
                and (anywidget_id is None or data.get("state", {}).get("_anywidget_id") == anywidget_id)]

    def sent(self, comm_id: str, method: str) -> list[dict[str, Any]]:
        """The ``comm_msg`` data of one method (``update``, ``custom``) sent to one model."""
        return [data for kind, cid, data in self.messages if kind == "comm_msg" and cid == comm_id
                and data.get("method") == method]


def recording_comm_class(frontend: Frontend) -> Any:
    """A comm class that hands every message to ``frontend`` instead of a kernel."""
    import comm

    class RecordingComm(comm.DummyComm):
        def publish_msg(self, msg_type: str, data: Any = None, metadata: Any = None, buffers: Any = None, **keys: Any) -> None:
            frontend.record(msg_type, self.comm_id, dict(data or {}))

    return RecordingComm
