"""Permission choices by kind over the option sets real agents send."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from acp_kernel.services.permissions import PermissionBroker, parse_options, pick, policy_decision
from acp_kernel.services.events import Notice, PermissionPrompt, PermissionResolved

from .conftest import FakeContext, FakeHost


def opt(oid: str, kind: str) -> dict[str, str]:
    return {"optionId": oid, "name": oid.title(), "kind": kind}


# (allow_once id, allow_always id or None, reject id, options)
OPTION_SETS: list[tuple[str, str | None, str, list[dict[str, str]]]] = [
    ("allow", "allow_always", "reject", [opt("allow", "allow_once"), opt("allow_always", "allow_always"), opt("reject", "reject_once")]),
    ("approve", "approve_for_session", "reject", [opt("approve_for_session", "allow_always"), opt("approve", "allow_once"), opt("reject", "reject_once")]),
    ("proceed_once", "proceed_always", "cancel", [opt("proceed_once", "allow_once"), opt("proceed_always", "allow_always"), opt("cancel", "reject_once")]),
    ("approved", None, "abort", [opt("approved", "allow_once"), opt("abort", "reject_once")]),
]


def request(options: list[dict[str, str]], kind: str | None, tcid: str = "tc1", title: str = "Run ls",
            raw_input: Any = None) -> dict[str, Any]:
    tool_call: dict[str, Any] = {"toolCallId": tcid, "title": title}
    if kind is not None:
        tool_call["kind"] = kind
    if raw_input is not None:
        tool_call["rawInput"] = raw_input
    return {"sessionId": "s1", "toolCall": tool_call, "options": options}


def test_pick_by_kind_never_by_id() -> None:
    for once, always, reject, options in OPTION_SETS:
        assert pick(options, "allow")["optionId"] == once
        assert pick(options, "reject")["optionId"] == reject
        got = pick(options, "allow", always_first=True)["optionId"]
        assert got == (always or once)
    # An option *named* allow but of kind reject is a reject.
    tricky = [opt("allow", "reject_once"), opt("deny", "allow_once")]
    assert pick(tricky, "allow")["optionId"] == "deny"
    assert pick([opt("x", "allow_once")], "reject") is None


def test_policy_decision() -> None:
    assert policy_decision("allow-all", None) == "allow"
    assert policy_decision("deny", "read") == "reject"
    assert policy_decision("allow-reads", "read") == "allow"
    assert policy_decision("allow-reads", "search") == "allow"
    assert policy_decision("allow-reads", "execute") == "ask"
    assert policy_decision("allow-reads", None) == "ask"
    assert policy_decision("ask", "read") == "ask"


def test_parse_options_is_lenient() -> None:
    got = parse_options([opt("a", "allow_once"), {"optionId": "b", "kind": "maybe"}, {"name": "no id"}, "junk"])
    assert [(o["optionId"], o["kind"]) for o in got] == [("a", "allow_once"), ("b", None)]


@pytest.mark.parametrize("with_kind", [True, False])
@pytest.mark.parametrize("case", range(len(OPTION_SETS)))
async def test_option_sets_over_the_wire(wire, ctx: FakeContext, case: int, with_kind: bool) -> None:
    once, always, reject, options = OPTION_SETS[case]
    kind = "execute" if with_kind else None
    ctx.interactive = False
    # allow-all allows; deny rejects; headless ask rejects.
    steps = []
    for key in ("all", "deny", "ask"):
        steps += [{"wait_go": key}, {"send": "session/request_permission", "key": key, "params": request(options, kind)}, {"await": key}]
    w = await wire(steps)
    results = {}
    for key, policy in (("all", "allow-all"), ("deny", "deny"), ("ask", "ask")):
        ctx.settings.permissions = policy  # type: ignore[assignment]
        w.go(key)
        results[key] = await w.result(key)
    assert results["all"] == {"outcome": {"outcome": "selected", "optionId": once}}
    assert results["deny"] == {"outcome": {"outcome": "selected", "optionId": reject}}
    assert results["ask"] == {"outcome": {"outcome": "selected", "optionId": reject}}
    notices = ctx.of(Notice)
    assert notices and "nobody can answer" in notices[-1].text


async def test_allow_reads_uses_announced_kind_when_request_has_none(host: FakeHost, ctx: FakeContext) -> None:
    broker = PermissionBroker(host)
    ctx.settings.permissions = "allow-reads"
    ctx.interactive = False
    options = OPTION_SETS[1][3]
    ctx.kinds["tc-read"] = "read"
    got = await broker.request_permission(request(options, None, "tc-read"))
    assert got["outcome"]["optionId"] == "approve"
    assert ctx.of(PermissionResolved)[-1].by == "policy"
    # Unknown kind: asked, and headless means rejected.
    got = await broker.request_permission(request(options, None, "tc-unknown"))
    assert got["outcome"]["optionId"] == "reject"
    # An edit is asked even when the kind is given.
    got = await broker.request_permission(request(options, "edit", "tc-edit"))
    assert got["outcome"]["optionId"] == "reject"


async def test_headless_without_reject_option_cancels(host: FakeHost, ctx: FakeContext) -> None:
    ctx.interactive = False
    got = await PermissionBroker(host).request_permission(request([opt("go", "allow_once")], "execute"))
    assert got == {"outcome": {"outcome": "cancelled"}}


async def test_ui_answers_and_always_is_remembered_per_action(host: FakeHost, ctx: FakeContext) -> None:
    broker = PermissionBroker(host)
    options = OPTION_SETS[1][3]
    make = {"command": "make"}
    prompt_f = ctx.next_event(PermissionPrompt)
    task = asyncio.ensure_future(broker.request_permission(request(options, "execute", "t1", "Run make", make)))
    prompt = await asyncio.wait_for(prompt_f, 5)
    assert prompt.kind == "execute" and [o["optionId"] for o in prompt.options] == ["approve_for_session", "approve", "reject"]
    assert prompt.request.tool_call.title == "Run make" and prompt.command == "make"
    with pytest.raises(ValueError):
        prompt.answer("allow")  # not one of this agent's ids
    prompt.answer("approve_for_session")
    assert (await task)["outcome"]["optionId"] == "approve_for_session"
    # The same command again, under another title: answered from memory, no prompt.
    got = await broker.request_permission(request(options, "execute", "t2", "Build it", make))
    assert got["outcome"]["optionId"] == "approve_for_session"
    assert ctx.of(PermissionResolved)[-1].by == "remembered"
    # The same title with a different command is asked anew.
    prompt_f = ctx.next_event(PermissionPrompt)
    task = asyncio.ensure_future(broker.request_permission(
        request(options, "execute", "t3", "Run make", {"command": "make; rm -rf build"})))
    prompt = await asyncio.wait_for(prompt_f, 5)
    assert prompt.command == "make; rm -rf build"
    await asyncio.to_thread(prompt.reject)  # from another thread, like a widget callback
    assert (await task)["outcome"]["optionId"] == "reject"
    # "deny" wins over remembered allows.
    ctx.settings.permissions = "deny"
    got = await broker.request_permission(request(options, "execute", "t4", "Run make", make))
    assert got["outcome"]["optionId"] == "reject"


async def test_cancel_all_answers_pending_cancelled(wire, ctx: FakeContext) -> None:
    options = OPTION_SETS[2][3]
    w = await wire(
        [
            {"send": "session/request_permission", "key": "a", "params": request(options, "edit", "ta")},
            {"send": "session/request_permission", "key": "b", "params": request(options, None, "tb"), "id": "uuid-b"},
        ]
    )
    seen: list[PermissionPrompt] = await ctx.until(PermissionPrompt, 2)
    assert len(w.services.permissions.pending("s1")) == 2
    assert w.services.cancel_pending("s1") == 2
    for key in ("a", "b"):
        assert await w.result(key) == {"outcome": {"outcome": "cancelled"}}
    assert all(p.done for p in seen)
    assert w.services.permissions.pending("s1") == []


async def test_bad_requests(wire, ctx: FakeContext) -> None:
    ctx.settings.permissions = "allow-all"
    ctx.interactive = False
    w = await wire(
        [
            {"send": "session/request_permission", "key": "nosession", "params": dict(request(OPTION_SETS[0][3], "read"), sessionId="zzz")},
            {"send": "session/request_permission", "key": "notool", "params": {"sessionId": "s1", "options": []}},
            {"send": "session/request_permission", "key": "weird", "params": request([{"optionId": "x", "name": "X", "kind": "sometimes"}], "read")},
        ]
    )
    assert "'zzz'" in (await w.error("nosession"))["message"]
    assert (await w.error("notool"))["code"] == -32602
    # An option of unknown kind is never picked automatically: cancelled, not a crash.
    assert await w.result("weird") == {"outcome": {"outcome": "cancelled"}}


def test_code_of_finds_the_execute_argument_where_agents_put_it() -> None:
    from acp_kernel.services.permissions import code_of

    assert code_of({"code": "x = 1"}) == "x = 1"
    assert code_of({"server": "notebook", "tool": "execute", "arguments": {"code": "y"}}) == "y"
    assert code_of({"input": {"code": "z"}}) == "z"
    assert code_of({"code": "   "}) == "" and code_of({"code": 3}) == "" and code_of("code") == ""
    assert code_of({"command": "ls"}) == ""


async def test_a_persons_allow_of_the_agents_question_answers_the_servers_once(host: FakeHost, ctx: FakeContext) -> None:
    broker = PermissionBroker(host)
    options = OPTION_SETS[0][3]

    async def answered(option_id: str, raw: dict) -> None:
        prompt_f = ctx.next_event(PermissionPrompt)
        task = asyncio.ensure_future(broker.request_permission(request(options, "execute", raw_input=raw)))
        (await asyncio.wait_for(prompt_f, 5)).answer(option_id)
        await task

    await answered("allow", {"code": "x = 1"})
    assert not broker.take_code_grant("s1", "x = 2")  # other code: not this allow
    assert broker.take_code_grant("s1", "x = 1")
    assert not broker.take_code_grant("s1", "x = 1")  # once
    await answered("reject", {"code": "x = 3"})
    assert not broker.take_code_grant("s1", "x = 3")  # a refusal grants nothing
    ctx.settings.permissions = "allow-all"  # a policy allow is no person's answer: nothing granted
    await broker.request_permission(request(options, "execute", raw_input={"code": "x = 4"}))
    assert not broker.take_code_grant("s1", "x = 4")
    ctx.settings.permissions = "ask"
    await answered("allow_always", {"arguments": {"code": "x = 5"}})
    # "Always" covers exactly that code, every time, for the session; never other code.
    assert broker.take_code_grant("s1", "x = 5") and broker.take_code_grant("s1", "x = 5")
    assert not broker.take_code_grant("s1", "anything")
    broker.forget("s1")
    assert not broker.take_code_grant("s1", "x = 5")


def test_a_request_without_raw_input_is_read_through_its_announced_call_or_its_text() -> None:
    from acp_kernel.services.permissions import CONTENT_INPUT_CHARS, input_from_content, request_input

    def text(t: Any) -> dict:
        return {"type": "content", "content": {"type": "text", "text": t}}

    args = '{"code": "x = 1"}'
    assert input_from_content([text("Requesting approval"), text(args)]) == {"code": "x = 1"}
    # Not one JSON object, too long, too deep, or not text: nothing is read.
    assert input_from_content([text("[1, 2]"), text('{"code": '), text(3), {"type": "diff", "path": "/x"}]) is None
    assert input_from_content([text('{"code": "' + "x" * CONTENT_INPUT_CHARS + '"}')]) is None
    assert input_from_content([text("{\"a\":" * 19_000)]) is None  # too deep for json (within the size)
    assert input_from_content("not a list") is None
    # rawInput first (even an empty one), then the announced call's rawInput, then text: the question's own, then the call's.
    assert request_input({"rawInput": {}, "content": [text(args)]}, ({"code": "y"}, None)) == ({}, "")
    assert request_input({}, ({"code": "y"}, [text(args)]))[0] == {"code": "y"}
    assert request_input({"content": [text('{"code": "q"}')]}, (None, [text(args)]))[0] == {"code": "q"}
    got, source = request_input({"content": [text("Call MCP tool `execute`.")]}, (None, [text(args)]))
    assert got == {"code": "x = 1"} and "text" in source
    assert request_input({}, (None, None)) == (None, "")
