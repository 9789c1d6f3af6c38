"""One list of turn event kinds, and every renderer handles every kind in it.

The list is :data:`acp_kernel.client.turn.TURN_EVENTS`. A new kind is added
there (and, for the services', to ``SERVICE_EVENTS``) with a sample below;
then each test here fails until every renderer has a handler for it: the live
views' table, the static transcript's, the CLI's JSON and text.
"""

from __future__ import annotations

import dataclasses
import inspect
import io
import json
import logging
from collections.abc import Callable
from typing import Any

import pytest

from acp_kernel.client import turn as tm
from acp_kernel.client.turn import TURN_EVENTS, Turn
from acp_kernel.services import events as se
from acp_kernel.services.terminals import ExitStatus
from acp_kernel.view import TERMINAL, RecordingSink, TurnOutput, TurnView, render_markdown, transcript, turnbase
from acp_kernel.view.eventtable import missing
from tests.hostile.render import live

from .helpers import FakeTerminal, elicitation_prompt, permission_prompt, plan, terminal_started, text, tool_call, url_prompt

IMG = "<img src=x onerror=alert(1)>"


def _terminal(turn: Turn) -> se.TerminalStarted:
    term = FakeTerminal()
    term.emit(f"out {IMG}\n")
    ev = terminal_started("term-1", term, note=f"ran via the shell {IMG}")
    turn.add(ev)
    return ev


def _exited(turn: Turn) -> se.TerminalExited:
    ev = se.TerminalExited("s1", "term-1", ExitStatus(0, None), "exited")
    turn.add(ev)
    return ev


def _edited(turn: Turn) -> tm.MessageEdit:
    """An earlier message replaced by id (issue 27): the agent sends m1, m2, then m1 again whole."""
    def said(body: str, mid: str) -> dict[str, Any]:
        return {"sessionUpdate": "agent_message_chunk", "messageId": mid, "content": {"type": "text", "text": body}}
    turn.apply_update(said(f"first {IMG}", "m1"))
    turn.apply_update(said(f"second {IMG}", "m2"))
    ev = turn.apply_update(said(f"first {IMG}, whole again", "m1"))
    assert type(ev) is tm.MessageEdit
    return ev


def _added(make: Callable[[], Any]) -> Callable[[Turn], Any]:
    def add(turn: Turn) -> Any:
        ev = make()
        turn.add(ev)
        return ev
    return add


#: One sample per kind, added to a turn the way a session adds it (in this order).
SAMPLES: dict[type, Callable[[Turn], Any]] = {
    tm.Chunk: lambda turn: turn.apply_update(text(f"Hello {IMG}\n\n")),
    tm.MessageEdit: lambda turn: _edited(turn),
    se.TerminalStarted: _terminal,
    tm.ToolCallEvent: lambda turn: turn.apply_update(
        tool_call("t1", f"Run {IMG}", "execute", "in_progress", content=[{"type": "terminal", "terminalId": "term-1"}])),
    se.TerminalExited: _exited,
    tm.PlanEvent: lambda turn: turn.apply_update(plan((f"step {IMG}", "pending"))),
    tm.StateEvent: lambda turn: turn.apply_update({"sessionUpdate": "current_mode_update", "currentModeId": "code"}),
    tm.UnknownUpdate: lambda turn: turn.apply_update({"sessionUpdate": "_vendor/thing", "x": IMG}),
    se.Notice: _added(lambda: se.Notice("warning", f"careful {IMG}", "s1")),
    se.FileRead: _added(lambda: se.FileRead("s1", "/w/a.py", None, None, 10)),
    se.FileWritten: _added(lambda: se.FileWritten("s1", f"/w/{IMG}.py", True, 12)),
    se.PermissionPrompt: _added(lambda: permission_prompt(title=f"Run {IMG}")),
    se.PermissionResolved: _added(lambda: se.PermissionResolved("s1", "t9", f"Read {IMG}", "allow", "allow_once", "policy")),
    se.ElicitationPrompt: _added(elicitation_prompt),
    se.UrlElicitationPrompt: _added(url_prompt),
    se.ElicitationCompleted: lambda turn: _completed(turn),
}


def _completed(turn: Turn) -> se.ElicitationCompleted:
    prompt = next(ev for ev in turn.events if isinstance(ev, se.UrlElicitationPrompt))
    prompt.completed = True
    ev = se.ElicitationCompleted("s1", prompt.elicitation_id, prompt)
    turn.add(ev)
    return ev


def every_kind(turn: Turn) -> list[Any]:
    """A sample of every kind, added to ``turn``; the events, in order."""
    events = [make(turn) for make in SAMPLES.values()]
    assert [type(ev) for ev in events] == list(SAMPLES)
    return events


