"""The escaping boundary: every agent-derived string crosses this module
before it reaches an output.

Outputs a notebook produces during a live session are *trusted* by
JupyterLab: raw HTML in them runs, and script in the page can execute code
in any kernel. Agent text (and anything an agent read: a web page, a README,
a model's earlier answer) is not ours. So output data is typed:

- :class:`Markdown` and :class:`Html` are ``str`` subclasses only this module
  makes. Our own templates are literals wrapped in them; whatever is
  interpolated with :meth:`Markdown.format` / :meth:`Html.format` (or joined,
  or added) is escaped unless it already is one of them.
- :class:`Plain` is text for ``text/plain`` (terminal frontends print it
  raw), with control and escape sequences made visible or removed.
- :func:`bundle` builds a display's data and :func:`check_data` is what
  every sink calls: a ``text/markdown``, ``text/html`` or ``text/plain``
  value that did not come from here is refused, so a new output path cannot
  forget to escape.

Agent *markdown* keeps rendering as markdown (:func:`markdown`): it is parsed
with markdown-it-py (CommonMark, the rules JupyterLab's marked follows) and
written back by mdformat, with raw HTML turned into text, links kept only
for safe schemes and images turned into links that name their host (nothing
loads without a click; ``ACP_KERNEL_REMOTE_IMAGES=drop`` drops them). The
result is parsed again and checked; if the check fails the text is shown
verbatim in a code block instead. :func:`markdown_html` renders agent
markdown to HTML for the turn widget (markdown-it with raw HTML off): images
become placeholders the widget loads only on a click.
"""

from __future__ import annotations

import html as _html
import os
import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

from . import termsafe

__all__ = [
    "Html",
    "Markdown",
    "Plain",
    "UnsafeOutput",
    "block",
    "bundle",
    "check_data",
    "code",
    "html",
    "markdown",
    "markdown_html",
    "plain",
    "text",
]

#: Link schemes a click may follow. No scheme (a relative link) is allowed too.
SAFE_SCHEMES = frozenset({"http", "https", "mailto"})
#: Images in agent markdown: "click" (a placeholder naming the host; loads on a
#: click) or "drop" (a placeholder only). Nothing loads by itself either way.
REMOTE_IMAGES = os.environ.get("ACP_KERNEL_REMOTE_IMAGES", "click").strip().lower() or "click"
#: Longest piece of one-line text (a title, a path, an id) shown before "…".
INLINE_LIMIT = 1000


class UnsafeOutput(TypeError):
    """Output data that did not come from :mod:`acp_kernel.safe`."""


# -- typed strings -------------------------------------------------------------


