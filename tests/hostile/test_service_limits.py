"""Limits at the service edge, each at its edge: bytes per file read (and how
far a ranged read may stream), live terminals per session, the largest
``outputByteLimit``, and questions waiting per session.

Wire-level cases run ``tests/agents/requester_agent.py`` (a real process over
real pipes) against the real services on the Host fake; the read limits are
also tested on the pure streaming function.
"""

from __future__ import annotations

import os
import sys
import tracemalloc
from pathlib import Path

import pytest

from acp_kernel.protocol import proctree
from acp_kernel.errors import INVALID_PARAMS
from acp_kernel.services.files import TooBig, read_range
from acp_kernel.services.events import ElicitationPrompt, Notice, PendingPrompts, PermissionPrompt, TerminalStarted

from ..services.conftest import FakeContext, ctx, host, wire  # noqa: F401  (fixtures)

PY = sys.executable
FORM = {"sessionId": "s1", "mode": "form", "message": "Name?",
        "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}}}


def read(path: Path, **kw) -> dict:
    return {"sessionId": "s1", "path": str(path), **kw}


def range_of(path: Path, line: int | None, limit: int | None, cap: int, scan_cap: int = 1 << 30) -> bytes:
    fd = os.open(path, os.O_RDONLY)
    try:
        return read_range(fd, line, limit, cap=cap, scan_cap=scan_cap)
    finally:
        os.close(fd)


# -- bytes per read -------------------------------------------------------------------------


def test_whole_file_at_the_cap_is_read_one_past_is_refused_by_its_size(tmp_path):
    f = tmp_path / "f"
    f.write_bytes(b"a" * 100)
    assert range_of(f, None, None, cap=100) == b"a" * 100
    assert range_of(f, 1, None, cap=100) == b"a" * 100  # line 1, no limit: the whole file
    with pytest.raises(TooBig) as info:
        range_of(f, None, None, cap=99)
    assert (info.value.what, info.value.size, info.value.limit) == ("read", 100, 99)


def test_selected_lines_at_the_cap_are_read_one_past_is_refused(tmp_path):
    f = tmp_path / "f"
    f.write_bytes(b"skip me\n" + b"a" * 9 + b"\n" + b"b" * 9 + b"\n" + b"c\n")
    assert range_of(f, 2, 2, cap=20) == b"a" * 9 + b"\n" + b"b" * 9 + b"\n"
    with pytest.raises(TooBig) as info:
        range_of(f, 2, 2, cap=19)
    assert info.value.what == "range"
    assert range_of(f, 4, None, cap=2) == b"c\n"
    assert range_of(f, 9, 5, cap=2) == b"" and range_of(f, 2, 0, cap=2) == b""


def test_a_ranged_read_streams_at_most_scan_cap_bytes_to_its_first_line(tmp_path):
    f = tmp_path / "f"
    f.write_bytes(b"x" * 999 + b"\nwanted\n")  # line 2 starts 1,000 bytes in
    assert range_of(f, 2, 1, cap=100, scan_cap=1000) == b"wanted\n"
    with pytest.raises(TooBig) as info:
        range_of(f, 2, 1, cap=100, scan_cap=999)
    assert info.value.what == "scan"
    # Lines longer than a read chunk are still cut right.
    g = tmp_path / "g"
    g.write_bytes(b"1" * 200_000 + b"\n" + b"2" * 70_000 + b"\n3\n")
    assert range_of(g, 2, 1, cap=70_001, scan_cap=200_001) == b"2" * 70_000 + b"\n"
    assert range_of(g, 3, None, cap=2, scan_cap=270_002) == b"3\n"


async def test_over_the_read_limits_the_agent_is_told_which_limit_and_how_to_change_it(wire, ctx: FakeContext):
    ctx.settings.limits.file_read_bytes = 10
    ctx.settings.limits.file_scan_bytes = 20
    ws = Path(ctx.cwd)
    (ws / "ten").write_text("0123456789")
    (ws / "eleven").write_text("0123456789A")
    (ws / "far").write_text("x" * 30 + "\nend\n")
    w = await wire([
        {"send": "fs/read_text_file", "key": "ten", "params": read(ws / "ten")},
        {"send": "fs/read_text_file", "key": "eleven", "params": read(ws / "eleven")},
        {"send": "fs/read_text_file", "key": "part", "params": read(ws / "eleven", line=1, limit=1)},
        {"send": "fs/read_text_file", "key": "far", "params": read(ws / "far", line=2, limit=1)},
    ])
    assert await w.result("ten") == {"content": "0123456789"}
    big, part, far = [await w.error(k) for k in ("eleven", "part", "far")]
    for err in (big, part, far):
        assert err["code"] == INVALID_PARAMS
        assert '"limits": {"file_' in err["message"] and "config file" in err["message"], err
    assert "is 11 bytes over the read limit of 10 bytes (limits.file_read_bytes)" in big["message"]
    assert "selected lines" in part["message"] and "limits.file_read_bytes" in part["message"]
    assert "more than 20 bytes into the file (limits.file_scan_bytes)" in far["message"]
    assert sum("limits.file_" in n.text for n in ctx.of(Notice)) == 3


async def test_a_100_mb_sparse_file_is_refused_without_reading_it_whole(wire, ctx: FakeContext):
    sparse = Path(ctx.cwd) / "sparse"
    with open(sparse, "wb") as f:
        f.truncate(100 * 1024 * 1024)
    cap = ctx.settings.limits.file_read_bytes
    w = await wire([
        {"send": "fs/read_text_file", "key": "whole", "params": read(sparse)},
        {"send": "fs/read_text_file", "key": "line", "params": read(sparse, line=1, limit=1)},
    ])
    whole, line = await w.error("whole"), await w.error("line")
    assert f"is {100 * 1024 * 1024} bytes over the read limit of {cap} bytes" in whole["message"]
    assert "selected lines" in line["message"]
    # What one such read holds: the cap and a chunk, not the file.
    tracemalloc.start()
    try:
        with pytest.raises(TooBig):
            range_of(sparse, 1, 1, cap=cap)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2 * cap, peak


# -- live terminals per session -------------------------------------------------------------------


def sleeper(sid: str = "s1") -> dict:
    return {"sessionId": sid, "command": "sleep", "args": ["30"]}


async def test_live_terminals_at_the_limit_run_one_more_is_refused_and_release_frees_a_slot(wire, ctx: FakeContext, host):
    ctx.settings.permissions = "allow-all"
    ctx.settings.limits.terminals_per_session = 2
    other = FakeContext("s2", ctx.cwd, ctx.settings)
    host.contexts["s2"] = other
    w = await wire([
        {"send": "terminal/create", "key": "a", "params": sleeper()},
        {"send": "terminal/create", "key": "b", "params": sleeper()},
        {"send": "terminal/create", "key": "c", "params": sleeper()},  # one past the limit
        {"send": "terminal/create", "key": "s2", "params": sleeper("s2")},  # another session has its own
        {"await": "c"},
        {"send": "terminal/release", "key": "rel", "params": {"sessionId": "s1", "terminalId": "${a.terminalId}"}},
        {"await": "rel"},
        {"send": "terminal/create", "key": "d", "params": sleeper()},
        {"send": "terminal/create", "key": "e", "params": sleeper()},
    ])
    for key in ("a", "b", "s2", "d"):
        assert "terminalId" in await w.result(key), key
    for key in ("c", "e"):
        err = await w.error(key)
        assert err["code"] == INVALID_PARAMS
        assert "already holds 2 live terminals (limits.terminals_per_session = 2)" in err["message"], err
        assert "terminal/release" in err["message"] and "config file" in err["message"]
    assert await w.result("rel") == {}
    assert len(w.services.terminals.terminals("s1")) == 2 and len(w.services.terminals.terminals("s2")) == 1
    assert sum("limits.terminals_per_session" in n.text for n in ctx.of(Notice)) == 2
    terms = w.services.terminals.terminals()
    await w.services.shutdown()
    assert not any(proctree.alive(t.pid) for t in terms)


async def test_a_terminal_waiting_for_its_answer_holds_its_slot(wire, ctx: FakeContext):
    ctx.settings.permissions = "ask"  # interactive: the question waits
    ctx.settings.limits.terminals_per_session = 1
    w = await wire([
        {"send": "terminal/create", "key": "asking", "params": {"sessionId": "s1", "command": "true", "args": []}},
        {"send": "terminal/create", "key": "next", "params": {"sessionId": "s1", "command": "true", "args": []}},
    ])
    (prompt,) = await ctx.until(PermissionPrompt, 1)
    err = await w.error("next")
    assert "limits.terminals_per_session = 1" in err["message"]
    prompt.reject()
    assert "the user refused" in (await w.error("asking"))["message"]
    assert w.services.terminals.live("s1") == 0  # the refused create gave its slot back


# -- the largest outputByteLimit ---------------------------------------------------------------------


async def test_output_byte_limit_at_the_cap_is_kept_one_past_is_capped_and_said(wire, ctx: FakeContext):
    ctx.settings.permissions = "allow-all"
    ctx.settings.limits.max_output_byte_limit = 1000
    code = "import sys; sys.stdout.write('x' * 5000)"
    w = await wire([
        {"send": "terminal/create", "key": "at", "params": {"sessionId": "s1", "command": PY, "args": ["-c", code], "outputByteLimit": 1000}},
        {"send": "terminal/create", "key": "past", "params": {"sessionId": "s1", "command": PY, "args": ["-c", code], "outputByteLimit": 1001}},
        {"send": "terminal/create", "key": "none", "params": {"sessionId": "s1", "command": PY, "args": ["-c", code]}},
        {"send": "terminal/wait_for_exit", "key": "w", "params": {"sessionId": "s1", "terminalId": "${past.terminalId}"}},
        {"await": "w"},
        {"send": "terminal/output", "key": "out", "params": {"sessionId": "s1", "terminalId": "${past.terminalId}"}},
    ])
    for key in ("at", "past", "none"):
        await w.result(key)
    out = await w.result("out")
    assert out["truncated"] is True and out["output"] == "x" * 1000
    started = {s.terminal_id: s for s in ctx.of(TerminalStarted)}
    limits = [started[(await w.result(k))["terminalId"]].output_limit for k in ("at", "past", "none")]
    assert limits == [1000, 1000, 1000]
    capped = [n.text for n in ctx.of(Notice) if "limits.max_output_byte_limit" in n.text]
    assert len(capped) == 1 and "asked to keep 1001 bytes" in capped[0] and "kept 1000" in capped[0]


# -- questions waiting per session ------------------------------------------------------------------


def ask_params(tcid: str) -> dict:
    return {"sessionId": "s1", "toolCall": {"toolCallId": tcid, "title": f"Do {tcid}", "kind": "execute"},
            "options": [{"optionId": "y", "name": "Yes", "kind": "allow_once"},
                        {"optionId": "n", "name": "No", "kind": "reject_once"}]}


async def test_questions_at_the_limit_wait_one_past_is_cancelled_at_once(wire, ctx: FakeContext, tmp_path):
    ctx.settings.limits.pending_prompts = 2
    outside = tmp_path / "outside.txt"
    outside.write_text("x")
    w = await wire([
        {"send": "session/request_permission", "key": "p1", "params": ask_params("p1")},
        {"send": "session/request_permission", "key": "p2", "params": ask_params("p2")},
        {"send": "session/request_permission", "key": "p3", "params": ask_params("p3")},
        {"send": "elicitation/create", "key": "form", "params": FORM},
        {"send": "terminal/create", "key": "term", "params": {"sessionId": "s1", "command": "true", "args": []}},
        {"send": "fs/read_text_file", "key": "file", "params": read(outside)},
        {"wait_go": "freed"},
        {"send": "session/request_permission", "key": "p4", "params": ask_params("p4")},
    ])
    assert await w.result("p3") == {"outcome": {"outcome": "cancelled"}}
    assert await w.result("form") == {"action": "cancel"}
    assert "limits.pending_prompts" in (await w.error("term"))["message"]
    assert "limits.pending_prompts" in (await w.error("file"))["message"]
    shown = await ctx.until(PermissionPrompt, 2)
    assert [p.request.tool_call.tool_call_id for p in shown] == ["p1", "p2"]
    assert not ctx.of(ElicitationPrompt)
    limit_notices = [n for n in ctx.of(Notice) if "limits.pending_prompts = 2" in n.text]
    assert len(limit_notices) == 4 and all("2 questions already wait" in n.text for n in limit_notices)
    # A cancelled turn answers the waiting ones; then there is room again.
    assert w.services.cancel_pending("s1") == 2
    assert await w.result("p1") == await w.result("p2") == {"outcome": {"outcome": "cancelled"}}
    w.go("freed")
    (p4,) = (await ctx.until(PermissionPrompt, 3))[2:]
    p4.allow()
    assert await w.result("p4") == {"outcome": {"outcome": "selected", "optionId": "y"}}


async def test_forms_count_against_the_same_limit(wire, ctx: FakeContext):
    ctx.settings.limits.pending_prompts = 1
    w = await wire([
        {"send": "elicitation/create", "key": "f1", "params": FORM},
        {"send": "session/request_permission", "key": "p", "params": ask_params("p")},
        {"send": "elicitation/create", "key": "f2", "params": FORM},
    ])
    assert await w.result("p") == {"outcome": {"outcome": "cancelled"}}
    assert await w.result("f2") == {"action": "cancel"}
    (form,) = await ctx.until(ElicitationPrompt, 1)
    form.decline()
    assert await w.result("f1") == {"action": "decline"}


def test_pending_prompts_forget_sessions_with_nothing_waiting():
    class P:
        def __init__(self, sid: str) -> None:
            self.session_id = sid
            self.cancelled = False

        def cancel(self) -> None:
            self.cancelled = True

    prompts = PendingPrompts()
    a, b = P("s1"), P("s1")
    prompts.add(a)
    prompts.add(b)
    assert prompts.count("s1") == 2 and prompts.full("s1", 2) and not prompts.full("s1", 3)
    assert prompts.cancel_all("s1") == 2 and a.cancelled and b.cancelled
    prompts.discard(a)
    prompts.discard(b)
    assert prompts.sessions() == [] and prompts._by_session == {}


async def test_no_question_is_left_open_after_a_session_closes(wire, ctx: FakeContext):
    w = await wire([{"send": "session/request_permission", "key": "p", "params": ask_params("p")}])
    await ctx.until(PermissionPrompt, 1)
    await w.services.close_session("s1")
    assert await w.result("p") == {"outcome": {"outcome": "cancelled"}}
    assert w.services.permissions.pending() == [] and w.services.permissions.prompts.count("s1") == 0
