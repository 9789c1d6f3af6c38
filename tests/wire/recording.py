"""Reading a scripted agent's wire recording, and checking it against the ACP schema.

The scripted agent's ``record`` scenario key writes every message the client
sent it (one JSON line each) and every request it sent the client
(``{"agent_request": ...}``), so the client's answers can be matched to the
method they answer. :func:`check` validates each client message against the
SDK's model for its method (``acp.schema``, the pinned agent-client-protocol
package) and requires it to round-trip: a key the model does not know, or a
value it would coerce, fails.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: Client -> agent requests: method -> model name (a tuple: picked by the params' "type").
REQUESTS: dict[str, Any] = {
    "initialize": "InitializeRequest",
    "authenticate": "AuthenticateRequest",
    "session/new": "NewSessionRequest",
    "session/load": "LoadSessionRequest",
    "session/resume": "ResumeSessionRequest",
    "session/list": "ListSessionsRequest",
    "session/close": "CloseSessionRequest",
    "session/delete": "DeleteSessionRequest",
    "logout": "LogoutRequest",
    "session/prompt": "PromptRequest",
    "session/set_mode": "SetSessionModeRequest",
    "session/set_config_option": {"boolean": "SetSessionConfigOptionBooleanRequest",
                                  None: "SetSessionConfigOptionSelectRequest"},
}
#: Client -> agent notifications.
NOTIFICATIONS = {"session/cancel": "CancelNotification"}
#: Our answers to the agent's requests: the method asked -> result model(s).
RESPONSES: dict[str, Any] = {
    "session/request_permission": "RequestPermissionResponse",
    "fs/read_text_file": "ReadTextFileResponse",
    "fs/write_text_file": "WriteTextFileResponse",
    "terminal/create": "CreateTerminalResponse",
    "terminal/output": "TerminalOutputResponse",
    "terminal/wait_for_exit": "WaitForTerminalExitResponse",
    "terminal/kill": "KillTerminalResponse",
    "terminal/release": "ReleaseTerminalResponse",
    "elicitation/create": {"accept": "AcceptElicitationResponse", "decline": "DeclineElicitationResponse",
                           "cancel": "CancelElicitationResponse"},
}
#: Agent -> client notifications the client reads (it sends none of these).
RECEIVED = {"session/update": "SessionNotification", "elicitation/complete": "CompleteElicitationNotification"}
#: Methods the SDK's schema does not have (unstable or removed) -> the keys and types they take.
UNSTABLE = {"session/set_model": {"sessionId": str, "modelId": str}}


@dataclass
class Sent:
    """One message the client sent: a request, a notification or an answer."""

    kind: str  # "request", "notification" or "response"
    method: str  # for a response: the method of the agent's request it answers
    message: dict[str, Any]


def load(path: Path) -> list[Sent]:
    asked: dict[str, str] = {}
    out: list[Sent] = []
    for line in path.read_text().splitlines():
        msg = json.loads(line)
        if "agent_request" in msg:
            req = msg["agent_request"]
            asked[json.dumps(req["id"])] = req["method"]
        elif "method" in msg:
            out.append(Sent("request" if "id" in msg else "notification", msg["method"], msg))
        else:
            out.append(Sent("response", asked.get(json.dumps(msg.get("id")), "?"), msg))
    return out


def _model(table_entry: Any, key: Any) -> Any:
    from acp import schema

    name = table_entry.get(key, table_entry.get(None)) if isinstance(table_entry, dict) else table_entry
    return getattr(schema, name)


def round_trip(model: Any, data: Any) -> None:
    """Validate ``data`` with ``model`` and require the dump to equal it."""
    dumped = model.model_validate(data).model_dump(by_alias=True, exclude_unset=True, mode="json")
    assert dumped == data, f"{model.__name__} does not round-trip:\n sent   {data}\n schema {dumped}"


def check(sent: Sent) -> str:
    """Validate one message; returns the name of what it was checked against."""
    from acp import schema

    msg = sent.message
    assert msg.get("jsonrpc") == "2.0", msg
    if sent.kind == "response":
        assert set(msg) in ({"jsonrpc", "id", "result"}, {"jsonrpc", "id", "error"}), msg
        assert type(msg["id"]) in (int, str), msg
        if "error" in msg:
            round_trip(schema.Error, msg["error"])
            return "Error"
        entry = RESPONSES[sent.method]
        result = msg["result"]
        model = _model(entry, result.get("action") if isinstance(result, dict) else None)
        round_trip(model, result)
        return model.__name__
    params = msg.get("params")
    if sent.kind == "notification":
        assert set(msg) == {"jsonrpc", "method", "params"}, msg
        model = _model(NOTIFICATIONS[sent.method], None)
    else:
        assert set(msg) == {"jsonrpc", "id", "method", "params"} and type(msg["id"]) in (int, str), msg
        if sent.method in UNSTABLE:
            shape = UNSTABLE[sent.method]
            assert set(params) == set(shape) and all(type(params[k]) is t for k, t in shape.items()), params
            return "unstable " + sent.method
        model = _model(REQUESTS[sent.method], params.get("type") if isinstance(params, dict) else None)
    round_trip(model, params)
    return model.__name__
