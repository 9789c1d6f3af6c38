"""elicitation/create in URL mode, over real pipes: what is shown, what is declined, completion."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import TypeAdapter

from acp.schema import ClientCapabilities, CreateElicitationResponse
from acp_kernel.services import client_capabilities
from acp_kernel.services.elicitation import check_url
from acp_kernel.services.events import ElicitationCompleted, ElicitationPrompt, Notice, UrlElicitationPrompt

from .conftest import FakeContext

MESSAGE = "Sign in <img src=x onerror=alert(1)> `a\nb` $x$ $$y$$ \\(z\\)"
URL = "http://127.0.0.1:9/signin?next=%2F&who=a@b"


def url_params(eid: str = "e1", url: str = URL, message: str = MESSAGE) -> dict:
    return {"sessionId": "s1", "mode": "url", "elicitationId": eid, "url": url, "message": message}


def done(eid: str) -> dict:
    return {"notify": "elicitation/complete", "params": {"elicitationId": eid}}


def test_url_mode_is_advertised_only_when_asked_and_validates() -> None:
    model = ClientCapabilities.model_validate(client_capabilities(url_elicitation=True))
    assert model.elicitation is not None and model.elicitation.url is not None and model.elicitation.form is not None
    assert ClientCapabilities.model_validate(client_capabilities()).elicitation.url is None


async def test_open_accepts_and_the_completion_marks_it_done_once(wire, ctx: FakeContext) -> None:
    w = await wire([
        {"send": "elicitation/create", "key": "open", "params": url_params("e1")},
        {"await": "open"},
        done("unknown-id"),  # ignored
        done("e1"),
        done("e1"),  # already completed: ignored
        {"send": "elicitation/create", "key": "again", "params": url_params("e1")},  # the id is free again
        {"await": "again"},
    ])
    (prompt,) = await ctx.until(UrlElicitationPrompt, 1)
    assert prompt.url == URL and prompt.host == "127.0.0.1" and prompt.host_unicode == ""
    assert prompt.message == MESSAGE and prompt.elicitation_id == "e1"
    assert not prompt.completed
    await asyncio.to_thread(prompt.open)  # a widget click may come from a comm thread
    answer = await w.result("open")
    assert answer == {"action": "accept"}
    TypeAdapter(CreateElicitationResponse).validate_python(answer)
    (completed,) = await ctx.until(ElicitationCompleted, 1)
    assert completed.prompt is prompt and prompt.completed and completed.elicitation_id == "e1"
    second = (await ctx.until(UrlElicitationPrompt, 2))[1]
    second.cancel()
    assert await w.result("again") == {"action": "cancel"}
    assert len(ctx.of(ElicitationCompleted)) == 1


async def test_decline_and_cancel_and_a_completion_for_either_is_ignored(wire, ctx: FakeContext) -> None:
    w = await wire([
        {"send": "elicitation/create", "key": "d", "params": url_params("d")},
        {"await": "d"},
        done("d"),
        {"send": "elicitation/create", "key": "c", "params": url_params("c")},
        {"await": "c"},
        done("c"),
        {"send": "elicitation/create", "key": "last", "params": url_params("last")},
    ])
    (await ctx.until(UrlElicitationPrompt, 1))[0].decline()
    assert await w.result("d") == {"action": "decline"}
    (await ctx.until(UrlElicitationPrompt, 2))[1].cancel()
    assert await w.result("c") == {"action": "cancel"}
    # The notifications were sent before this request: by now they were read and ignored.
    await ctx.until(UrlElicitationPrompt, 3)
    assert ctx.of(ElicitationCompleted) == []
    assert w.services.cancel_pending("s1") == 1  # a cancelled turn answers it
    assert await w.result("last") == {"action": "cancel"}


HOSTILE = {
    "javascript:alert(1)": "only http and https",
    "data:text/html,<script>alert(1)</script>": "only http and https",
    "file:///etc/passwd": "only http and https",
    "https://": "no host",
    "https://good.example@evil.example/": "user name or password",
    "https://user:pass@evil.example/": "user name or password",
    "https://evil.example\n.com/": "spaces, control or invisible",
    "https://evil.example\u202e.com/": "spaces, control or invisible",
    "https://evil.example\\.good.example/": "backslash",
    "http://0x7f.1/": "IP address",
    "https://evil%2Eexample/": "characters a host name cannot",
    "https://evil.example:99999/": "port",
    "evil.example/signin": "only http and https",
}


@pytest.mark.parametrize("url", list(HOSTILE))
def test_check_url_refuses_tricks(url: str) -> None:
    with pytest.raises(ValueError, match=HOSTILE[url]):
        check_url(url)


def test_check_url_names_an_idn_host_in_ascii_and_says_its_unicode_form() -> None:
    assert check_url("https://bücher.example/x") == ("xn--bcher-kva.example", "bücher.example")
    assert check_url("https://xn--bcher-kva.example/") == ("xn--bcher-kva.example", "bücher.example")
    assert check_url("HTTPS://Good.Example:8443/a?b=c@d") == ("good.example", "")
    assert check_url("http://[::1]:8000/") == ("[::1]", "")


async def test_hostile_urls_are_declined_with_a_notice_and_never_shown(wire, ctx: FakeContext) -> None:
    steps = []
    for i, url in enumerate(HOSTILE):
        steps += [{"send": "elicitation/create", "key": f"u{i}", "params": url_params(f"e{i}", url)}, {"await": f"u{i}"}]
    w = await wire(steps)
    for i in range(len(HOSTILE)):
        assert await w.result(f"u{i}") == {"action": "decline"}
    assert ctx.of(UrlElicitationPrompt) == []
    notices = ctx.of(Notice)
    assert len(notices) == len(HOSTILE)
    for url, notice in zip(HOSTILE, notices):
        assert "declined without showing it" in notice.text
        assert url not in notice.text and "evil.example" not in notice.text


async def test_where_no_link_can_be_shown_it_is_declined_naming_the_host(wire, ctx: FakeContext) -> None:
    ctx.links = False
    w = await wire([{"send": "elicitation/create", "key": "h", "params": url_params()}])
    assert await w.result("h") == {"action": "decline"}
    assert ctx.of(UrlElicitationPrompt) == []
    (notice,) = ctx.of(Notice)
    assert "127.0.0.1" in notice.text and "nobody can open a link here" in notice.text


async def test_between_turns_it_is_declined(wire, ctx: FakeContext) -> None:
    ctx.turn_running = False
    w = await wire([{"send": "elicitation/create", "key": "b", "params": url_params()}])
    assert await w.result("b") == {"action": "decline"}
    assert "no turn was running" in ctx.of(Notice)[0].text


async def test_pages_count_against_pending_prompts_with_forms_and_the_turn_end_cancels(wire, ctx: FakeContext) -> None:
    ctx.settings.limits.pending_prompts = 2
    form = {"sessionId": "s1", "mode": "form", "message": "Which?", "requestedSchema": {"type": "object", "properties": {}}}
    w = await wire([
        {"send": "elicitation/create", "key": "form", "params": form},
        {"send": "elicitation/create", "key": "page", "params": url_params("p")},
        {"send": "elicitation/create", "key": "over", "params": url_params("over")},
        {"await": "over"},
        {"send": "elicitation/create", "key": "dup", "params": url_params("p")},
    ])
    assert await w.result("over") == {"action": "cancel"}
    assert any(n.kind == "limit" for n in ctx.of(Notice))
    assert await w.result("dup") == {"action": "decline"}  # the id of one still waiting
    assert w.services.end_turn("s1") == 1  # the page; a form is not the turn's end's to answer
    assert await w.result("page") == {"action": "cancel"}
    (await ctx.until(ElicitationPrompt, 1))[0].cancel()
    assert await w.result("form") == {"action": "cancel"}


async def test_a_malformed_url_request_is_invalid_params(wire, ctx: FakeContext) -> None:
    w = await wire([
        {"send": "elicitation/create", "key": "noid", "params": {"sessionId": "s1", "mode": "url", "url": URL, "message": "m"}},
        {"send": "elicitation/create", "key": "nosession", "params": {**url_params(), "sessionId": "nope"}},
    ])
    assert (await w.error("noid"))["code"] == -32602
    assert (await w.error("nosession"))["code"] == -32602
