"""markdown-it-py's two per-character loops, done by ``re`` instead.

markdown-it-py (pure Python) walks its source a character at a time in two
places: the inline ``text`` rule (skip to the next character any other inline
rule could start on) and the block state's line table (where each line starts
and ends, and its indent). On prose they are about half of a parse, and
:mod:`acp_kernel.safe` parses agent markdown twice (once to write it back
inert, once to check what it wrote), the turn widget's HTML once more.
On prose with links, ``normalizeLink`` (mdurl's parse, encode and format,
per link) is the next big cost, and the checker's parse normalizes the URLs
the writer's did: the stock URL normalizers are cached.

:func:`speed_up` swaps both in on one :class:`~markdown_it.MarkdownIt`: the
same results, token for token (``tests/hostile/test_mdfast.py`` compares
the two parsers on generated and hostile markdown), in C-level ``re`` steps.
Nothing else of the parser changes; the instance's rules and options are its
own. Imported lazily by :mod:`acp_kernel.safe` (markdown-it is heavy).
"""

from __future__ import annotations

import functools
import re
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.common import normalize_url
from markdown_it.parser_block import ParserBlock
from markdown_it.rules_block import StateBlock
from markdown_it.rules_inline import StateInline

__all__ = ["normalize_link", "normalize_link_text", "speed_up", "text_rule"]

# The inline text rule's terminators (markdown_it.rules_inline.text._TerminatorChars):
# a run of anything else is plain text.
_TEXT = re.compile(r"[^\n!#$%&*+\-:<=>@\[\\\]^_`{}~]+")
# A line's indent: spaces and tabs (markdown_it.common.utils.isStrSpace).
_INDENT = re.compile(r"[ \t]*")


def text_rule(state: StateInline, silent: bool) -> bool:
    """The ``text`` inline rule: a run of characters no other rule starts on."""
    m = _TEXT.match(state.src, state.pos, state.posMax)
    if m is None:
        return False
    if not silent:
        state.pending += m.group()
    state.pos = m.end()
    return True


#: Longest URL whose normalized form is kept (agent text is hostile: a bounded cache,
#: of bounded entries).
_URL_CACHED = 512


@functools.lru_cache(maxsize=1024)
def _normalize_link_cached(url: str) -> str:
    return normalize_url.normalizeLink(url)


@functools.lru_cache(maxsize=1024)
def _normalize_link_text_cached(url: str) -> str:
    return normalize_url.normalizeLinkText(url)


def normalize_link(url: str) -> str:
    """markdown-it's ``normalizeLink`` (a function of the URL alone), cached: the writer's
    parse and the checker's normalize the same URLs, and a re-render all of them."""
    return _normalize_link_cached(url) if len(url) <= _URL_CACHED else normalize_url.normalizeLink(url)


def normalize_link_text(link: str) -> str:
    """markdown-it's ``normalizeLinkText`` (autolinks), cached the same way."""
    if len(link) <= _URL_CACHED:
        return _normalize_link_text_cached(link)
    return normalize_url.normalizeLinkText(link)


class _StateBlock(StateBlock):
    """A block state whose line table is built line by line, not character by character."""

    def __init__(self, src: str, md: MarkdownIt, env: Any, tokens: list[Any]) -> None:
        super().__init__("", md, env, tokens)  # every field, and the table's end entry
        self.src = src
        b: list[int] = []
        e: list[int] = []
        t: list[int] = []
        s: list[int] = []
        length = len(src)
        start = 0
        while start < length:
            end = src.find("\n", start)
            indent_end = _INDENT.match(src, start).end()  # type: ignore[union-attr]  # [ \t]* always matches
            if end < 0:
                if indent_end == length:
                    break  # markdown-it: a last line of only spaces, unended, has no entry
                end = length
            indent = indent_end - start
            offset = indent
            if "\t" in src[start:indent_end]:
                offset = 0
                for ch in src[start:indent_end]:
                    offset += 4 - offset % 4 if ch == "\t" else 1
            b.append(start)
            e.append(end)
            t.append(indent)
            s.append(offset)
            start = end + 1
        self.bMarks[:0] = b
        self.eMarks[:0] = e
        self.tShift[:0] = t
        self.sCount[:0] = s
        self.bsCount[:0] = [0] * len(b)
        self.bMarks[-1] = self.eMarks[-1] = length
        self.lineMax = len(b)


class _ParserBlock(ParserBlock):
    def parse(self, src: str, md: MarkdownIt, env: Any, outTokens: list[Any]) -> list[Any] | None:
        if not src:
            return None
        state = _StateBlock(src, md, env, outTokens)
        self.tokenize(state, state.line, state.lineMax)
        return state.tokens


def speed_up(md: MarkdownIt) -> MarkdownIt:
    """``md`` with both loops done by ``re`` and its URL normalizers cached (its rules and
    options kept)."""
    block = _ParserBlock()
    block.ruler = md.block.ruler
    md.block = block
    md.inline.ruler.at("text", text_rule)
    # markdown-it's own URL normalizers only, never one a caller put in their place.
    if "normalizeLink" not in vars(md) and type(md).normalizeLink is MarkdownIt.normalizeLink:
        md.normalizeLink = normalize_link  # type: ignore[method-assign]  # markdown-it's way
    if "normalizeLinkText" not in vars(md) and type(md).normalizeLinkText is MarkdownIt.normalizeLinkText:
        md.normalizeLinkText = normalize_link_text  # type: ignore[method-assign]
    return md
