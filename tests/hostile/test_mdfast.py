"""acp_kernel.mdfast: markdown-it with its two per-character loops done by
``re`` parses exactly as markdown-it does, token for token, on hostile and
generated markdown (the escaping boundary's writer and checker use it)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from markdown_it.rules_block import StateBlock

from acp_kernel import mdfast, safe
from acp_kernel.mdfast import speed_up
from tests.hostile.test_boundary import PAYLOADS, PIECES

# Line starts and indents (tabs, spaces, a last line of spaces left unended),
# blocks, inline rules and the terminator characters of the text rule.
MORE = [
    "\t", " \t", "\t ", "  \t- x", "   ", "\n   ", "\n\t", "{", "}", "^", "%", "+", "=", "@", "~", "é", "\u00a0",
    "1) ", "# ", "===", "***", "<pre>", "</pre>", "![i](http://h/i.png)", "[t](http://ok/a_b)", "**b**",
    "|a|b|\n|-|-|\n|c|d|", "~~s~~", "&amp;", "&#36;", "$$", "\\(", "\\[", "@@1@@", "```py\n", "> > ",
]
markdownish = st.lists(st.sampled_from(PIECES + MORE), max_size=60).map("".join)


def _parsers(html: bool) -> tuple[MarkdownIt, MarkdownIt]:
    def make() -> MarkdownIt:
        return MarkdownIt("commonmark", {"html": html}).enable(["table", "strikethrough"])

    return make(), speed_up(make())


STOCK = {html: _parsers(html) for html in (True, False)}


def _dump(tokens):
    return [(t.type, t.tag, t.nesting, t.attrs, t.map, t.level, t.content, t.markup, t.info, t.meta, t.block,
             t.hidden, _dump(t.children or [])) for t in tokens]


def _table(state: StateBlock) -> tuple:
    return state.bMarks, state.eMarks, state.tShift, state.sCount, state.bsCount, state.lineMax, state.src


def _same(src: str) -> None:
    md = STOCK[True][0]
    # The line table itself, not only what the rules make of it.
    assert _table(mdfast._StateBlock(src, md, {}, [])) == _table(StateBlock(src, md, {}, [])), repr(src)
    for stock, fast in STOCK.values():
        assert _dump(fast.parse(src)) == _dump(stock.parse(src)), repr(src)
        assert fast.render(src) == stock.render(src), repr(src)


@pytest.mark.parametrize("src", PAYLOADS + ["", " ", "\n", "a", "a\n", "  ", "a\n  ", "a\n\t", "\t\tx",
                                            " \t x\n\t  - y\n", "x\n\n\n", "- a\n\n  b\n\n\tc"])
def test_same_tokens_on_hostile_markdown(src):
    _same(src)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(markdownish)
def test_property_same_tokens(src):
    _same(src)


def test_the_boundary_parsers_are_the_fast_ones():
    writer, checker = safe._parsers()
    for md in (writer, checker, *safe._html_renderers()):
        assert md.inline.ruler.getRules("")[0].__name__ == "text_rule"
        assert md.normalizeLink is mdfast.normalize_link
        assert type(md.block).__module__ == "acp_kernel.mdfast"


def test_the_text_rule_stops_where_markdown_its_does():
    """The text run's character class is markdown-it's own terminator set, exactly: a
    terminator missing here would let a link, code or HTML start be read as plain text
    by the writer and by the checker alike (a markdown-it release that adds one fails here)."""
    import importlib
    import re

    stock_text = importlib.import_module("markdown_it.rules_inline.text")  # the module, not its rule
    stops = {chr(c) for c in range(0x2000) if not re.fullmatch(mdfast._TEXT.pattern, chr(c))}
    assert stops == set(stock_text._TerminatorChars)


def test_the_url_normalizers_are_markdown_its_cached():
    """normalizeLink and normalizeLinkText are functions of the URL (mdurl and punycode,
    nothing else): cached, the same string; a long URL is not kept; the cache is bounded."""
    from markdown_it.common import normalize_url

    urls = ["http://a.b/c d", "HTTP://ÜÜ.de/ü?x=1#y", "//host/p", "mailto:a@Ü.de", "%zz", "javascript:alert(1)",
            "x" * 600, ""]
    for url in urls:
        assert mdfast.normalize_link(url) == normalize_url.normalizeLink(url)
        assert mdfast.normalize_link_text(url) == normalize_url.normalizeLinkText(url)
    cached = mdfast._normalize_link_cached
    assert cached.cache_info().maxsize == 1024
    cached.cache_clear()
    mdfast.normalize_link("x" * (mdfast._URL_CACHED + 1))
    assert cached.cache_info().currsize == 0
    mdfast.normalize_link("x" * mdfast._URL_CACHED)
    assert cached.cache_info().currsize == 1
    fast = STOCK[True][1]
    assert fast.normalizeLink is mdfast.normalize_link and fast.normalizeLinkText is mdfast.normalize_link_text
    md = MarkdownIt()
    md.normalizeLink = lambda url: url  # type: ignore[method-assign]
    assert speed_up(md).normalizeLink("a b") == "a b"  # a caller's own is kept