class _Safe(str):
    """A string this module made. Concatenating two keeps the type; anything
    else interpolated is escaped by the subclass's ``_escape``."""

    __slots__ = ()

    @classmethod
    def _escape(cls, value: Any) -> str:  # pragma: no cover - overridden
        raise NotImplementedError

    @classmethod
    def _coerce(cls, value: Any) -> str:
        return str(value) if isinstance(value, cls) else cls._escape(value)

    def __add__(self, other: Any) -> Any:
        if isinstance(other, type(self)):
            return type(self)(str.__add__(self, other))
        if isinstance(other, str):
            return type(self)(str.__add__(self, self._escape(other)))
        return NotImplemented

    def __radd__(self, other: Any) -> Any:
        if isinstance(other, str):
            return type(self)(str.__add__(self._escape(other), self))
        return NotImplemented

    def join(self, parts: Iterable[Any]) -> Any:  # type: ignore[override]
        return type(self)(str.join(self, (self._coerce(p) for p in parts)))

    def format(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        return type(self)(
            str.format(self, *(self._coerce(a) for a in args), **{k: self._coerce(v) for k, v in kwargs.items()})
        )

    def __mod__(self, _: Any) -> Any:  # no unescaped %-formatting
        raise TypeError("use .format(), which escapes")


class Markdown(_Safe):
    """Markdown that is inert: ours, or agent text escaped or vetted here."""

    __slots__ = ()

    @classmethod
    def _escape(cls, value: Any) -> str:
        return text(value)


class Html(_Safe):
    """HTML that is inert: ours, or agent text escaped here."""

    __slots__ = ()

    @classmethod
    def _escape(cls, value: Any) -> str:
        return _html.escape(str(value), quote=True)


class Plain(_Safe):
    """Text for ``text/plain``: no control or escape sequences from an agent."""

    __slots__ = ()

    @classmethod
    def _escape(cls, value: Any) -> str:
        return plain(value)


# -- control characters ----------------------------------------------------------


def visible_controls(value: str, *, keep_newlines: bool = True) -> str:
    """Escape sequences removed, other controls shown as control pictures
    (honest: a ``\r`` that would hide text shows as ``␍``); one line unless
    ``keep_newlines``. The rules are :mod:`acp_kernel.termsafe`'s, shared
    with the CLI's terminal output."""
    return termsafe.clean(value, oneline=not keep_newlines)


def plain(value: Any) -> Plain:
    """Agent text for ``text/plain`` and terminals: lines kept, controls neutralised."""
    if isinstance(value, Plain):
        return value
    return Plain(termsafe.clean(str(value)))


def _short(s: str, limit: int) -> str:
    return s if len(s) <= limit else s[: limit - 1] + "…"


# -- markdown pieces -------------------------------------------------------------

# Characters that can start or change inline markdown (and JupyterLab's $math$).
_MD_PUNCT = re.compile(r"([\\`*\[\]<>!|~&$])")
# Block markers that matter only at the start of a line.
_MD_LEAD = re.compile(r"^(\s*)([#+\-=]|\d+[.)])")


def text(value: Any, limit: int = INLINE_LIMIT) -> Markdown:
    """Agent text shown literally in markdown, on one line (a title, a name, a
    message): markdown characters are backslash-escaped, newlines become
    spaces, controls are shown as control pictures (:func:`visible_controls`)."""
    if isinstance(value, Markdown):
        return value
    s = _short(" ".join(visible_controls(str(value)).split("\n")), limit)
    s = _MD_PUNCT.sub(r"\\\1", s)
    lead = _MD_LEAD.match(s)
    if lead is not None:
        s = lead.group(1) + lead.group(2)[:-1] + "\\" + lead.group(2)[-1] + s[lead.end():]
    return Markdown(s)


def code(value: Any, limit: int = INLINE_LIMIT) -> Markdown:
    """Agent text (a path, an id, a command) as an inline code span: newlines
    shown as ``␊`` and other controls as control pictures, so the span cannot
    end a line (a code span across a line break can let block syntax through)."""
    s = _short(visible_controls(str(value), keep_newlines=False), limit)
    if not s:
        return Markdown("` `")
    longest = max((len(m) for m in re.findall(r"`+", s)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if s[0] in "` " or s[-1] in "` " else ""
    return Markdown(f"{fence}{pad}{s}{pad}{fence}")


_SAFE_INFO = re.compile(r"[^\w+.#-]")


def block(value: Any, lang: str = "") -> Markdown:
    """Agent text verbatim in a fenced code block it cannot close (the fence
    is longer than any backtick run inside), starting on a line of its own."""
    s = visible_controls(str(value))
    longest = max((len(m) for m in re.findall(r"`{3,}", s)), default=0)
    fence = "`" * max(3, longest + 1)
    body = s if s.endswith("\n") or not s else s + "\n"
    return Markdown(f"{fence}{_SAFE_INFO.sub('', lang)}\n{body}{fence}")


def html(value: Any) -> Html:
    """Agent text for an HTML context: everything escaped, quotes too."""
    if isinstance(value, Html):
        return value
    return Html(_html.escape(visible_controls(str(value)), quote=True))


# -- agent markdown ---------------------------------------------------------------


def safe_url(url: str) -> bool:
    """Whether a link may point here: http(s), mailto, or relative."""
    url = url.strip()
    if not url:
        return False
    try:
        scheme = urlsplit(url).scheme.lower()
    except ValueError:
        return False
    if not scheme:
        # "java\tscript:" and friends: browsers drop tabs and newlines.
        return ":" not in url.split("/", 1)[0] and not re.search(r"[\x00-\x20]", url)
    return scheme in SAFE_SCHEMES


class _Renderers:
    """mdformat renderers for what agent markdown must not keep live."""

    @staticmethod
    def html_block(node: Any, context: Any) -> str:
        return str(block(node.content.rstrip("\n"), "html"))

    @staticmethod
    def html_inline(node: Any, context: Any) -> str:
        return _html.escape(node.content, quote=False)

    @staticmethod
    def link(node: Any, context: Any) -> str:
        inner = "".join(child.render(context) for child in node.children)
        href = str(node.attrs.get("href", ""))
        if not safe_url(href):
            return inner
        return f"[{inner}](<{_url_escape(href)}>)"

    @staticmethod
    def image(node: Any, context: Any) -> str:
        # Nothing loads without a click: an image becomes a link to it, naming its host.
        alt = text("".join(c.content for c in node.children if getattr(c, "content", "")) or "image")
        src = str(node.attrs.get("src", ""))
        host = image_host(src)
        if not safe_url(src) or not host or REMOTE_IMAGES == "drop":
            return f"🖼 {alt} " + ("(inline image)" if is_data_image(src) else "(image not shown)")
        return f"[🖼 {alt} (image from {text(host)})](<{_url_escape(src)}>)"


def image_host(src: str) -> str:
    """The host an image URL would load from ("" for data: and relative URLs)."""
    try:
        parts = urlsplit(src.strip())
    except ValueError:
        return ""
    if parts.scheme.lower() not in ("http", "https"):
        return ""
    return parts.hostname or ""


_DATA_IMAGE = re.compile(r"data:image/(png|gif|jpeg|webp);base64,[A-Za-z0-9+/=\s]*\Z", re.I)


def is_data_image(src: str) -> bool:
    """An inline raster image (``data:image/png;base64,...``; never SVG, which can hold script)."""
    return bool(_DATA_IMAGE.match(src.strip()))


def _url_escape(url: str) -> str:
    """A link destination inside ``<...>``: no ``<``, ``>``, newlines or spaces."""
    return re.sub(r"[<>\s\\]", lambda m: "%{:02X}".format(ord(m.group(0))), url)


class _Plugin:
    """An mdformat parser extension carrying our renderers."""

    RENDERERS = {
        "html_block": _Renderers.html_block,
        "html_inline": _Renderers.html_inline,
        "link": _Renderers.link,
        "image": _Renderers.image,
    }
    POSTPROCESSORS: dict[str, Any] = {}

    @staticmethod
    def update_mdit(mdit: Any) -> None:
        pass


_local = threading.local()


def _parsers() -> tuple[Any, Any]:
    """(writer, checker), built once per thread (markdown-it is not shared)."""
    pair = getattr(_local, "pair", None)
    if pair is None:
        from markdown_it import MarkdownIt
        from mdformat.renderer import MDRenderer
        import mdformat_tables

        writer = MarkdownIt(renderer_cls=MDRenderer)
        writer.options["mdformat"] = {}
        writer.options["store_labels"] = False
        writer.options["codeformatters"] = {}
        writer.options["parser_extension"] = [mdformat_tables.plugin, _Plugin]
        mdformat_tables.plugin.update_mdit(writer)
        checker = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
        checker.validateLink = lambda url: True  # see every link, judge it ourselves
        pair = _local.pair = (writer, checker)
    return pair


def problems(md: str) -> list[str]:
    """What would be live in ``md`` when rendered as CommonMark with raw HTML
    on (as JupyterLab renders trusted output): HTML, unsafe links, images."""
    _, checker = _parsers()
    found: list[str] = []
    stack = list(checker.parse(md))
    while stack:
        tok = stack.pop()
        if tok.children:
            stack.extend(tok.children)
        if tok.type in ("html_block", "html_inline"):
            found.append(f"raw HTML {tok.content[:40]!r}")
        elif tok.type == "image":
            found.append(f"image {tok.attrGet('src')!r}")
        elif tok.type == "link_open" and not safe_url(str(tok.attrGet("href") or "")):
            found.append(f"link {tok.attrGet('href')!r}")
    return found


def markdown(value: Any) -> Markdown:
    """Agent markdown, still markdown, with nothing live: raw HTML shown as
    text, links only to http(s)/mailto/relative targets, images as links.

    Text with no ``<`` and no ``[`` cannot hold HTML, a link or an image and
    is returned as is (the common case, and the fast one)."""
    if isinstance(value, Markdown):
        return value
    s = visible_controls(str(value))
    if "<" not in s and "[" not in s:
        return Markdown(s)
    writer, _ = _parsers()
    try:
        out = writer.render(s)
    except (RecursionError, ValueError, AssertionError, IndexError, KeyError):  # a parser corner
        return block(s)
    if problems(out):
        return block(s)
    # mdformat ends with one newline; the stream's pieces are joined by us.
    return Markdown(out[:-1] if out.endswith("\n") and not s.endswith("\n") else out)


_html_local = threading.local()


def _html_renderer() -> Any:
    """markdown-it with raw HTML off (it escapes any), our link and image rules."""
    md = getattr(_html_local, "md", None)
    if md is None:
        from markdown_it import MarkdownIt

        md = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])
        md.validateLink = lambda url: safe_url(url) or is_data_image(url)

        def link_open(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
            href = str(tokens[idx].attrGet("href") or "")
            if not safe_url(href):
                return "<a>"
            return '<a href="{}" target="_blank" rel="noopener noreferrer nofollow">'.format(_html.escape(href, quote=True))

        def image(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
            tok = tokens[idx]
            alt = self.renderInlineAsText(tok.children or [], options, env) or "image"
            return str(image_placeholder(str(tok.attrGet("src") or ""), alt))

        md.add_render_rule("link_open", link_open)
        md.add_render_rule("image", image)
        md = _html_local.md = md
    return md


def image_placeholder(src: str, alt: str) -> Html:
    """An image as the turn widget shows it: a placeholder naming the host;
    the widget's script loads it on a click (``data-src``), never by itself."""
    host = image_host(src)
    if is_data_image(src):
        return Html('<span class="acp-img" role="button" tabindex="0" data-src="{}" data-host="">🖼 {} (inline image: click to show)</span>').format(
            src.strip(), alt)
    if not host or REMOTE_IMAGES == "drop":
        return Html('<span class="acp-img-dropped">🖼 {} (image not shown)</span>').format(alt)
    return Html('<span class="acp-img" role="button" tabindex="0" data-src="{}" data-host="{}">🖼 {} (image from {}: click to load)</span>').format(
        src.strip(), host, alt, host)


def markdown_html(value: Any) -> Html:
    """Agent markdown as HTML for the turn widget: raw HTML escaped, links only
    to safe targets (opening a new tab), images as click-to-load placeholders."""
    if isinstance(value, Html):
        return value
    s = visible_controls(str(value))
    try:
        return Html(_html_renderer().render(s))
    except (RecursionError, ValueError, AssertionError, IndexError, KeyError):  # a parser corner
        return Html("<pre>{}</pre>").format(s)


# -- display data ------------------------------------------------------------------

_CHECKED = {"text/markdown": Markdown, "text/html": Html, "text/plain": Plain}


def bundle(md: Markdown | None = None, plain_text: Any = None, html_text: Html | None = None,
           extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A display's data, checked. ``plain_text`` (agent text is made
    :class:`Plain`) defaults to the markdown source; ``extra`` holds other
    mime types (a widget view)."""
    data: dict[str, Any] = dict(extra or {})
    if md is not None:
        data["text/markdown"] = md
    if html_text is not None:
        data["text/html"] = html_text
    if plain_text is None and md is not None:
        plain_text = Plain(str(md))  # our markdown source is safe to print
    if plain_text is not None:
        data["text/plain"] = plain(plain_text)
    check_data(data)
    return data


def check_data(data: Mapping[str, Any]) -> None:
    """What every sink calls: text outputs must come from this module."""
    for mime, kind in _CHECKED.items():
        value = data.get(mime)
        if value is not None and not isinstance(value, kind):
            raise UnsafeOutput(f"{mime} output was not made by acp_kernel.safe ({type(value).__name__})")