def test_every_kind_in_the_list_has_a_sample_here():
    assert set(SAMPLES) == set(TURN_EVENTS) and len(TURN_EVENTS) == len(set(TURN_EVENTS))


def test_the_services_list_every_event_class_they_define():
    defined = {cls for name, cls in vars(se).items()
               if inspect.isclass(cls) and cls.__module__ == se.__name__ and dataclasses.is_dataclass(cls)}
    assert defined == set(se.SERVICE_EVENTS)
    assert set(se.SERVICE_EVENTS) <= set(TURN_EVENTS)


@pytest.mark.parametrize("table", [turnbase.HANDLERS, transcript.HANDLERS], ids=["live views", "transcript"])
def test_every_table_has_a_handler_for_every_kind(table):
    assert missing(table) == []


def _no_unhandled(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "acp_kernel.view.eventtable"]


@pytest.mark.parametrize("make", [
    lambda turn, sink: TurnView(turn, sink),
    lambda turn, sink: TurnView(turn, sink, frontend=TERMINAL),
    lambda turn, sink: TurnOutput(turn, sink),
], ids=["markdown displays", "append only", "one widget"])
async def test_every_live_view_renders_every_kind(make, frontend, caplog):
    caplog.set_level(logging.WARNING)
    turn, sink = Turn("s1"), RecordingSink()
    view = make(turn, sink)
    prompts = [ev for ev in every_kind(turn)
               if isinstance(ev, (se.PermissionPrompt, se.ElicitationPrompt, se.UrlElicitationPrompt))]
    for prompt in prompts:
        prompt.cancel()
    turn.finish("end_turn")
    view.close()
    assert view.errors == 0 and _no_unhandled(caplog) == []
    for data in sink.outputs():
        assert live(data.get("text/markdown", "")) == [], data


async def test_the_transcript_renders_every_kind(caplog):
    caplog.set_level(logging.WARNING)
    turn = Turn("s1")
    every_kind(turn)
    turn.finish("end_turn")
    md = render_markdown(turn)
    assert _no_unhandled(caplog) == [] and live(md) == []
    assert "unknown update" in md and "Permission" in md and "The agent asks" in md


class Unlisted:
    """An event class emitted without being listed in TURN_EVENTS."""

    def __repr__(self) -> str:
        return f"Unlisted({IMG!r})"


async def test_an_unlisted_event_is_shown_and_logged_never_raised(caplog):
    caplog.set_level(logging.WARNING)
    turn, sink = Turn("s1"), RecordingSink()
    view = TurnView(turn, sink, frontend=TERMINAL)
    turn.add(Unlisted())  # must not raise into the caller (the connection's reader)
    turn.finish("end_turn")
    assert view.errors == 0
    assert sink.outputs()[0]["text/plain"].startswith("(Unlisted: Unlisted(")
    assert "Unlisted" in render_markdown(turn)
    (warning,) = _no_unhandled(caplog)  # once per class, however many views meet it
    assert "Unlisted" in warning


# -- the CLI's renderers (acp_kernel/frontends/cli.py) ---------------------------------


async def test_the_cli_json_has_a_line_for_every_kind():
    from acp_kernel.frontends import cli

    turn = Turn("s1")
    for ev in every_kind(turn):
        line = cli.event_json(ev)
        assert isinstance(line.get("type"), str) and line["type"], ev
        json.dumps(line, default=repr)


async def test_the_cli_text_has_an_entry_for_every_kind_and_says_what_it_should():
    import io

    from acp_kernel.frontends import cli

    assert sorted(k.__name__ for k in TURN_EVENTS if k.__name__ not in cli.DESCRIBE) == []
    turn = Turn("s1")
    said: dict[str, str] = {}
    for ev in every_kind(turn):
        out, err = io.StringIO(), io.StringIO()
        printer = cli._Printer("text", cli._Out(out), cli._Out(err))
        printer(ev)
        printer.flush()
        said[type(ev).__name__] = out.getvalue() + err.getvalue()
    # Silent by choice: thoughts and user echoes, state the CLI keeps, questions (the asker's).
    quiet = {name for name, text in said.items() if not text}
    assert quiet <= {"Chunk", "StateEvent", "PermissionPrompt", "ElicitationPrompt"}, quiet
    assert "[terminal]" in said["TerminalExited"] and "[terminal]" in said["TerminalStarted"]


def test_the_cli_text_names_a_kind_it_does_not_know():
    from acp_kernel.frontends import cli

    class Surprise:
        pass

    assert cli.describe(Surprise()) == "[event] Surprise"


