"""Errors with JSON-RPC codes, and the ones the notebook explains to a person."""

from __future__ import annotations

import json
from typing import Any

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
REQUEST_CANCELLED = -32800
AUTH_REQUIRED = -32000
RESOURCE_NOT_FOUND = -32002


class AcpError(Exception):
    """Base class of everything this package raises on purpose."""


class Abandoned(AcpError):
    """The question was answered elsewhere while the person was asked (a
    stdin question given up by :func:`acp_kernel.compat.stdin_reader`)."""


class RpcError(AcpError):
    """A JSON-RPC error: raised by handlers to answer with it, and by
    :meth:`Connection.request` when the peer answered with one."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        short = short_data(data)
        super().__init__(f"{message} (code {code})" + (f": {short}" if short else ""))
        self.code = code
        self.message = message
        self.data = data

    @classmethod
    def from_dict(cls, err: Any) -> "RpcError":
        if not isinstance(err, dict):
            return cls(INTERNAL_ERROR, f"malformed error object: {err!r:.200}")
        code = err.get("code")
        return cls(
            code if isinstance(code, int) else INTERNAL_ERROR,
            str(err.get("message", "")),
            err.get("data"),
        )


def short_data(data: Any, limit: int = 200) -> str:
    """An error's ``data`` on one bounded line: a string as is, the one
    string of ``{"details": "..."}`` (and the like), else compact JSON."""
    if data is None or data == "" or data == {} or data == []:
        return ""
    if isinstance(data, dict):
        texts = [v for v in data.values() if isinstance(v, str)]
        for key in ("details", "detail", "message", "error", "reason"):
            if isinstance(data.get(key), str):
                data = data[key]
                break
        else:
            if len(data) == 1 and len(texts) == 1:
                data = texts[0]
    if isinstance(data, str):
        text = data
    else:
        try:
            text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=repr)
        except (TypeError, ValueError, RecursionError):
            text = repr(data)
    text = " ".join(text[: limit * 4].split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


class ConnectionClosed(AcpError):
    """The agent went away (exited, crashed, closed stdout) with requests pending."""

    def __init__(self, message: str, *, returncode: int | None = None, stderr: str = "") -> None:
        super().__init__(message)
        self.returncode = returncode
        self.stderr = stderr

    def explain(self) -> str:
        parts = [str(self)]
        if self.returncode is not None and self.returncode < 0:
            # asyncio reports death by signal N as -N: name the signal.
            import signal

            try:
                name = signal.Signals(-self.returncode).name
            except ValueError:
                name = f"signal {-self.returncode}"
            parts.append(f"killed by {name}")
        elif self.returncode is not None:
            parts.append(f"exit status {self.returncode}")
        text = "; ".join(parts)
        if self.stderr.strip():
            text += "\n--- agent stderr (last lines) ---\n" + self.stderr.rstrip()
        return text


class AgentStalled(ConnectionClosed):
    """The agent stopped reading its stdin with the client's queue to it
    full: it is not fed any more (the connection is closed, the agent will
    be restarted before the next prompt)."""


class RequestTimeout(AcpError, TimeoutError):
    """A request (not ``session/prompt``) got no answer within its limit.
    Also a ``TimeoutError``, which ``Connection.request`` raised before.

    The message itself carries the agent's stderr tail (front-ends that
    show only ``str(exc)`` still show why the agent was stuck)."""

    def __init__(self, peer: str, method: str, seconds: float, setting: str, stderr: str = "") -> None:
        text = (
            f"{peer} did not answer {method!r} within {seconds:g} s "
            f"(limits.{setting}; raise it under \"limits\" in the config file if the agent is just slow)"
        )
        tail = "\n".join(stderr.rstrip().splitlines()[-20:])
        if tail.strip():
            text += "\n--- agent stderr (last lines) ---\n" + tail
        super().__init__(text)
        self.peer = peer
        self.method = method
        self.seconds = seconds
        self.setting = setting
        self.stderr = stderr

    def explain(self) -> str:
        return str(self)


class PassthroughError(AcpError):
    """A passthrough terminal that cannot start or has gone; the text says what to do."""


class AuthRequired(AcpError):
    """The agent refused to open a session until the user logs in."""

    def __init__(self, methods: list[dict[str, Any]], message: str = "") -> None:
        super().__init__(message or "the agent requires authentication")
        self.methods = methods

