"""Render markdown the way a trusting frontend would, and list what is live.

markdown-it-py is a CommonMark parser (JupyterLab's marked follows the same
rules); raw HTML is on, as JupyterLab renders outputs of a live session, and
every link is kept so we judge it ourselves. The HTML it produces is then
read with the standard library's HTML parser: any tag, attribute or URL that
could run script, load something, or carry a payload marker is reported.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

from markdown_it import MarkdownIt

_md = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
_md.validateLink = lambda url: True

#: Tags our own templates and markdown itself produce.
ALLOWED_TAGS = {
    "p", "em", "strong", "code", "pre", "a", "ul", "ol", "li", "blockquote", "h1", "h2", "h3", "h4",
    "h5", "h6", "hr", "br", "table", "thead", "tbody", "tr", "th", "td", "del", "s", "details",
    "summary", "sub", "div", "span",
}
SAFE_SCHEMES = ("http:", "https:", "mailto:")


def render_html(md: str) -> str:
    return _md.render(md)


class _Scan(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "input" and {"type": "checkbox", "disabled": None}.items() <= dict(attrs).items() and {
                name for name, _ in attrs} <= {"type", "disabled", "checked", "class"}:
            return  # a task list's box (our plan's "- [ ]"), as GFM renderers draw it
        if tag not in ALLOWED_TAGS:
            self.found.append(f"<{tag}>")
        for name, value in attrs:
            value = value or ""
            if name.startswith("on") or name.startswith("data-pwn") or name == "src" or name == "srcdoc":
                self.found.append(f"<{tag} {name}=...>")
            elif name == "style" and tag != "div":
                self.found.append(f"<{tag} style>")
            elif name == "href":
                squashed = "".join(value.split()).lower()
                if ":" in squashed.split("/", 1)[0] and not squashed.startswith(SAFE_SCHEMES):
                    self.found.append(f"<a href={value!r}>")

    handle_startendtag = handle_starttag


def live(md: str) -> list[str]:
    """What in ``md`` would be live: unknown tags, event handlers, payload
    markers, anything that loads (src), links with other schemes."""
    scan = _Scan()
    scan.feed(render_html(md))
    scan.close()
    return scan.found


# -- more renderers, and what JupyterLab's math pre-pass would see -----------------------------
#
# JupyterLab's markdown renderer pulls math out of the markdown *source*
# before marked parses it (``$``, ``\\(``, ``\\[``, ``\begin{}``), puts
# ``@@N@@`` placeholders back after, and MathJax typesets the page except
# inside elements with an ignore class. Its real pipeline runs in Chromium in
# tests/rendermime/; here, without reproducing it: the source must give that
# pre-pass nothing, and every markdown and HTML output must sit inside the
# element MathJax skips. nbconvert's mistune renderer and markdown-it (VS
# Code's parser) are run for real.

IGNORE_OPEN = '<div class="tex2jax_ignore mathjax_ignore" style="contain: style">'


def mistune_html(md: str) -> str:
    """nbconvert's own markdown to HTML (mistune), as its HTML exporter runs it."""
    from nbconvert.filters.markdown_mistune import markdown2html_mistune

    # nbconvert adds a "¶" anchor link to each heading: its own, not the text's.
    return re.sub(r"<a class=\"anchor-link\" href=\"[^\"]*\">(¶|&#182;)</a>", "", markdown2html_mistune(md))


def live_html(html: str) -> list[str]:
    scan = _Scan()
    scan.feed(html)
    scan.close()
    return scan.found


def math_openings(md: str) -> list[str]:
    """What JupyterLab's math pre-pass or its placeholder pass could take in a
    markdown source: any ``$``, any backslash (``\\(``, ``\\[``, ``\begin``),
    a ``@@``."""
    found = []
    for needle in ("$", "\\"):
        if needle in md:
            at = md.index(needle)
            found.append(f"{needle!r} in …{md[max(0, at - 20):at + 20]!r}…")
    return found


_BLOCKS = {"p", "div", "pre", "blockquote", "ul", "ol", "li", "table", "thead", "tbody", "tr", "td", "th", "br", "hr",
           "h1", "h2", "h3", "h4", "h5", "h6", "details", "summary"}


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.ignored_depth = 0  # how deep inside an element MathJax skips
        self.stack: list[bool] = []
        self.unignored_text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _BLOCKS:
            self.parts.append(" ")  # a block's edge is a line break, whatever the renderer's source spacing
        classes = (dict(attrs).get("class") or "").split()
        ignored = "tex2jax_ignore" in classes and "mathjax_ignore" in classes
        if tag not in ("br", "hr", "img", "input"):
            self.stack.append(ignored)
            self.ignored_depth += ignored

    def handle_endtag(self, tag: str) -> None:
        if tag in _BLOCKS:
            self.parts.append(" ")
        if tag not in ("br", "hr", "img", "input") and self.stack:
            self.ignored_depth -= self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.parts.append(data)
        if not self.ignored_depth and data.strip():
            self.unignored_text.append(data)


def visible_text(html: str) -> str:
    """The text a reader sees in ``html``, whitespace collapsed."""
    p = _Text()
    p.feed(html)
    p.close()
    return " ".join("".join(p.parts).split())


def typesettable_text(html: str) -> list[str]:
    """Text in ``html`` outside every element MathJax skips (it may typeset it)."""
    p = _Text()
    p.feed(html)
    p.close()
    return p.unignored_text


def inert_data(data: dict) -> list[str]:
    """Every problem with one display's data, in every text MIME type: the
    markdown gives JupyterLab's pre-pass nothing and renders inert under
    markdown-it and nbconvert's mistune; the HTML is inert; both keep all
    their text inside the element MathJax skips; plain text has no escapes."""
    found: list[str] = []
    md = data.get("text/markdown")
    if md is not None:
        if not md.startswith(IGNORE_OPEN):
            found.append("markdown not inside the MathJax-ignore element")
        found += [f"markdown: pre-pass {x}" for x in math_openings(md)]
        for name, html in (("markdown-it", render_html(md)), ("mistune", mistune_html(md))):
            found += [f"markdown ({name}): live {x}" for x in live_html(html)]
            found += [f"markdown ({name}): typesettable {x!r}" for x in typesettable_text(html)]
    html = data.get("text/html")
    if html is not None:
        found += [f"html: live {x}" for x in live_html(html)]
        found += [f"html: typesettable {x!r}" for x in typesettable_text(html)]
    plain = data.get("text/plain")
    if plain is not None and ("\x1b" in plain or "\x9b" in plain):
        found.append("plain text with an escape sequence")
    return found