def test_the_cli_prints_nothing_after_the_turn_ended():
    """A chunk that arrives after a cancel was answered (the turn keeps it, late_events)
    is not printed below the end of the turn (issue 24 §4)."""
    from acp_kernel.client.turn import Chunk
    from acp_kernel.frontends import cli

    for fmt in ("text", "json"):
        out, err = io.StringIO(), io.StringIO()
        printer = cli._Printer(fmt, cli._Out(out), cli._Out(err))
        printer(Chunk("agent", "before "))
        printer(None)
        printer(Chunk("agent", "LATE"))
        printer.flush()
        assert "before" in out.getvalue() and "LATE" not in out.getvalue() + err.getvalue(), fmt


async def test_the_cli_gathers_stderr_lines_and_keeps_the_order_of_both_streams():
    """A burst of tool calls is one stderr write (each line a write woke the reader of a
    pipe 60,000 times in a 20,000-call turn); text and lines still come out in order."""
    import asyncio

    from acp_kernel.client.turn import Chunk
    from acp_kernel.frontends import cli

    writes: list[tuple[str, str]] = []

    class Stream(io.StringIO):
        def __init__(self, name: str) -> None:
            super().__init__()
            self.name = name

        def write(self, text: str) -> int:
            writes.append((self.name, text))
            return len(text)

    printer = cli._Printer("text", cli._Out(Stream("out")), cli._Out(Stream("err")))
    turn = Turn("s1")
    printer(Chunk("agent", "first "))
    for i in range(50):
        printer(turn.apply_update({"sessionUpdate": "tool_call", "toolCallId": f"t{i}", "title": f"Read <b>{i}</b>\n$x$",
                                   "kind": "read"}))
    printer(Chunk("agent", "then"))
    printer(turn.apply_update({"sessionUpdate": "tool_call", "toolCallId": "last", "title": "last", "kind": "read"}))
    await asyncio.sleep(0)  # the loop runs the gathered write
    assert [name for name, _ in writes] == ["out", "err", "out", "err"]
    assert writes[1][1].count("[tool] read:") == 50 and writes[1][1].endswith("\n")
    assert "Read <b>0</b>␊$x$ (pending)\n" in writes[1][1]  # one line each: the newline shown, not kept
    assert writes[2][1] == "then" and "last" in writes[3][1]


async def test_the_cli_cleans_a_burst_of_agent_text_at_once():
    """Agent text is cleaned once per burst, not per chunk (issue 25: a scan per 32-char
    chunk was a third of the text path): a sequence or a CRLF split across the chunks of a
    burst is seen whole, and the burst is one write."""
    import asyncio

    from acp_kernel.client.turn import Chunk
    from acp_kernel.frontends import cli

    writes: list[str] = []

    class Stream(io.StringIO):
        def write(self, text: str) -> int:
            writes.append(text)
            return len(text)

    printer = cli._Printer("text", cli._Out(Stream()), cli._Out(io.StringIO()))
    for piece in ("red: \x1b[3", "1mX\x1b[0m <img src=x onerror=alert(1)> a\r", "\nb \x1b]8;;javascript:alert(1)\x07li",
                  "nk\x1b]8;;\x07 $x$ `a", "\nb` /tmp/a\nb.py end\r"):
        printer(Chunk("agent", piece))
    await asyncio.sleep(0)  # the loop runs the gathered write
    assert writes == ["red: X <img src=x onerror=alert(1)> a\nb link $x$ `a\nb` /tmp/a\nb.py end"], writes
    assert printer.removed == 4  # two SGR, two OSC 8; the CRLF is not counted
    printer(Chunk("agent", "\nnext"))  # the carried "\r" meets its "\n" in the next burst
    printer(None)
    assert writes[1:] == ["\nnext"], writes


async def test_the_cli_json_lines_of_a_burst_round_trip_in_order_and_stay_terminal_safe():
    """msgspec writes a burst's chunk lines into one buffer, made safe once (issue 25); a lone
    surrogate (which msgspec refuses) falls back to json for its line only, the rest intact."""
    import asyncio
    import json
    import re

    from acp_kernel.client.turn import Chunk
    from acp_kernel.frontends import cli

    out = io.StringIO()
    printer = cli._Printer("json", cli._Out(out), cli._Out(io.StringIO()))
    texts = ["<img src=x onerror=alert(1)> `a\nb`", "\x9b2J $x$ \u202eevil", "lone \ud800 half", "/tmp/a\nb.py"]
    for i, t in enumerate(texts):
        printer(Chunk("thought" if i == 1 else "agent", t))
    await asyncio.sleep(0)  # the loop runs the gathered write
    data = out.getvalue()
    assert not re.search("[\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]", data), ascii(data)
    lines = [json.loads(line) for line in data.splitlines()]
    assert lines == [{"type": "thought" if i == 1 else "agent", "text": t} for i, t in enumerate(texts)]
