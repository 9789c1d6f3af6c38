"""JSON-RPC 2.0 framing for ACP: one message per ``\\n``-terminated line.

Pure logic, no I/O: the connection feeds bytes in and gets classified messages
out, so every edge case (oversized lines, noise, invalid UTF-8) is testable
without a process.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Union

DEFAULT_MAX_LINE = 64 * 1024 * 1024

_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
# A bound decoder on str skips json.loads's per-call encoding sniffing.
_decode = json.JSONDecoder().decode


@dataclass(frozen=True, slots=True)
class Oversized:
    """A line longer than the limit; its bytes were discarded, not kept."""

    size: int


@dataclass(frozen=True, slots=True)
class Noise:
    """A stdout line that is not a JSON-RPC message (a log line, a bare value...)."""

    line: bytes
    reason: str

    def preview(self, limit: int = 200) -> str:
        text = self.line[:limit].decode("utf-8", "replace")
        return text + ("..." if len(self.line) > limit else "")


class LineSplitter:
    """Split a byte stream into lines, never holding more than ``max_line`` bytes.

    A line over the limit is dropped as it streams past (memory stays bounded)
    and reported once as :class:`Oversized` when its newline arrives.
    """

    __slots__ = ("max_line", "_parts", "_size", "_skipping")

    def __init__(self, max_line: int = DEFAULT_MAX_LINE) -> None:
        self.max_line = max_line
        # Pieces of the unterminated line: a list, not a growing bytearray,
        # whose reallocations could briefly need twice the limit.
        self._parts: list[bytes] = []
        self._size = 0
        self._skipping = 0  # bytes dropped so far of an oversized line

    def feed(self, data: bytes) -> list[Union[bytes, Oversized]]:
        """Complete lines and oversize reports, in order."""
        out: list[Union[bytes, Oversized]] = []
        start = 0
        if self._skipping:
            nl = data.find(b"\n")
            if nl < 0:
                self._skipping += len(data)
                return out
            out.append(Oversized(self._skipping + nl))
            self._skipping = 0
            start = nl + 1
        elif self._parts:
            nl = data.find(b"\n")
            if nl < 0:
                self._keep(data)
                return out
            if self._size + nl > self.max_line:
                out.append(Oversized(self._size + nl))
            else:
                self._parts.append(data[:nl])
                line = b"".join(self._parts)
                if line.strip():
                    out.append(line)
            self._parts = []
            self._size = 0
            start = nl + 1
        end = data.rfind(b"\n")
        if end >= start:
            for line in data[start:end].split(b"\n"):
                if len(line) > self.max_line:
                    out.append(Oversized(len(line)))
                elif line.strip():
                    out.append(line)
            start = end + 1
        if start < len(data):
            self._keep(data[start:] if start else data)
        return out

    def _keep(self, part: bytes) -> None:
        """Buffer an unterminated piece, or start skipping if the line would
        pass the limit: the buffer never grows beyond ``max_line``."""
        if self._size + len(part) > self.max_line:
            self._skipping = self._size + len(part)
            self._parts = []
            self._size = 0
        else:
            self._parts.append(part)
            self._size += len(part)

    def flush(self) -> list[Union[bytes, Oversized]]:
        """At EOF: the unterminated last line, if any."""
        if self._skipping:
            size, self._skipping = self._skipping, 0
            return [Oversized(size)]
        line = b"".join(self._parts)
        self._parts = []
        self._size = 0
        return [line] if line.strip() else []


# Message kinds, as small ints for a fast dispatch in the reader loop.
REQUEST, NOTIFICATION, RESPONSE = 1, 2, 3


def classify(line: bytes) -> tuple[int, dict[str, Any]] | Noise:
    """Parse one line into ``(kind, message)`` or :class:`Noise`.

    Lenient where real agents are sloppy (a missing ``"jsonrpc"`` member is
    accepted), strict where guessing would be wrong.
    """
    try:
        msg = _decode(line.decode("utf-8"))
    except UnicodeDecodeError:
        return Noise(line, "invalid UTF-8")
    except ValueError:
        return Noise(line, "not JSON")
    if type(msg) is not dict:
        return Noise(line, f"JSON {type(msg).__name__}, not a JSON-RPC object")
    method = msg.get("method")
    if method is not None:
        if type(method) is not str:
            return Noise(line, "method is not a string")
        if "id" in msg:
            rid = msg["id"]
            if rid is None or type(rid) in (int, str):
                return REQUEST, msg
            return Noise(line, "request id is neither a number nor a string")
        return NOTIFICATION, msg
    if "id" in msg and ("result" in msg or "error" in msg):
        return RESPONSE, msg
    return Noise(line, "JSON object that is neither request, notification nor response")


def encode(msg: dict[str, Any]) -> bytes:
    """One message as one line. ``ensure_ascii=False`` keeps non-ASCII compact;
    JSON escapes newlines inside strings, so the frame cannot break."""
    return _dumps(msg).encode("utf-8", "backslashreplace") + b"\n"


def request(rid: int | str, method: str, params: Any = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        msg["params"] = params
    return msg


def notification(method: str, params: Any = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        msg["params"] = params
    return msg


def result(rid: int | str | None, value: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "result": value}


def error(rid: int | str | None, code: int, message: str, data: Any = None) -> dict[str, Any]:
    err: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        err["data"] = data
    return {"jsonrpc": "2.0", "id": rid, "error": err}
