"""JSON-RPC 2.0 framing for ACP: one message per ``\\n``-terminated line.

Pure logic, no I/O: the connection feeds bytes in and gets classified messages
out, so every edge case (oversized lines, noise, invalid UTF-8) is testable
without a process.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from itertools import accumulate, islice
from typing import Any, ClassVar, Literal, Union

import msgspec

DEFAULT_MAX_LINE = 64 * 1024 * 1024
#: Deepest nesting of arrays and objects accepted in one message (``Limits.json_depth``).
DEFAULT_MAX_DEPTH = 64

_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
# A bound decoder on str skips json.loads's per-call encoding sniffing.
_decode = json.JSONDecoder().decode
# msgspec reads the line's bytes three to four times faster than json. It is
# stricter (no NaN, no lone surrogate escape, no invalid UTF-8, no number past
# a double), so a line it refuses is read again by json: what is accepted, and
# why a line is refused, stay exactly json's (a property test compares them).
# Integers of any size stay integers in both (orjson makes floats of them).
_fast_decode = msgspec.json.Decoder().decode


# -- the stream's bulk, typed ------------------------------------------------------
#
# Most lines of a turn are text chunks with nothing but a session id, the update's kind and
# a text block, or tool call updates. One decoder reads a line into these fixed shapes (no
# unknown field, the types exact; the update's kind picks its shape) without a look at the
# line first: a 32-character chunk in 0.35 us against 0.89 for four dicts, and a tool call
# kept as a few strings and its payloads' JSON text, not a tree of dicts the garbage
# collector walks. Any other line, however near, is refused here and read by
# :func:`classify` as before. The field names are the schema's (tests check each line
# accepted here against the pinned ``acp`` models, and against what :func:`classify` reads).


class _TextBlock(msgspec.Struct, gc=False, forbid_unknown_fields=True):
    type: Literal["text"]
    text: str


class TextChunk(msgspec.Struct, gc=False, forbid_unknown_fields=True, tag_field="sessionUpdate"):
    """A chunk of a message, thought or prompt that is one text block and nothing else but,
    maybe, its message's id (claude-agent-acp sends one on every chunk; ``null`` is refused:
    :func:`classify` reads it as the dicts do)."""

    sessionUpdate: ClassVar[str]
    content: _TextBlock
    messageId: Union[str, msgspec.UnsetType] = msgspec.UNSET


class _AgentText(TextChunk, tag="agent_message_chunk"):
    sessionUpdate = "agent_message_chunk"


class _ThoughtText(TextChunk, tag="agent_thought_chunk"):
    sessionUpdate = "agent_thought_chunk"


class _UserText(TextChunk, tag="user_message_chunk"):
    sessionUpdate = "user_message_chunk"


class ToolUpdate(msgspec.Struct, gc=False, forbid_unknown_fields=True, tag_field="sessionUpdate"):
    """A ``tool_call`` / ``tool_call_update``: its scalars as strings, its payloads (content,
    locations, raw input and output, ``_meta``) as :class:`msgspec.Raw`, the JSON text
    itself, read only when somebody asks (an empty Raw: the field was not sent). A long
    turn keeps every update; as dicts, tens of thousands of them were most of what the
    garbage collector walked and most of the memory a tool call took."""

    sessionUpdate: ClassVar[str]
    toolCallId: str
    title: Union[str, None] = None
    kind: Union[str, None] = None
    status: Union[str, None] = None
    content: msgspec.Raw = msgspec.Raw(b"")
    locations: msgspec.Raw = msgspec.Raw(b"")
    rawInput: msgspec.Raw = msgspec.Raw(b"")
    rawOutput: msgspec.Raw = msgspec.Raw(b"")
    meta: msgspec.Raw = msgspec.field(default=msgspec.Raw(b""), name="_meta")


class _ToolCallStart(ToolUpdate, tag="tool_call"):
    sessionUpdate = "tool_call"


class _ToolCallProgress(ToolUpdate, tag="tool_call_update"):
    sessionUpdate = "tool_call_update"


class _Params(msgspec.Struct, gc=False, forbid_unknown_fields=True):
    sessionId: str
    update: Union[_AgentText, _ThoughtText, _UserText, _ToolCallStart, _ToolCallProgress]


class _Notification(msgspec.Struct, gc=False, forbid_unknown_fields=True):
    jsonrpc: Literal["2.0"]
    method: Literal["session/update"]
    params: _Params


_decode_update = msgspec.json.Decoder(_Notification).decode


def typed_update(line: bytes, max_depth: int = DEFAULT_MAX_DEPTH) -> tuple[str, TextChunk | ToolUpdate] | None:
    """A ``session/update`` notification of one of the shapes above, as ``(session id,
    update)``; None for every other line, and for a tool call nested deeper than
    ``max_depth`` could be (:func:`classify` reads those, as before). A payload is handed
    on unread: :func:`payload` reads it with the decoder :func:`classify` uses."""
    try:
        params = _decode_update(line).params
    except (ValueError, RecursionError):  # not exactly these shapes; msgspec's own depth bound
        return None
    update = params.update
    if type(update) is _ToolCallStart or type(update) is _ToolCallProgress:
        # The line's depth is 3 (message, params, update) and a payload's own: nested d deep,
        # a payload (whole JSON: msgspec skipped it) is at least 2d bytes. Only a line with
        # a payload that long is looked at (two counts of its every byte cost a third of
        # this): content of the usual items is shallow however many brackets its text holds
        # (read strictly typed, faster than the counts), anything else is counted.
        big = 2 * max_depth - 4
        long_content = len(update.content) >= big
        long_other = (len(update.rawInput) >= big or len(update.rawOutput) >= big or len(update.locations) >= big
                      or len(update.meta) >= big)
        if (big < 4 or long_content or long_other) \
                and not (long_content and not long_other and _shallow(update.content, max_depth)) \
                and line.count(b"[") + line.count(b"{") > max_depth:
            return None
        # The payloads were skipped, not read: what reading them would refuse, classify must see.
        if not line.isascii() and not _utf8(line):
            return None  # invalid UTF-8: the line is noise
        if (_INT_DIGITS and len(line) > _INT_DIGITS and _RUN_SEEN.search(line[::_RUN_STRIDE])
                and _LONG_RUN in line.translate(_DIGITS_AS_ZERO)):
            return None  # maybe an integer longer than json reads: maybe noise
    return params.sessionId, update


#: Python's bound on an integer's digits (0: none): json refuses a longer integer, and so
#: the line. A payload with a run of digits that long goes to classify. The run is looked
#: for as zeros in the line with every digit made a zero (a table lookup a byte, then one
#: substring search): the regex ``\d{N}`` was tried at every byte, 6 ns a byte, 0.75 ms of a
#: 120 KB file read's line, whose json.loads takes 0.1 ms.
_INT_DIGITS = sys.get_int_max_str_digits()
_DIGITS_AS_ZERO = bytes.maketrans(b"123456789", b"000000000")
_LONG_RUN = b"0" * (_INT_DIGITS + 1)
#: A run that long holds at least four bytes at positions a multiple of the stride, one after
#: another: only a line whose every stride-th byte shows four digits in a row is looked at
#: whole (a 100 KB line: a hundred bytes, against a pass over all of them).
_RUN_STRIDE = max(1, (_INT_DIGITS + 1) // 4)
_RUN_SEEN = re.compile(rb"\d{4}")


class _ShallowBlock(msgspec.Struct, gc=False, forbid_unknown_fields=True):
    type: str
    text: str


class _ShallowText(msgspec.Struct, gc=False, forbid_unknown_fields=True, tag_field="type", tag="content"):
    content: _ShallowBlock


class _ShallowDiff(msgspec.Struct, gc=False, forbid_unknown_fields=True, tag_field="type", tag="diff"):
    path: str
    newText: str
    oldText: Union[str, None] = None


class _ShallowTerminal(msgspec.Struct, gc=False, forbid_unknown_fields=True, tag_field="type", tag="terminal"):
    terminalId: str


#: Content of the usual items, nothing else in them: at most 3 levels deep (the list, an
#: item, its block), as every value's type is checked, a repeated member's too.
_decode_shallow_content = msgspec.json.Decoder(list[Union[_ShallowText, _ShallowDiff, _ShallowTerminal]]).decode
_SHALLOW_LEVELS = 3


def _shallow(content: msgspec.Raw, max_depth: int) -> bool:
    """Whether a tool call's ``content``, its only payload long enough to be too deep (the
    caller says which), is nested no deeper than ``max_depth`` allows all the same: content
    of the usual items (a file read's text, an edit's diff), read strictly typed. Code has
    brackets by the thousand, all inside that text; such a line went to :func:`classify` (a
    pass outside strings, then the dicts: 4x json.loads)."""
    if max_depth - 3 < _SHALLOW_LEVELS:
        return False
    try:
        _decode_shallow_content(content)
    except (ValueError, RecursionError):  # another shape, or deeper: classify says which
        return False
    return True


def _utf8(line: bytes) -> bool:
    try:
        line.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def text_chunk(line: bytes) -> tuple[str, str, str] | None:
    """A plain text chunk as ``(session id, sessionUpdate, text)``; None for every other line."""
    got = typed_update(line)
    if got is None or not isinstance(got[1], TextChunk):
        return None
    return got[0], got[1].sessionUpdate, got[1].content.text


def tool_update(line: bytes, max_depth: int = DEFAULT_MAX_DEPTH) -> tuple[str, ToolUpdate] | None:
    """A tool call update as ``(session id, update)``; None for every other line."""
    got = typed_update(line, max_depth)
    if got is None or not isinstance(got[1], ToolUpdate):
        return None
    return got[0], got[1]


def payload(raw: msgspec.Raw) -> Any:
    """A payload :func:`typed_update` left as JSON text, read as :func:`classify` reads it:
    by msgspec, or by json what msgspec refuses (a number past a double, a long integer)."""
    try:
        return _fast_decode(raw)
    except ValueError:
        return _decode(bytes(raw).decode("utf-8"))


class _InnerText(msgspec.Struct, gc=False):
    text: str


class _TextItem(msgspec.Struct, gc=False, tag_field="type", tag="content"):
    content: _InnerText


_decode_text_items = msgspec.json.Decoder(list[_TextItem]).decode


def text_items(raw: msgspec.Raw) -> list[str] | None:
    """The texts of a tool call's ``content`` left as JSON text, when every item is a
    ``content`` item whose block has a string ``text`` (a read's, a search's: the usual
    case), read in one typed pass; None for any other content (read it as dicts). The
    texts are the ones the dicts give (other members are passed over, as the dicts'
    reader passes them over; a property test compares the two)."""
    try:
        return [item.content.text for item in _decode_text_items(raw)]
    except ValueError:
        return None


class _UpdateText(msgspec.Struct, gc=False):
    update: msgspec.Raw


class _LineText(msgspec.Struct, gc=False):
    params: _UpdateText


_decode_text = msgspec.json.Decoder(_LineText).decode


def update_text(line: bytes) -> msgspec.Raw:
    """The ``update`` of a line :func:`typed_update` took, as the JSON text the agent wrote
    (msgspec writes a Raw back as it is)."""
    return _decode_text(line).params.update


def update_of(line: bytes) -> Any:
    """The ``update`` of a line :func:`typed_update` took, as :func:`classify` reads it."""
    return _fast_decode(line)["params"]["update"]


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


@dataclass(frozen=True, slots=True)
class TooDeep:
    """A line nested deeper than the limit, refused before decoding.

    ``json`` decodes recursively: a 2 KB line of ``[[[[...`` raises
    RecursionError. What little the peer must hear back (the ``id``, and
    whether a ``method`` was named) is read without decoding the line.
    """

    line: bytes
    depth: int
    limit: int
    has_id: bool = False
    id: Any = None
    method: str | None = None

    def describe(self) -> str:
        # The scan stops early on huge lines: the depth is then "at least".
        at_least = "at least " if len(self.line) > _SCAN_CHUNK else ""
        return f"message nested {at_least}{self.depth:,} levels deep (the limit is {self.limit}, limits.json_depth)"


# A JSON string (the unrolled form: linear, no backtracking), or a bracket.
_STRING = rb'"[^"\\]*(?:\\.[^"\\]*)*"'
_TOKENS = re.compile(_STRING + rb"|[\[\]{}]", re.S)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_STEP = [0] * 256
_STEP[ord("[")] = _STEP[ord("{")] = 1
_STEP[ord("]")] = _STEP[ord("}")] = -1
_WALK_TOKENS = 4096
_SCALAR = re.compile(rb'\s*:\s*(-?\d+(?![.eE\d])|"[^"\\]*(?:\\.[^"\\]*)*"|null)')


def _outside_strings(line: bytes) -> bytes:
    """The bytes of ``line`` outside JSON strings. Escapes go first (``\\\\``
    then ``\\"``: a backslash only occurs inside strings), then every other
    piece between quotes is a string. 3x faster than a string regex. On
    invalid JSON it agrees with the decoder up to where the decoder fails."""
    if b"\\" in line:
        line = line.replace(b"\\\\", b"").replace(b'\\"', b"")
    return b"".join(line.split(b'"')[::2])


_SCAN_CHUNK = 1 << 16


def nesting_depth(line: bytes, stop_above: int | None = None) -> int:
    """The deepest nesting of arrays and objects, brackets inside strings
    not counted. No recursion and no Python loop per byte: strings are cut
    out, the brackets left are summed by ``accumulate`` in chunks. With
    ``stop_above``, the scan ends at the first chunk that goes deeper (a
    64 MiB bomb costs one chunk): the result is then a lower bound."""
    brackets = _outside_strings(line).translate(None, _NOT_BRACKETS)
    deepest = level = 0
    step = _STEP.__getitem__
    for start in range(0, len(brackets), _SCAN_CHUNK):
        sums = list(accumulate(map(step, brackets[start:start + _SCAN_CHUNK]), initial=level))
        deepest = max(deepest, max(sums))
        level = sums[-1]
        if stop_above is not None and deepest > stop_above:
            break
    return deepest


def _too_deep(line: bytes, depth: int, limit: int) -> TooDeep:
    """Read the top-level ``id`` and ``method`` of a too-deep line by a token
    walk (no decoding), so a request can still be answered."""
    level = 0
    has_id, rid, method = False, None, None
    # Members are looked for among the first _WALK_TOKENS tokens only: a
    # request whose id comes later goes unanswered (it is still reported).
    for m in islice(_TOKENS.finditer(line), _WALK_TOKENS):
        tok = m.group()
        c = tok[0]
        if c == 0x22:  # a string: a key at depth 1?
            if level == 1 and tok in (b'"id"', b'"method"'):
                v = _SCALAR.match(line, m.end())
                if v is not None:
                    try:
                        value = json.loads(v.group(1))
                    except ValueError:
                        continue
                    if tok == b'"id"' and not has_id and (value is None or type(value) in (int, str)):
                        has_id, rid = True, value
                    elif tok == b'"method"' and method is None and type(value) is str:
                        method = value
            if has_id and method is not None:
                break
        elif c in (0x5B, 0x7B):
            level += 1
        else:
            level -= 1
    return TooDeep(line, depth, limit, has_id, rid, method)


# Message kinds, as small ints for a fast dispatch in the reader loop.
REQUEST, NOTIFICATION, RESPONSE = 1, 2, 3


def classify(line: bytes, max_depth: int = DEFAULT_MAX_DEPTH) -> tuple[int, dict[str, Any]] | Noise | TooDeep:
    """Parse one line into ``(kind, message)``, :class:`Noise` or :class:`TooDeep`.

    Lenient where real agents are sloppy (a missing ``"jsonrpc"`` member is
    accepted), strict where guessing would be wrong. The depth is scanned
    only when the line has more than ``max_depth`` opening brackets at all
    (two C-level counts): ordinary lines pay nothing more.
    """
    if line.count(b"[") + line.count(b"{") > max_depth:
        depth = nesting_depth(line, stop_above=max_depth)
        if depth > max_depth:
            return _too_deep(line, depth, max_depth)
    try:
        msg = _fast_decode(line)
    except ValueError:  # msgspec.DecodeError
        return _classify_slow(line)
    if type(msg) is dict and "id" not in msg and type(msg.get("method")) is str:
        return NOTIFICATION, msg  # the stream's bulk: one test, no second call
    return _kind(line, msg)


def _classify_slow(line: bytes) -> tuple[int, dict[str, Any]] | Noise:
    """The stdlib's reading of a line msgspec refused: json's leniency, its reasons."""
    try:
        msg = _decode(line.decode("utf-8"))
    except UnicodeDecodeError:
        return Noise(line, "invalid UTF-8")
    except RecursionError:  # pragma: no cover - the depth scan refuses these first
        return Noise(line, "nested too deeply to decode")
    except ValueError:
        return Noise(line, "not JSON")
    return _kind(line, msg)


def _kind(line: bytes, msg: Any) -> tuple[int, dict[str, Any]] | Noise:
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
