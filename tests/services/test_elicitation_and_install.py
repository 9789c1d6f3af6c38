"""elicitation/create (form mode) and the install/capabilities seam."""

from __future__ import annotations

import asyncio

import pytest

from acp_kernel.services.events import ElicitationPrompt, Notice
from acp_kernel.services import client_capabilities

from .conftest import FakeContext

FORM = {
    "sessionId": "s1",
    "mode": "form",
    "message": "Which branch?",
    "requestedSchema": {
        "type": "object",
        "properties": {"branch": {"type": "string", "title": "Branch"}, "force": {"type": "boolean"}},
        "required": ["branch"],
    },
}


async def test_form_accept_decline_cancel(wire, ctx: FakeContext) -> None:
    w = await wire(
        [
            {"send": "elicitation/create", "key": "a", "params": FORM},
            {"await": "a"},
            {"send": "elicitation/create", "key": "d", "params": FORM},
            {"await": "d"},
            {"send": "elicitation/create", "key": "c", "params": FORM},
        ]
    )
    prompt: ElicitationPrompt = (await ctx.until(ElicitationPrompt, 1))[0]
    assert prompt.message == "Which branch?" and prompt.required == ["branch"]
    assert set(prompt.fields) == {"branch", "force"} and prompt.fields["branch"]["type"] == "string"
    with pytest.raises(ValueError, match="branch"):
        prompt.accept({"force": True})
    await asyncio.to_thread(prompt.accept, {"branch": "main", "force": False})
    assert await w.result("a") == {"action": "accept", "content": {"branch": "main", "force": False}}
    (await ctx.until(ElicitationPrompt, 2))[1].decline()
    assert await w.result("d") == {"action": "decline"}
    await ctx.until(ElicitationPrompt, 3)
    assert w.services.cancel_pending("s1") == 1
    assert await w.result("c") == {"action": "cancel"}
    # The answers are valid ACP responses.
    from pydantic import TypeAdapter

    from acp.schema import CreateElicitationResponse

    for key in "adc":
        TypeAdapter(CreateElicitationResponse).validate_python(await w.result(key))


async def test_headless_and_unsupported_modes_decline(wire, ctx: FakeContext) -> None:
    ctx.interactive = False
    w = await wire(
        [
            {"send": "elicitation/create", "key": "h", "params": FORM},
            {"send": "elicitation/create", "key": "u", "params": {"sessionId": "s1", "mode": "url", "message": "Log in", "url": "https://x", "elicitationId": "e"}},
            {"send": "elicitation/create", "key": "r", "params": {"requestId": 3, "mode": "form", "message": "m", "requestedSchema": {}}},
            {"send": "elicitation/create", "key": "bad", "params": {"sessionId": "s1", "mode": "form"}},
        ]
    )
    for key in "hur":
        assert await w.result(key) == {"action": "decline"}
    assert (await w.error("bad"))["code"] == -32602
    assert not ctx.of(ElicitationPrompt)
    assert len(ctx.of(Notice)) == 2


def test_client_capabilities_are_valid_and_honest() -> None:
    from acp.schema import ClientCapabilities

    caps = client_capabilities()
    model = ClientCapabilities.model_validate(caps)
    assert model.fs.read_text_file and model.fs.write_text_file and model.terminal
    assert model.elicitation is not None and model.elicitation.form is not None and model.elicitation.url is None
    assert "elicitation" not in client_capabilities(elicitation=False)
    # Honest: turn.ToolCall.output reads what agents stream under this key.
    assert model.field_meta == {"terminal_output": True}


async def test_install_answers_every_method_and_unknown_ones_are_not_found(wire, ctx: FakeContext) -> None:
    ctx.interactive = False
    methods = [
        "terminal/create", "terminal/output", "terminal/wait_for_exit", "terminal/kill", "terminal/release",
        "fs/read_text_file", "fs/write_text_file", "session/request_permission", "elicitation/create",
    ]
    steps = [{"send": m, "key": m, "params": {"sessionId": "unknown-session"}} for m in methods]
    steps.append({"send": "_x/unknown", "key": "unknown", "params": {}})
    w = await wire(steps)
    for m in methods:
        err = await w.error(m)
        # Either the params are incomplete or the session is unknown; never "method not found".
        assert err["code"] == -32602, (m, err)
    assert (await w.error("unknown"))["code"] == -32601
