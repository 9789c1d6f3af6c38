"""Render markdown the way a trusting frontend would, and list what is live.

markdown-it-py is a CommonMark parser (JupyterLab's marked follows the same
rules); raw HTML is on, as JupyterLab renders outputs of a live session, and
every link is kept so we judge it ourselves. The HTML it produces is then
read with the standard library's HTML parser: any tag, attribute or URL that
could run script, load something, or carry a payload marker is reported.
"""

from __future__ import annotations

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
