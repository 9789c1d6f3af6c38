"""The CLI printer writes a burst of events at once (one ``encode_lines`` for its tool call
lines, one clean for its stderr lines): the bytes must be those of each event written on
its own, as it stood at its event, for any input a hostile agent sends (controls, escape
sequences, bidi, lone surrogates, newlines in titles, invalid UTF-8)."""

from __future__ import annotations

import asyncio
import io
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from acp_kernel.client.turn import Turn
from acp_kernel.frontends import cli
from acp_kernel.protocol import framing
from acp_kernel.termsafe import json_safe

#: Characters a hostile agent sends, among plain ones.
HOSTILE = st.lists(st.sampled_from(list("ab ./\n\t\r\x00\x07\x1b[]0;m\x7f\x85\x9b\x9c\x9d\u00a0\u2028\u2029\u202e\u2066é漢")
                                   + ["\ud800", "\udfff", "\x1b]52;c;eA==\x07", "\x1b[2J", "\r\n"]), max_size=12).map("".join)
WORDS = st.one_of(st.sampled_from(["read", "edit", "pending", "in_progress", "completed", "failed"]), HOSTILE)


@st.composite
def updates(draw: Any) -> list[tuple[bytes, bool]]:
    """Lines of a turn: tool calls (announced, changed, finished), agent text and plans, each
    written as JSON by an agent that escapes non-ASCII or not (then a lone surrogate is
    invalid UTF-8)."""
    out = []
    for _ in range(draw(st.integers(1, 14))):
        tid = draw(st.sampled_from(["t1", "t2", "t3"]) | HOSTILE)
        what = draw(st.sampled_from(["tool_call", "tool_call_update", "tool_call_update", "agent_message_chunk", "plan"]))
        if what == "agent_message_chunk":
            update: dict[str, Any] = {"sessionUpdate": what, "content": {"type": "text", "text": draw(HOSTILE)}}
        elif what == "plan":
            update = {"sessionUpdate": what, "entries": [{"content": draw(HOSTILE), "status": "pending", "priority": "low"}]}
        else:
            update = {"sessionUpdate": what, "toolCallId": tid}
            for key, values in (("title", HOSTILE), ("kind", WORDS), ("status", WORDS)):
                if draw(st.booleans()):
                    update[key] = draw(values)
            if draw(st.booleans()):
                update["content"] = [{"type": "content", "content": {"type": "text", "text": draw(HOSTILE) * 3}}]
        line = {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s1", "update": update}}
        escaped = draw(st.booleans())
        out.append((json.dumps(line, ensure_ascii=escaped).encode("utf-8", "surrogatepass"), escaped))
    return out


def _apply(turn: Turn, line: bytes) -> None:
    """A line as the client applies it: read typed when it can be, else as its dict."""
    typed = framing.typed_update(line)
    if typed is not None and isinstance(typed[1], framing.ToolUpdate):
        turn.apply_tool(typed[1], line)
    else:
        turn.apply_update(json.loads(line.decode("utf-8", "surrogatepass"))["params"]["update"])


def _json_line(event: Any) -> str:
    """One event's JSON line, as the printer wrote each event on its own before bursts."""
    if type(event).__name__ == "ToolCallEvent":
        try:
            text = cli._msgspec_encoder().encode(cli._tool_json(event, event.wire)).decode("utf-8")
        except (UnicodeEncodeError, TypeError, ValueError, OverflowError):
            text = cli._std_encode(cli._tool_json(event, event.raw))
        return json_safe(text) + "\n"
    return _alone("json", event)[0]


def _alone(fmt: str, event: Any) -> tuple[str, str]:
    """What a printer writes of one event alone."""
    out, err = io.StringIO(), io.StringIO()
    printer = cli._Printer(fmt, cli._Out(out), cli._Out(err))
    printer(event)
    printer.flush()
    return out.getvalue(), err.getvalue()


def _burst(fmt: str, lines: list[tuple[bytes, bool]], expect: Any) -> tuple[str, str, str]:
    """What the printer writes for ``lines`` applied in one burst (the loop does not turn
    between them), and what ``expect(event)`` makes of each event as it comes."""

    async def run() -> tuple[str, str, str]:
        out, err = io.StringIO(), io.StringIO()
        printer = cli._Printer(fmt, cli._Out(out), cli._Out(err))
        turn = Turn("s1")
        expected: list[str] = []
        turn.subscribe(printer)
        turn.subscribe(lambda event: expected.append(expect(event)))
        for line, _ in lines:
            _apply(turn, line)
        await asyncio.sleep(0)  # the loop runs the gathered write
        printer(None)
        return out.getvalue(), err.getvalue(), "".join(expected)

    return asyncio.run(run())


@settings(max_examples=150, deadline=None)
@given(updates())
def test_a_json_burst_is_each_event_s_line_in_order(lines: list[tuple[bytes, bool]]) -> None:
    out, err, expected = _burst("json", lines, _json_line)
    assert out == expected and not err


def _at_once(fmt: str, lines: list[tuple[bytes, bool]]) -> tuple[str, str]:
    """What the printer writes for ``lines`` with no loop running: each event written at once."""
    out, err = io.StringIO(), io.StringIO()
    printer = cli._Printer(fmt, cli._Out(out), cli._Out(err))
    turn = Turn("s1")
    turn.subscribe(printer)
    for line, _ in lines:
        _apply(turn, line)
    printer(None)
    return out.getvalue(), err.getvalue()


@settings(max_examples=150, deadline=None)
@given(updates())
def test_a_text_burst_is_what_each_event_writes_at_once(lines: list[tuple[bytes, bool]]) -> None:
    # (Not agent text: a burst's is cleaned as one, so a sequence split across its chunks goes whole.)
    lines = [(line, escaped) for line, escaped in lines if b"agent_message_chunk" not in line]
    out, err, _ = _burst("text", lines, lambda event: "")
    assert (out, err) == _at_once("text", lines)


def _burst_to(fmt: str, lines: list[tuple[bytes, bool]], out: Any) -> None:
    async def run() -> None:
        printer = cli._Printer(fmt, cli._Out(out), cli._Out(io.StringIO()))
        turn = Turn("s1")
        turn.subscribe(printer)
        for line, _ in lines:
            _apply(turn, line)
        printer._emit("tail\n" if fmt == "text" else '{"type":"end"}\n')
        await asyncio.sleep(0)
        printer(None)

    asyncio.run(run())


@settings(max_examples=100, deadline=None)
@given(updates(), st.sampled_from(["json", "text"]))
def test_json_lines_go_to_a_utf8_stream_s_bytes_as_its_text_layer_would_write_them(lines, fmt) -> None:
    """JSON lines are written as bytes into a UTF-8 stream's buffer (not decoded and encoded
    again): the stream gets exactly what its text layer would have written, in order with
    text written before; a stream in another encoding gets text, as before."""
    want = io.StringIO()
    _burst_to(fmt, lines, want)
    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding="utf-8", write_through=False)
    stream.write("before\n")  # text still in the text layer: written first
    _burst_to(fmt, lines, stream)
    stream.flush()
    assert raw.getvalue() == ("before\n" + want.getvalue()).encode("utf-8")
    latin = io.BytesIO()
    stream = io.TextIOWrapper(latin, encoding="latin-1", errors="strict")
    _burst_to(fmt, lines, stream)
    stream.flush()
    assert latin.getvalue() == want.getvalue().encode("latin-1", "replace")


def test_a_closed_pipe_under_json_lines_marks_the_output_broken() -> None:
    class Closed(io.BytesIO):
        def write(self, data: Any) -> int:
            raise BrokenPipeError(32, "Broken pipe")

    out = cli._Out(io.TextIOWrapper(Closed(), encoding="utf-8"))
    out.write_utf8(b'{"type":"end"}\n')
    assert out.broken
    out.write_utf8(b"more\n")  # dropped, no error
