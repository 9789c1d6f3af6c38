"""The escaping boundary, against adversarial markdown, titles and paths.

Every output is rendered with a real CommonMark parser (raw HTML on, as
JupyterLab renders trusted output) and must have nothing live in it.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acp_kernel import safe
from acp_kernel.services import events as se
from acp_kernel.client.turn import Notice, Turn
from acp_kernel.view import RecordingSink, TurnView, render_markdown
from acp_kernel.view.transcript import auth_markdown, notice_markdown, permission_markdown, plan_markdown
from tests.hostile.render import (
    IGNORE_OPEN,
    inert_data,
    live,
    live_html,
    math_openings,
    mistune_html,
    render_html,
    typesettable_text,
    visible_text,
)

IMG = "<img src=x onerror=alert(1)>"
PAYLOADS = [
    IMG,
    "<script>alert(2)</script>",
    f"`a\nb` {IMG}",  # a code span across a line break, then HTML
    f"``a\n`b``{IMG}",
    f"\\`{IMG}`",
    f"<div>\n{IMG}\n</div>",
    f"- item\n  ```\n  code\n{IMG}\n",
    f'~~~ "><img src=x onerror=alert(1)>\ncode\n~~~\n{IMG}',
    "[x](javascript:alert(1))",
    "[x](JaVaScRiPt:alert(1))",
    "[x](java\tscript:alert(1))",
    "[x](<javascript:alert(1)>)",
    "<javascript:alert(1)>",
    "[r]: javascript:alert(1)\n\n[r]",
    "[r]\n\n[r]: javascript:alert(1)",
    "![leak](http://127.0.0.1:9/x.png?secret=1)",
    "![leak][r]\n\n[r]: http://127.0.0.1:9/x.png",
    "[![i](http://h/i.png)](http://ok)",
    '<a href="javascript:alert(1)">x</a>',
    "<details open ontoggle=alert(1)>",
    "<!-- comment --><img src=x onerror=alert(1)>",
    "<![CDATA[<img src=x onerror=alert(1)>]]>",
    "<?php x ?><svg onload=alert(1)>",
    "| a | b |\n|---|---|\n| <img src=x onerror=alert(1)> | `c|d` |",
    "> quote <img src=x onerror=alert(1)>\n> ```\n> x",
    "    indented <img src=x onerror=alert(1)>\n\n<b onclick=x>",
    "&lt;img src=x onerror=alert(1)&gt; &#60;script&#62;",
    "\\<b onmouseover=alert(1)>",
    "a\x1b]8;;javascript:alert(1)\x07link\x1b]8;;\x07 <img src=x onerror=alert(1)>",
    "```\n```" + IMG,
    "<iframe srcdoc='<script>alert(1)</script>'>",
    "*<img src=x onerror=alert(1)>*",
    "[a <img src=x onerror=alert(1)>](http://ok \"t<script>\")",
]

PIECES = [
    "`", "``", "```", "~~~", "\n", "\n\n", " ", "    ", "> ", "- ", "1. ", "|", "---", "\\", "*", "_",
    "[", "]", "(", ")", "!", "<", ">", "&", ";", ":", '"', "'", "=", "#", "$",
    "<img src=x onerror=alert(1)>", "<script>", "</script>", "<div>", "</div>", "<!--", "-->",
    "javascript:alert(1)", "http://ok/", "[x]", "](", "<a href=", "onerror=", "<details ontoggle=x>",
    "[r]: ", "\x1b[31m", "\r", "\u202e", "<http://ok>", "<b", "a", "text",
]
adversarial = st.lists(st.sampled_from(PIECES), max_size=40).map("".join)


@pytest.mark.parametrize("payload", PAYLOADS)
def test_agent_markdown_has_nothing_live(payload):
    out = safe.markdown(payload)
    assert isinstance(out, safe.Markdown)
    assert live(out) == [], out


@pytest.mark.parametrize("payload", PAYLOADS)
def test_text_code_and_block_show_the_payload_literally(payload):
    for out in (safe.text(payload), safe.code(payload), safe.block(payload, 'x"><img')):
        assert live(out) == [], out
    # Text is shown, not dropped: the words of the payload are in the rendered page.
    assert "onerror" in render_html(safe.text(IMG)) and "&lt;img" in render_html(safe.code(IMG))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(adversarial)
def test_property_agent_markdown(md):
    assert live(safe.markdown(md)) == []


@settings(max_examples=200, deadline=None)
@given(adversarial, adversarial)
def test_property_inline_pieces_in_our_templates(a, b):
    for out in (
        safe.Markdown("**{}** at {} ({})").format(a, safe.code(b), b),
        safe.Markdown("- {}\n- {}").format(safe.text(a), safe.code(b)),
        safe.Markdown("{}\n\n{}").format(safe.block(a, b), safe.markdown(b)),
        notice_markdown("warning", a + "\n" + b),
        plan_markdown([{"content": a, "status": "in_progress"}, {"content": b}]),
        auth_markdown([{"id": a, "name": b, "description": a, "type": "terminal", "args": [b]}], [a]),
    ):
        assert live(out) == [], out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(adversarial, adversarial, adversarial)
def test_property_a_whole_hostile_turn(text, title, path):
    """Every output of a live view and the saved transcript of a turn whose
    text, tool title, paths and plan are adversarial."""
    turn, sink = Turn("s1"), RecordingSink()
    TurnView(turn, sink)
    turn.apply_update({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}})
    turn.apply_update({"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": title}})
    turn.apply_update({
        "sessionUpdate": "tool_call", "toolCallId": path, "title": title, "kind": "edit", "status": "completed",
        "locations": [{"path": path, "line": 3}],
        "rawInput": {"command": title},
        "content": [
            {"type": "content", "content": {"type": "text", "text": text}},
            {"type": "diff", "path": path, "oldText": title, "newText": text},
        ],
    })
    turn.apply_update({"sessionUpdate": "plan", "entries": [{"content": title, "status": "pending", "priority": "low"}]})
    turn.apply_update({"sessionUpdate": "current_mode_update", "currentModeId": title})
    turn.apply_update({"sessionUpdate": "usage_update", "used": 1, "size": 2, "cost": {"amount": 1, "currency": text}})
    turn.add(Notice("warning", text))
    turn.add(se.PermissionResolved("s1", path, title, path, title, "policy"))
    turn.finish("end_turn")
    for data in sink.outputs():
        assert live(data.get("text/markdown", "")) == [], data
        assert "<img" not in data.get("text/html", "")
        assert "\x1b" not in data.get("text/plain", "")
    assert live(render_markdown(turn)) == []


def test_a_permission_question_shows_hostile_titles_and_option_names_as_text():
    prompt = se.PermissionPrompt.__new__(se.PermissionPrompt)  # only the fields the renderer reads
    prompt.title, prompt.kind = f"Read README.md\n{IMG}", "execute<script>"
    prompt.options = [{"optionId": "a", "name": f"Allow {IMG}", "kind": "allow_once"}]
    md = permission_markdown(prompt)
    assert live(md) == [] and "Allow &lt;img" in render_html(md)


def test_sinks_refuse_text_that_did_not_cross_the_boundary():
    sink = RecordingSink()
    for data in ({"text/markdown": IMG}, {"text/html": IMG}, {"text/plain": "x"}):
        with pytest.raises(safe.UnsafeOutput):
            sink.display(data)
    sink.display(safe.bundle(safe.Markdown("ok")))


def test_interpolation_escapes_unless_already_safe():
    m = safe.Markdown("**{}**").format(IMG)
    assert isinstance(m, safe.Markdown) and live(m) == []
    assert isinstance(safe.Markdown("a") + IMG, safe.Markdown) and live(safe.Markdown("a") + IMG) == []
    assert isinstance(IMG + safe.Markdown("a"), safe.Markdown) and live(IMG + safe.Markdown("a")) == []
    assert live(safe.Markdown(", ").join([IMG, safe.code(IMG)])) == []
    assert safe.Html("<b>{}</b>").format(IMG) == "<b>&lt;img src=x onerror=alert(1)&gt;</b>"
    with pytest.raises(TypeError):
        safe.Markdown("%s") % IMG


def test_agent_markdown_keeps_rendering_as_markdown():
    md = "# Title\n\nSome **bold**, a [link](https://example.com/a?b=1), `code`.\n\n| a | b |\n|---|---|\n| 1 | 2 |\n"
    html = render_html(safe.markdown(md))
    assert "<h1>Title</h1>" in html and "<strong>bold</strong>" in html
    assert '<a href="https://example.com/a?b=1">link</a>' in html and "<code>code</code>" in html
    assert "<table>" in html and "<td>1</td>" in html
    plain = "Plain text with no brackets: the fast path returns it as is."
    assert safe.markdown(plain) == plain


def test_images_become_links_that_load_nothing():
    html = render_html(safe.markdown("see ![chart](https://example.com/c.png) here"))
    assert "<img" not in html and 'href="https://example.com/c.png"' in html and "chart" in html


def test_paths_with_newlines_stay_on_their_line():
    path = "/w/evil\n# heading\n<img src=x onerror=alert(1)>.py"
    html = render_html(safe.Markdown("- 📍 {}").format(safe.code(path)))
    assert "<h1>" not in html and html.count("<li>") == 1 and live(html) == []


def test_plain_text_has_no_escape_sequences():
    out = safe.plain("ok\x1b]52;c;ZXZpbA==\x07 \x1b[2J\x1b[8mhidden\x1b[0m \x9b31m \u202egnp.exe\r\n")
    assert "\x1b" not in out and "\x9b" not in out and "\u202e" not in out and "\x07" not in out
    assert out.endswith("\n") and "hidden" in out


# -- the turn widget's HTML (safe.markdown_html): the page sets it as innerHTML ----------------


@pytest.mark.parametrize("payload", PAYLOADS)
def test_widget_html_of_agent_markdown_has_nothing_live(payload):
    out = safe.markdown_html(payload)
    assert isinstance(out, safe.Html)
    assert live_html(out) == [], out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(adversarial)
def test_property_widget_html(md):
    assert live_html(safe.markdown_html(md)) == []


def test_widget_html_keeps_markdown_and_shows_a_code_span_across_a_line_break_as_code():
    html = safe.markdown_html(f"# Title\n\n**bold** `a\nb` {IMG} [ok](https://example.com) [bad](javascript:alert(1))")
    assert "<h1>Title</h1>" in html and "<strong>bold</strong>" in html and "<code>a b</code>" in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    assert '<a href="https://example.com" target="_blank" rel="noopener noreferrer nofollow">ok</a>' in html
    assert "javascript" not in html.split("[bad]")[0] and live_html(html) == []


def test_remote_images_are_placeholders_naming_their_host_and_load_nothing(monkeypatch):
    html = safe.markdown_html("![chart](https://img.example.com/c.png?leak=1) ![d](data:image/png;base64,AAAA)"
                              " ![svg](data:image/svg+xml;base64,PHN2Zz4=) ![rel](x.png)")
    assert "<img" not in html and live_html(html) == []
    assert 'data-host="img.example.com"' in html and "image from img.example.com: click to load" in html
    assert "inline image: click to show" in html  # a raster data: image may be shown inline
    assert html.count('class="acp-img"') == 2 and html.count("image not shown") == 1  # a relative one: never
    assert "![svg](data:image/svg+xml" in html  # SVG (it can hold script) is not even an image: its source as text
    md = safe.markdown("![chart](https://img.example.com/c.png?leak=1)")
    assert "(image from img.example.com)" in md and live(md) == []
    monkeypatch.setattr(safe, "REMOTE_IMAGES", "drop")
    assert "data-src" not in safe.markdown_html("![chart](https://img.example.com/c.png)")
    assert "img.example.com" not in safe.markdown("![chart](https://img.example.com/c.png)")


# -- JupyterLab's math pre-pass and MathJax, nbconvert's mistune, markdown-it (issue 21) -------------
#
# JupyterLab takes math out of a text/markdown *source* before marked parses
# it; a code span's closing backtick can go with it, and the raw HTML after
# it is live. MathJax then typesets agent text anywhere. The oracle here runs
# markdown-it and nbconvert's real mistune renderer, and checks that the
# source gives the pre-pass nothing at all (tests/rendermime/ runs
# JupyterLab's own pipeline in Chromium).

ATTACKS = [
    "Try `<img src=x onerror=alert(1)>\\\\(` then \\\\)",  # the pre-pass eats the code span's closing backtick
    "> ```\n> <img src=x onerror=alert(1)>\\\\(\n>\n> ```\n\\\\)",  # a fence in a block quote: ">" lines are not blank
    "$x$", "$$x$$ and $y$", "\\\\(x\\\\) and \\\\[y\\\\]", "\\begin{x}<img src=x onerror=alert(1)>\\end{x}",
    "$\\style{background-color:red}{x}$",
    "\\$5 and \\$6",
    "@@0@@ and @@1@@", "$a$ @@0@@ $b$",
    "`a\nb` <img src=x onerror=alert(1)>",  # a code span across a line break
    "<img src=x onerror=alert(1)>",
    "&lt;b&gt; &amp;amp; &#36;x&#36;",  # references the agent wrote
    "`$x$` and\n\n```\n$y$ \\\\(\n\n@@0@@\n```\n",
    "| a | b |\n|---|---|\n| `$x|y$` | \\\\(z\\\\) |",
    "a hard break\\\nand a trailing \\\\",
    "1. `\\\\(`\n2. $\n\n   ```\n   \\\\)\n   ```",
    "/tmp/evil\n# heading\n<img src=x onerror=alert(6)>.py",
    # found by tests/rendermime in JupyterLab: marked's GFM autolink takes a code span's opening backtick,
    # and reads no <...> link destination after a hard break in a list item
    "see www.example.com`<img src=x onerror=alert(1)>` here", "see http://b`<img src=x onerror=alert(1)>` here",
    "- ?\n\\\n[](svg/onload=alert(1))",
]

_AGENT_VIEW = None


def agent_markdown_text(md: str) -> str:
    """What a reader sees of agent markdown in CommonMark with raw HTML shown as text."""
    global _AGENT_VIEW
    if _AGENT_VIEW is None:
        from markdown_it import MarkdownIt

        _AGENT_VIEW = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])
    return visible_text(_AGENT_VIEW.render(md))


@pytest.mark.parametrize("payload", ATTACKS)
def test_agent_markdown_is_inert_and_reads_the_same_in_every_renderer(payload):
    md = safe.markdown(payload)
    assert math_openings(md) == [] and safe.problems(md) == [], md
    data = safe.bundle(md)
    assert inert_data(data) == [], (md, inert_data(data))
    page = visible_text(data["text/html"])
    # The same words whichever renderer reads which form, and as CommonMark reads the agent's text.
    assert page == visible_text(render_html(data["text/markdown"])) == visible_text(mistune_html(data["text/markdown"]))
    assert page == agent_markdown_text(safe.visible_controls(payload)), (page, md)


def test_agent_math_and_placeholders_show_as_written():
    data = safe.bundle(safe.markdown("cost $5 and \\$6, $x$ $$y$$ \\\\(z\\\\) @@0@@ `$w$`"))
    assert visible_text(data["text/html"]) == "cost $5 and $6, $x$ $$y$$ \\(z\\) @@0@@ $w$"
    assert "&#36;5" in data["text/markdown"] and "<code>&#36;w&#36;</code>" in data["text/markdown"]
    assert data["text/plain"] == "cost $5 and $6, $x$ $$y$$ \\(z\\) @@0@@ $w$"
    # Prose whose "$" no code could hold takes the fast path: references, no parse.
    assert safe.markdown("it costs $5, not $6") == "it costs &#36;5, not &#36;6"
    assert safe.markdown("a\n\n    $x") != "a\n\n    &#36;x"  # indented code: a reference would show as written


@pytest.mark.parametrize("payload", ATTACKS)
def test_titles_code_and_blocks_of_attacks_are_inert_and_literal(payload):
    shown = safe.visible_controls(payload)
    assert inert_data(safe.bundle(safe.block(payload, 'sh"><img'))) == []  # a hostile language name too
    # (stripped for the bold: "** x **" is no emphasis in any renderer, but the same text in each)
    md = safe.Markdown("**{}** at {}\n\n{}").format(payload.strip(), safe.code(payload), safe.block(payload, "sh"))
    assert math_openings(md) == [] and safe.problems(md) == [], md
    data = safe.bundle(md)
    assert inert_data(data) == [], inert_data(data)
    page = visible_text(data["text/html"])
    assert page == visible_text(render_html(data["text/markdown"])) == visible_text(mistune_html(data["text/markdown"]))
    one_line = " ".join(" ".join(shown.strip().split("\n")).split())
    assert page.startswith(one_line + " at " + " ".join(safe.visible_controls(payload, keep_newlines=False).split()))
    assert page.endswith(" ".join(shown.split()))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(PIECES + ["$", "$$", "\\\\(", "\\\\)", "\\\\[", "\\begin{x}", "\\end{x}", "@@0@@",
                                          "\\style{color:red}{x}", "\n>\n> ", "&#36;", "&#92;", "@@", "1"]),
                max_size=40).map("".join))
def test_property_every_form_of_agent_markdown_is_inert(md):
    out = safe.markdown(md)
    assert inert_data(safe.bundle(out)) == []
    assert inert_data(safe.bundle(safe.Markdown("{} {}\n\n{}").format(safe.text(md), safe.code(md), safe.block(md)))) == []
    html = safe.markdown_html(md)
    assert live_html(html) == [] and typesettable_text(html) == []


def test_no_code_span_or_link_destination_holds_an_angle_bracket():
    """No code span holds a raw "<" and no link destination is written as <...>:
    a renderer that reads either differently (marked, above) finds no tag."""
    from markdown_it import MarkdownIt

    parser = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
    for payload in ATTACKS + PAYLOADS:
        assert "<" not in re.sub(r"</?code>", "", safe.code(payload)) and "<" not in safe.text(payload)
        md = safe.markdown(payload)
        assert "](<" not in md, md
        spans = [t for tok in parser.parse(md) for t in tok.children or [] if t.type == "code_inline"]
        assert all("<" not in t.content for t in spans), (payload, md)


def test_problems_allow_only_our_own_tags():
    for ours in (safe.code("a|b $c"), safe.block("$x\n\n\\y", "sh"), safe.markdown("a\\\nb"),
                 safe.Markdown("<details><summary>x</summary>\n\ny\n\n</details>\n\n<sub>z</sub>")):
        assert safe.problems(ours) == [], ours
    for bad in ('<code onclick="x">a</code>', '<pre style="x">a</pre>', "<img src=x>", '<div class="tex2jax_ignore">',
                '<pre><code class="x" id=y>a</code></pre>', "<code>a $b</code>", "a \\* b", "@@0@@", "<b>x</b>"):
        assert safe.problems(bad), bad


def test_sinks_refuse_markdown_outside_the_mathjax_ignore_element_or_with_math():
    sink = RecordingSink()
    with pytest.raises(safe.UnsafeOutput):
        sink.display({"text/markdown": safe.Markdown("ok")})  # not from bundle: no ignore element
    with pytest.raises(safe.UnsafeOutput):
        sink.display({"text/html": safe.Html("<b>ok</b>")})
    with pytest.raises(safe.UnsafeOutput):
        safe.bundle(safe.Markdown("a template with $1"))  # our own text must not feed the pre-pass either
    data = safe.bundle(safe.Markdown("ok"))
    assert data["text/markdown"].startswith(IGNORE_OPEN) and data["text/html"].startswith(IGNORE_OPEN)
    sink.display(data)


@pytest.mark.parametrize("payload", ATTACKS)
def test_widget_html_is_inside_the_mathjax_ignore_element(payload):
    html = safe.markdown_html(payload)
    assert html.startswith(IGNORE_OPEN) and typesettable_text(html) == [] and live_html(html) == []


@pytest.mark.parametrize("payload", ATTACKS)
def test_a_whole_turn_of_attacks_in_every_output_and_the_transcript(payload):
    turn, sink = Turn("s1"), RecordingSink()
    TurnView(turn, sink)
    turn.apply_update({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": payload + "\n\n"}})
    turn.apply_update({"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": payload}})
    turn.apply_update({
        "sessionUpdate": "tool_call", "toolCallId": payload, "title": payload, "kind": "execute", "status": "completed",
        "locations": [{"path": payload, "line": 3}], "rawInput": {"command": payload},
        "content": [{"type": "content", "content": {"type": "text", "text": payload}},
                    {"type": "diff", "path": payload, "oldText": payload, "newText": "x"}],
    })
    turn.apply_update({"sessionUpdate": "plan", "entries": [{"content": payload, "status": "in_progress", "priority": "low"}]})
    turn.apply_update({"sessionUpdate": "usage_update", "used": 1, "size": 2, "cost": {"amount": 0.5, "currency": "USD"}})
    turn.add(Notice("warning", payload))
    turn.add(se.PermissionResolved("s1", payload, payload, payload, payload, "policy"))
    turn.apply_update({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "the end"}})
    turn.finish("end_turn")
    outs = sink.outputs()
    for data in outs:
        assert inert_data(data) == [], (data, inert_data(data))
    assert "$0.50" in visible_text(outs[-1]["text/html"])  # our own "$" (the cost) is a reference too
    saved = safe.bundle(render_markdown(turn))
    assert inert_data(saved) == []
    assert "the end" in visible_text(saved["text/html"])


def test_plain_text_gives_jupyterlabs_text_autolinker_no_script_link():
    """JupyterLab's text/plain renderer links any "scheme://" and "data:": a
    word joiner (no width) before the colon breaks that for other schemes,
    and for an http(s)/www link whose text holds a character no URL has."""
    out = safe.plain("see javascript://%0Aalert(1) and data:text/html,x and JAVASCRIPT:y "
                     "www.a.b`<img src=x onerror=alert(1)>` http://ok.example/a?b=1 mailto:a@b.c")
    assert "javascript://" not in out.lower() and "data:" not in out and "javascript:" not in out.lower()
    assert "www.a.b" not in out and "http://ok.example/a?b=1" in out and "mailto:a@b.c" in out
    assert out.replace("\u2060", "") == ("see javascript://%0Aalert(1) and data:text/html,x and JAVASCRIPT:y "
                                         "www.a.b`<img src=x onerror=alert(1)>` http://ok.example/a?b=1 mailto:a@b.c")


_SCHEMEISH = st.lists(st.sampled_from([*"datjvscripwWDATJVSCRIPx:/. <>`|\n", "\u0131", "\u0130", "\u017f", "://", "www.",
                                       "data:", "javascript:", "JavaScr\u0131pt:", "vbscript:", "http://a.b", "ftp://x|y",
                                       "WWW.a.b`", "def main():"]), max_size=14).map("".join)


@settings(max_examples=500, deadline=None)
@given(_SCHEMEISH)
def test_property_plain_runs_its_link_rules_only_where_they_can_match(s):
    """plain() skips each link rule on text it cannot match (issue 25: text with colons
    but no URL cost 128 us/KB, now 3): the same result as running both always."""
    both = safe._ODD_URL.sub(safe._odd_url, safe._LINK_SCHEME.sub(
        lambda m: m.group(1) if m.group(1).lower() in safe._KEPT_SCHEMES else m.group(1) + "\u2060", s))
    assert safe._unlinked(s) == both


# -- the plain-prose fast path (issue 25) ---------------------------------------------

# Prose and every character near the line that decides: block markers, indents,
# trailing spaces, blank lines of spaces, quotes, "$", digits with "." or ")",
# non-breaking spaces, and the inline specials that must send it to markdown-it.
_PROSE = st.lists(st.sampled_from([*"ab $\"'.):-+=>0123456789\n\u00a0é", "    ", "1. ", "\n\n", "  \n", "&#36;",
                                    *"*`<[&|~\\#", "\t"]), max_size=40).map("".join)


@settings(max_examples=500, deadline=None)
@given(_PROSE)
def test_the_prose_fast_path_writes_what_markdown_it_writes(s):
    agent, ours = safe._html_renderers()
    fast = safe._prose_html(s)
    if fast is not None:
        assert fast == agent.render(s), s
    md = s.replace("$", "&#36;")  # plain prose as safe.markdown writes it
    fast = safe._prose_html(md.replace("&#36;", "$"))
    if fast is not None:
        assert fast == ours.render(md), md


@settings(max_examples=500, deadline=None)
@given(st.one_of(_PROSE, st.lists(st.sampled_from(["a b", "$", "    ", "@@0@@", "@@", "\x1b[31m", "\r", "\u202e",
                                                    "www.a.b", "javascript:x", "http://a.b/", "\n", "\n\n", "é"]),
                                   max_size=20).map("".join)))
def test_the_three_forms_of_prose_are_each_functions_own(s):
    """One cleaning and one render for a finished block of prose: the same markdown,
    widget HTML, saved HTML and plain text the four functions make one by one."""
    forms = safe.prose_forms(s)
    if forms is None:
        return  # not prose: each function on its own (the tests above)
    md, html, text = forms
    assert (type(md), type(html), type(text)) == (safe.Markdown, safe.Html, safe.Plain)
    assert md == safe.markdown(s) and text == safe.plain(s), s
    assert safe.ignored(html) == safe.markdown_html(s) and html == safe.inert_html_inner(md), s


def test_the_prose_fast_path_takes_prose_and_leaves_markdown_and_hostile_text_to_the_parser():
    assert safe.prose_forms("Plain prose, costs $5.\nA second line.\n\nA paragraph www.a.b") is not None
    for s in ["a    b $5", "@@0@@ a", "a [b](c)", "a <b>"]:
        assert safe.prose_forms(s) is None, s
    assert safe._prose_html('Plain "prose", costs $5.\nA second line.\n\nA paragraph') is not None
    for s in [*PAYLOADS, "a *b*", "- item", "1. one", "    code", "a  \nb", "> quote", "# h", "a\n===", "x &amp; y",
              "`a\nb`", "$x$ and \\(y\\)", "www.example.com/<x>", "| a | b |"]:
        assert safe._prose_html(s) is None, s


# -- the linked-prose fast path (issue 25) --------------------------------------------

# Prose with links and angle brackets, and every piece near the rules that send
# it to the parse: definitions, images, autolinks, HTML blocks and tags across
# lines, code, escapes, placeholders, unsafe and odd destinations.
_LINKED = st.lists(st.sampled_from([
    *"ab $\"'.):-+=>0123456789\n", "  ", "\n\n", "    ", "\t", "1. ", "- ", "> ", "* ", "|", "&", "&lt;", "@",
    "[", "]", "(", ")", "](", "]:", "!", "<", "<b>", "</b>", "<div>", '<a title="', "<b\n", "`", "*", "_", "\\",
    "@@0@@", "```", "é", "[the docs](https://example.com/a_b#s)", "[x](javascript:alert(1))", "[y](b.py)",
    "[z](http://a.b/$x$)", "(https://ok.example/)", "<https://ok.example>", "<a@b.c>", "https://ok.example/",
    "www.a.b", "javascript:", "%0A", " onerror=alert(1)>", "<img src=x onerror=alert(1)>",
]), max_size=40).map("".join)
# And mostly what the fast path takes: prose, safe links, tags, "$", block markers.
_LINKED_PROSE = st.lists(st.sampled_from([
    "a", "word", " ", "  ", "\n", "\n\n", "$", "1. ", "- ", "> ", "# ", "=", ".", "*", "_", "|", "-", "<", ">",
    "<b>", "</b>", "<p>", '<a href="x">', "[", "]", "[a](https://ok.example/x_y#z)", "[b](c.py)", "[c](mailto:a@b.c)",
    "(", ")", "](d)", "&", "é",
]), max_size=40).map("".join)


def _hrefs(html: str) -> list[str]:
    return re.findall(r'<a href="([^"]*)"', html)


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(_LINKED, _LINKED_PROSE))
def test_the_linked_prose_fast_path_is_inert_and_reads_as_the_agents_text(s):
    shown = safe.visible_controls(s)
    fast = safe._linked_prose(shown)
    if fast is None:
        return
    assert safe.markdown(s) == fast
    assert live(fast) == [] and math_openings(fast) == [] and safe.problems(fast) == [], fast
    data = safe.bundle(safe.Markdown(fast))
    assert inert_data(data) == [], data
    page = visible_text(data["text/html"])
    # The words CommonMark reads in the agent's text (mistune's and JupyterLab's readings are
    # checked inert above and in tests/rendermime).
    assert page == visible_text(render_html(fast)) == agent_markdown_text(shown), (fast, page)
    slow = safe._parsed(shown, safe.REMOTE_IMAGES)
    # The links the parse would keep, and no other.
    assert _hrefs(render_html(fast)) == _hrefs(render_html(slow)), (fast, slow)


def test_the_linked_prose_fast_path_takes_links_and_tags_and_leaves_the_rest_to_the_parser():
    taken = {
        "See [the docs](https://example.com/docs/1#s), it is <b>important</b>, costs $5.":
            "See [the docs](https://example.com/docs/1#s), it is &lt;b>important&lt;/b>, costs &#36;5.",
        "a < b and [c](src/a_b.py)\n\n> [d](mailto:x@y.z)": "a &lt; b and [c](src/a_b.py)\n\n> [d](mailto:x@y.z)",
        f"`code` and [x](https://ok.example/) {IMG[:0]}": "`code` and [x](https://ok.example/) ",
    }
    for s, out in taken.items():
        assert safe._linked_prose(s) == out and safe.markdown(s) == out, s
    # Of the attacks that need a parse, one is only a tag after a word (once its escape sequence is gone).
    parsed = [p for p in PAYLOADS if safe._needs_parse(safe.visible_controls(p))]
    taken = [p for p in parsed if safe._linked_prose(safe.visible_controls(p)) is not None]
    assert taken == ["a\x1b]8;;javascript:alert(1)\x07link\x1b]8;;\x07 " + IMG]
    assert live(safe.markdown(taken[0])) == [] and visible_text(render_html(safe.markdown(taken[0]))) == "alink " + IMG
    for s in [*(p for p in parsed if p not in taken), "[x](javascript:alert(1))", "[a](b c)", '[a](https://x "t")', "[a](<b>)", "![i](x.png)",
              "[r]\n\n[r]: https://ok", "<div>\nx", "- <b>", "> <b>", "`a` <b>", "`$x$` [a](b)", "a\n    <b>",
              "<https://ok.example>", "<a@b.c>", "\\<b>", "@@0@@ [a](b)", "```\n[a](b)\n```", "[a](b$)"]:
        assert safe._linked_prose(safe.visible_controls(s)) is None, s


# -- the cache of safe.markdown (issue 25): the same text, the same checked result --------------

CACHED = [
    "raw <b onclick=alert(1)>HTML</b> <img src=x onerror=alert(1)> and [a link](https://ok.example/a) in `code`",
    f"`a code span\nacross a line break` {IMG}",
    "math $x$, $$y$$, \\(z\\), \\[w\\] and [it](https://ok.example/) @@0@@",
    "a path `/tmp/$a\nb.txt` and [p](/tmp/a%0Ab.txt)",
    "[x](javascript:alert(1)) [y](JaVaScRiPt:alert(1)) [z](<java\tscript:alert(1)>)",
    "![leak](http://127.0.0.1:9/x.png?secret=1) [![i](http://h/i.png)](http://ok)",
]


@pytest.mark.parametrize("payload", CACHED)
def test_a_cached_result_is_the_checked_one(payload):
    first = safe.markdown(payload)
    hits = safe._parsed_cached.cache_info().hits
    again = safe.markdown(payload)
    assert safe._parsed_cached.cache_info().hits == hits + 1  # from the cache this time
    assert isinstance(again, safe.Markdown) and again == first
    assert again == safe._parsed(safe.visible_controls(payload), safe.REMOTE_IMAGES)  # what a parse makes
    assert live(again) == [] and math_openings(again) == [] and safe.problems(again) == [], again
    assert inert_data(safe.bundle(again)) == []


def test_the_cache_keys_on_the_image_setting_and_skips_long_text(monkeypatch):
    img = "![chart](https://img.example.com/cached.png)"
    assert "img.example.com" in safe.markdown(img)
    monkeypatch.setattr(safe, "REMOTE_IMAGES", "drop")
    assert "img.example.com" not in safe.markdown(img)  # not the result cached under "click"
    long = ("[a link](https://ok.example/) <b>x</b> $y$ " * 500)[: safe._CACHED_CHARS + 100]
    misses = safe._parsed_cached.cache_info().misses
    out = safe.markdown(long)
    assert safe._parsed_cached.cache_info().misses == misses  # past the limit: parsed, never kept
    assert live(out) == [] and math_openings(out) == [] and safe.problems(out) == []
