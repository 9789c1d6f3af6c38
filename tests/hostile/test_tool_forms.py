"""A tool call's body in two forms at once (issue 25): the HTML written beside the markdown
must be, byte for byte, what the parse (markdown-it, :func:`acp_kernel.safe.inert_html_inner`)
makes of that markdown, for hostile agent strings in every part. The saved output then
reads exactly as it did when each body was parsed; only the parse is gone."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acp_kernel import safe
from acp_kernel.client.turn import ToolCall
from acp_kernel.view import transcript as tr
from acp_kernel.view.transcript import TerminalSnapshot
from tests.hostile.test_boundary import PAYLOADS, PIECES

MORE = ["$", "$$", "\\(", "\\[", "@@0@@", "@@", "@", "\t", "\u2028", "\x00", "\x0c", "\x85", "é", "  ", "```", "````",
        "~~~", "&amp;", "&#36;", "a\nb", "`a\nb`", "/a/b\nc.py", "\r\n", " ", "-1", "1. ", "+"]
hostile = st.one_of(st.lists(st.sampled_from(PIECES + MORE), max_size=30).map("".join), st.sampled_from(PAYLOADS),
                    st.text(max_size=40))


def _rendered(md: safe.Markdown) -> str:
    return str(safe.inert_html_inner(md))


@settings(max_examples=400, deadline=None)
@given(hostile, st.sampled_from(["", "text", "sh", "console", "diff", "c#", "a b<"]))
def test_a_block_s_html_is_what_the_parse_writes(s, lang):
    md, html, raw = safe.block_forms(s, lang)
    assert md == safe.block(s, lang)
    follows = safe.Markdown("\n\n").join([md, safe.Markdown("after")])
    assert str(html) + "<p>after</p>\n" == _rendered(follows), (s, lang)
    assert (html[:-1] if raw else html) == _rendered(md), (s, lang)


@pytest.mark.parametrize("forms, made", [(safe.code_forms, safe.code), (safe.text_forms, safe.text)])
@settings(max_examples=400, deadline=None)
@given(s=hostile)
def test_inline_code_and_text_html_is_what_the_parse_writes(forms, made, s):
    md, html = forms(s)
    assert md == made(s)
    assert "<p>a " + str(html) + " b</p>\n" == _rendered(safe.Markdown("a {} b").format(md)), s


def _content(text, kind):
    if kind == "text":
        return {"type": "content", "content": {"type": "text", "text": text}}
    if kind == "image":
        return {"type": "content", "content": {"type": text[:10] or "image"}}
    if kind == "diff":
        return {"type": "diff", "path": text, "oldText": "a\n" + text, "newText": text + "\nb"}
    if kind == "new":
        return {"type": "diff", "path": text, "newText": text}
    return {"type": "terminal", "terminalId": text or "t"}


calls = st.fixed_dictionaries({
    "content": st.lists(st.tuples(hostile, st.sampled_from(["text", "text", "image", "diff", "new", "terminal"])),
                        max_size=4),
    "locations": st.lists(st.tuples(hostile, st.one_of(st.none(), st.integers(-3, 10**6))), max_size=3),
    "command": st.one_of(st.none(), hostile, st.lists(hostile, max_size=3)),
    "output": st.one_of(st.just(""), hostile),
    "exit": st.one_of(st.none(), st.integers(-300, 300)),
    "snaps": st.lists(st.tuples(hostile, hostile, hostile, st.booleans()), max_size=2),
    "long": st.booleans(),
})


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(calls)
def test_a_tool_call_body_s_html_is_what_the_parse_writes(d):
    call = ToolCall("c", title="t", status="completed")
    content = [_content(t, k) for t, k in d["content"]]
    if d["long"]:  # past the body's limit: the "(cut)" line
        content.append(_content("x\n" * (tr.MD_TEXT_LIMIT // 2 + 10), "text"))
    call.content = content
    call.locations = [{"path": p, "line": n} for p, n in d["locations"]]
    if d["command"] is not None:
        call.raw_input = {"command": d["command"]}
    call.output, call.exit_code = d["output"], d["exit"]
    tids = call.terminal_ids
    snaps = {tid: TerminalSnapshot(tid, cmd, out, trunc, ex, "") for tid, (cmd, out, ex, trunc) in zip(tids, d["snaps"])}
    md, html = tr.tool_call_body_forms(call, snaps)
    assert md == tr.tool_call_body(call, snaps)
    assert html == _rendered(md)


def test_a_common_tool_call_is_not_parsed():
    """The shapes real agents send most (command, text, output and its exit code, a diff,
    locations, a terminal) take the written HTML, hostile strings and all: none is parsed."""
    call = ToolCall("c", title="t", status="completed")
    call.content = [_content("def f():\n    return $1 <b>\n`a\nb`", "text"), _content("/a/b\nc.py", "diff"),
                    _content("term-1", "terminal")]
    call.locations = [{"path": "/p<a>th\nx.py", "line": 3}, {"path": "src/$x$.py"}]
    call.raw_input = {"command": ["bash", "-c", "echo <img src=x onerror=alert(1)> | tee $HOME/x"]}
    call.output, call.exit_code = "\x1b[31mred\x1b[0m <script>\n", 2
    snaps = {"term-1": TerminalSnapshot("term-1", "ls\n-la", "out <b>\n", True, "exit code 0", "")}
    for terminals in ({}, snaps):
        parts = tr._body_parts(call, terminals)
        assert parts and all(html is not None for _, html, _ in parts), [md for md, html, _ in parts if html is None]
        md, html = tr.tool_call_body_forms(call, terminals)
        assert html == _rendered(md)
        assert "<img" not in html and "<script" not in html and "<b>" not in html


@pytest.mark.parametrize("exit_text", ["1 (killed)", "no exit status: the call was cancelled", "exit code -1"])
def test_our_own_exit_lines_are_written_not_parsed(exit_text):
    part = tr._em(exit_text)
    assert part[1] is not None and str(part[1]) + "<p>x</p>\n" == _rendered(safe.Markdown("\n\n").join([part[0], safe.Markdown("x")]))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(calls, hostile, hostile, st.sampled_from(["pending", "in_progress", "completed", "failed", "cancelled", "odd<b>"]),
       st.sampled_from(["read", "edit", "execute", None, "<x>"]))
def test_a_whole_rows_html_is_what_the_parse_writes(d, title, cid, status, kind):
    """A row's header (its title, or its id when it has none) and body: the HTML a view
    without widgets shows (RowForms.html) is the parse of the row's markdown."""
    from acp_kernel.view.toolcall import ToolCallRow

    call = ToolCall(cid or "c", title=title if len(title) % 3 else "", status=status, kind=kind)
    call.content = [_content(t, k) for t, k in d["content"]]
    call.locations = [{"path": p, "line": n} for p, n in d["locations"]]
    call.output, call.exit_code = d["output"], d["exit"]
    forms = ToolCallRow(call, "k", lambda: None).forms()
    assert forms.md == tr.tool_call_markdown(call, {})
    assert forms.html == _rendered(forms.md)
