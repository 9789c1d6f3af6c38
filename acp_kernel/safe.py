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

JupyterLab does more than CommonMark with ``text/markdown``: it takes math
out of the source first (``$``, ``\\\\(``, ``\\\\[``, ``\\begin``) and MathJax
typesets the page. So the markdown we emit holds no ``$`` and no backslash
(character references instead; code holding them is ``<code>``/``<pre>``
HTML we write) and no ``@@N@@``; :func:`bundle` wraps it in an element
MathJax skips and adds the ``text/html`` JupyterLab, nbconvert and VS Code
prefer: :func:`inert_html`, our own markdown rendered by markdown-it, in
the same element. :func:`check_data` refuses markdown or HTML outside it.
"""

from __future__ import annotations

import functools
import html as _html
import os
import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

from . import termsafe
from .errors import AcpError

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
    "unwrapped",
    "wrapped",
]

#: Link schemes a click may follow. No scheme (a relative link) is allowed too.
SAFE_SCHEMES = frozenset({"http", "https", "mailto"})
#: Images in agent markdown: "click" (a placeholder naming the host; loads on a
#: click) or "drop" (a placeholder only). Nothing loads by itself either way.
REMOTE_IMAGES = os.environ.get("ACP_KERNEL_REMOTE_IMAGES", "click").strip().lower() or "click"
#: Longest piece of one-line text (a title, a path, an id) shown before "…".
INLINE_LIMIT = 1000


class UnsafeOutput(AcpError, TypeError):
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

    def join(self, parts: Iterable[Any]) -> Any:
        cls = type(self)
        escape = cls._escape
        # _coerce inlined (a list, not a generator: str.join makes one anyway). Ours go in
        # as they are: str.join reads a str subclass's characters without a copy.
        return cls(str.join(self, [p if isinstance(p, cls) else escape(p) for p in parts]))

    def format(self, *args: Any, **kwargs: Any) -> Any:
        cls = type(self)
        escape = cls._escape
        coerced = [str(a) if isinstance(a, cls) else escape(a) for a in args]  # _coerce inlined
        if not kwargs:
            return cls(str.format(self, *coerced))
        return cls(str.format(self, *coerced, **{k: self._coerce(v) for k, v in kwargs.items()}))

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


# JupyterLab's text/plain renderer makes a link of any "scheme://..." and
# "data:...": a click on "javascript://%0A..." runs it. A word joiner (no
# width, not a space) before the colon of other schemes breaks the pattern.
_LINK_SCHEME = re.compile(r"(?i)(?<![a-z0-9+.-])([a-z][a-z0-9+.-]*)(?=:)(?=://|:(?<=data:)|:(?<=javascript:)|:(?<=vbscript:))")
_KEPT_SCHEMES = frozenset({"http", "https", "mailto", "ftp"})


# A link of a kept scheme (or "www.") whose text holds a character no URL
# has (an agent's "www.a.b`<img ...", a host with "|") is broken up the same way.
_ODD_URL = re.compile(r"(?i)\S*(?:://|www\.)\S*")


# What a URL's host may hold (letters, digits, IDN, port, userinfo); anything else
# makes a link the browser cannot parse, which JupyterLab still draws.
_HOST_OK = re.compile(r"[\w.\-:@~%\u0080-\U0010ffff]*")


def _odd_url(m: re.Match[str]) -> str:
    token = m.group(0)
    start = token.lower().find("://")
    host = token[start + 3:] if start >= 0 else token[token.lower().find("www."):]
    host = re.split(r"[/?#]", host, maxsplit=1)[0]
    if not any(c in token for c in "<>`\"'|\\^{}") and _HOST_OK.fullmatch(host):
        return token
    return re.sub(r"(?i)(://|www(?=\.))", lambda w: "\u2060" + w.group(1) if w.group(1) == "://" else w.group(1) + "\u2060", token)


# A colon _LINK_SCHEME could stop at without "://": after "data" or "...script" (the case
# folded as the regex folds it). Each regex runs only where it can match: _ODD_URL tries every
# position of every word, so text with colons but no URL (code, "a: b") spent 128 us/KB there.
_SCHEME_COLON = re.compile(r":(?:(?<=(?i:data):)|(?<=(?i:script):))")


# "www." in any case, without lowering the text (21 ms for a 3 MB turn's record: not ASCII, no fast path).
_WWW = re.compile(r"[wW][wW][wW]\.")


def _unlinked(s: str) -> str:
    www = _WWW.search(s) is not None
    if ":" not in s and not www:
        return s
    url = "://" in s
    if url or _SCHEME_COLON.search(s):
        s = _LINK_SCHEME.sub(lambda m: m.group(1) if m.group(1).lower() in _KEPT_SCHEMES else m.group(1) + "\u2060", s)
    return _ODD_URL.sub(_odd_url, s) if url or www else s


def plain(value: Any) -> Plain:
    """Agent text for ``text/plain`` and terminals: lines kept, controls
    neutralised, and no link JupyterLab's text renderer would make of a
    scheme other than http(s), mailto and ftp (a word joiner before its colon)."""
    if isinstance(value, Plain):
        return value
    return Plain(_unlinked(termsafe.clean(str(value))))


def _short(s: str, limit: int) -> str:
    return s if len(s) <= limit else s[: limit - 1] + "…"


# -- markdown pieces -------------------------------------------------------------
#
# JupyterLab does not hand ``text/markdown`` to a markdown parser as is: it
# first pulls math out of the *source* (``$…$``, ``$$…$$``, ``\\(…\\)``,
# ``\\[…\\]``, ``\begin{…}…\end{…}``), renders the rest with marked, puts the
# math back as ``@@N@@`` placeholders are replaced, and MathJax typesets the
# page. A pre-pass that does not know markdown can end a code span early
# and let raw HTML through, and MathJax typesets agent text. So the markdown
# we emit holds no ``$`` and no ``\`` from an agent at all (outside code they
# are character references, which every parser decodes to the same visible
# character; code that holds them is HTML we write, with references too), no
# ``@@N@@`` (a placeholder), and :func:`bundle` wraps it in an element MathJax
# skips (:data:`IGNORE_CLASS`).

#: Classes MathJax 3 (``tex2jax_ignore``) and MathJax 4 (``mathjax_ignore``) skip.
IGNORE_CLASS = "tex2jax_ignore mathjax_ignore"
#: The wrapper is also a style containment scope of its own. JupyterLab's panels are
#: ``contain: strict``: under such a scope far up, Chromium restyled a finished turn's 714
#: ``<summary>`` rows (each a list item) in 220 ms, the page frozen at the turn's end; in a
#: scope of their own, in 16 ms (benchmarks/long_turn_browser.py). It changes nothing else:
#: counters and quotes in the turn's HTML count within it.
_WRAP_OPEN = f'<div class="{IGNORE_CLASS}" style="contain: style">'
_WRAP_CLOSE = "</div>"

# Characters that can start or change inline markdown, JupyterLab's math
# (``$``, ``\``) or its ``@@N@@`` placeholders: written as character references.
_MD_SPECIAL = re.compile(r"[\\`*_\[\]<>!|~&$#@]")
_REFS = {c: f"&#{ord(c)};" for c in "\\`*_[]!|~$#@"}
_REFS.update({"&": "&amp;", "<": "&lt;", ">": "&gt;"})
# Block markers that matter only at the start of a line.
_MD_LEAD = re.compile(r"^(\s*)([+\-=]|\d+[.)])")


def _refs(s: str) -> str:
    """Markdown specials as character references (the same visible text)."""
    return _MD_SPECIAL.sub(lambda m: _REFS[m.group(0)] if m.group(0) != "@" or s.startswith("@", m.end()) else "@", s)


def _lead(s: str) -> str:
    """A line's leading block marker (``-``, ``+``, ``=``, ``1.``) as a reference."""
    lead = _MD_LEAD.match(s)
    if lead is None:
        return s
    mark = lead.group(2)
    return lead.group(1) + mark[:-1] + f"&#{ord(mark[-1])};" + s[lead.end():]


_PLACEHOLDER = re.compile(r"@@\d+@@")


def _mathy(s: str) -> bool:
    """What JupyterLab's math pre-pass takes (``$``, a backslash) or its
    placeholder pass replaces (``@@N@@``). Substring tests: a regex with
    alternatives costs milliseconds on a long turn."""
    return "$" in s or "\\" in s or ("@@" in s and _PLACEHOLDER.search(s) is not None)


def _needs_parse(s: str) -> bool:
    """Agent text that can hold HTML, a link, a backslash escape, a
    placeholder or a fence (which must be closed)."""
    return ("<" in s or "[" in s or "\\" in s or "```" in s or "~~~" in s
            or ("@@" in s and _PLACEHOLDER.search(s) is not None))


def text(value: Any, limit: int = INLINE_LIMIT) -> Markdown:
    """Agent text shown literally in markdown, on one line (a title, a name, a
    message): markdown characters become character references (never a
    backslash: see above), newlines become spaces, controls are shown as
    control pictures (:func:`visible_controls`)."""
    if isinstance(value, Markdown):
        return value
    return Markdown(_lead(_refs(_one_line(value, limit))))


def text_forms(value: Any, limit: int = INLINE_LIMIT) -> tuple[Markdown, Html]:
    """:func:`text` and the HTML :func:`inert_html` makes of it inside a line, written
    directly (a property test compares the two): every character it made a reference is
    itself again, escaped for HTML."""
    s = _one_line(value, limit)
    return Markdown(_lead(_refs(s))), Html(_html_text(s))


def _one_line(value: Any, limit: int) -> str:
    """What :func:`text` shows of ``value``: controls pictured, newlines as spaces, cut at ``limit``."""
    return _short(" ".join(visible_controls(str(value)).split("\n")), limit)


# In a code span a reference does not decode: code holding these is HTML.


_BACKTICKS = re.compile(r"`+")
_FENCES = re.compile(r"`{3,}")


def code(value: Any, limit: int = INLINE_LIMIT) -> Markdown:
    """Agent text (a path, an id, a command) as inline code: newlines shown
    as ``␊`` and other controls as control pictures, so it cannot end a line
    (a code span across a line break can let block syntax through). Text
    holding ``$``, ``\\``, ``|``, ``<``, ``>`` or ``@@N@@`` is a ``<code>``
    element we write, its text as character references: no raw ``<`` is
    left for a renderer that takes the opening backtick otherwise (marked's
    GFM autolink ``www.a.b`` does)."""
    return _code(_code_text(value, limit))


def code_forms(value: Any, limit: int = INLINE_LIMIT) -> tuple[Markdown, Html]:
    """:func:`code` and the HTML :func:`inert_html` makes of it, written directly (a
    property test compares the two): a tool call's body is made in both forms at once."""
    s = _code_text(value, limit)
    md = _code(s)
    if md[0] == "`":  # a code span: markdown-it's own rule for its padding (str.strip's whitespace)
        s = md.strip("`")
        if s[0] == " " and s[-1] == " " and s.strip():
            s = s[1:-1]
    return md, Html("<code>" + _html_text(s) + "</code>")


def _html_text(s: str) -> str:
    """Text as markdown-it writes it into HTML (``&``, ``<``, ``>`` and ``"``; not ``'``)."""
    if "&" in s:
        s = s.replace("&", "&amp;")
    if "<" in s:
        s = s.replace("<", "&lt;")
    if ">" in s:
        s = s.replace(">", "&gt;")
    if '"' in s:
        s = s.replace('"', "&quot;")
    return s


def _code_text(value: Any, limit: int) -> str:
    """What :func:`code` shows of ``value``: one line (newlines as ``␊``), cut at ``limit``."""
    return _short(visible_controls(str(value), keep_newlines=False), limit)


def _code(s: str) -> Markdown:
    if not s:
        return Markdown("` `")
    if "|" in s or "<" in s or ">" in s or _mathy(s):
        return Markdown("<code>" + _refs(s) + "</code>")
    longest = max((len(m) for m in _BACKTICKS.findall(s)), default=0) if "`" in s else 0
    fence = "`" * (longest + 1)
    pad = " " if s[0] in "` " or s[-1] in "` " else ""
    return Markdown(f"{fence}{pad}{s}{pad}{fence}")


_SAFE_INFO = re.compile(r"[^\w+.#-]")
_INFO: dict[str, str] = {}  # lang -> its info string, made once
_PRE_REFS = {"&": "&amp;", "<": "&lt;", ">": "&gt;", "$": "&#36;", "\\": "&#92;", "@": "&#64;"}
_PRE_SPECIAL = re.compile(r"[&<>$\\@]")


def block(value: Any, lang: str = "") -> Markdown:
    """Agent text verbatim in a fenced code block it cannot close (the fence
    is longer than any backtick run inside), starting on a line of its own.
    Text holding ``$``, ``\\`` or ``@@N@@`` is a ``<pre><code>`` HTML block we
    write instead (it ends only at ``</pre>``, so blank lines inside are
    fine), its text escaped and those characters as references."""
    return _block(value, lang)[0]


def block_forms(value: Any, lang: str = "") -> tuple[Markdown, Html, bool]:
    """:func:`block`, the HTML :func:`inert_html` makes of it in a document where more
    follows, written directly (a property test compares the two), and whether that
    HTML is our own HTML block (which ends the document without its last newline)."""
    md, body, info = _block(value, lang)
    if md[0] == "<":
        return md, Html(str(md) + "\n"), True
    cls = f' class="language-{info}"' if info else ""
    return md, Html(f"<pre><code{cls}>{_html_text(body)}</code></pre>\n"), False


def _block(value: Any, lang: str) -> tuple[Markdown, str, str]:
    """:func:`block` with its text and info string (for :func:`block_forms`)."""
    s = visible_controls(str(value))
    info = _INFO.get(lang)
    if info is None:
        info = _SAFE_INFO.sub("", lang)
        if len(_INFO) < 64:  # (our own few: "text", "sh", "console", "diff")
            _INFO[lang] = info
    body = s if s.endswith("\n") or not s else s + "\n"
    if _mathy(s):
        cls = f' class="language-{info}"' if info else ""
        refs = _PRE_SPECIAL.sub(lambda m: _PRE_REFS[m.group(0)] if m.group(0) != "@" or body.startswith("@", m.end()) else "@", body)
        return Markdown(f"<pre><code{cls}>{refs}</code></pre>"), body, info
    longest = max((len(m) for m in _FENCES.findall(s)), default=0) if "```" in s else 0
    fence = "`" * max(3, longest + 1)
    return Markdown(f"{fence}{info}\n{body}{fence}"), body, info


def html(value: Any) -> Html:
    """Agent text for an HTML context: everything escaped, quotes too."""
    if isinstance(value, Html):
        return value
    if type(value) is str and value.isprintable():  # no control, format or separator character: nothing to clean
        return Html(_html.escape(value, quote=True))
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
    """mdformat renderers for agent markdown: nothing live, and no ``$``,
    ``\\`` or ``@@`` in what they write (see "markdown pieces")."""

    @staticmethod
    def text(node: Any, context: Any) -> str:
        s = _refs(re.sub(" {2,}", " ", node.content.replace("\t", " ")))
        return s.replace("\n\n", "&#10;&#10;")

    @staticmethod
    def code_inline(node: Any, context: Any) -> str:
        return str(code(node.content, limit=1 << 62))

    @staticmethod
    def fence(node: Any, context: Any) -> str:
        info = (node.info or "").strip().split(" ", 1)[0] if node.info else ""
        return str(block(node.content, info))

    @staticmethod
    def code_block(node: Any, context: Any) -> str:
        return str(block(node.content))

    @staticmethod
    def hardbreak(node: Any, context: Any) -> str:
        return "<br />\n"

    @staticmethod
    def html_block(node: Any, context: Any) -> str:
        return str(block(node.content.rstrip("\n"), "html"))

    @staticmethod
    def html_inline(node: Any, context: Any) -> str:
        return _refs(node.content)

    @staticmethod
    def link(node: Any, context: Any) -> str:
        inner = "".join(child.render(context) for child in node.children)
        href = str(node.attrs.get("href", ""))
        if not safe_url(href):
            return inner
        return f"[{inner}]({_url_escape(href)})"

    @staticmethod
    def image(node: Any, context: Any) -> str:
        # Nothing loads without a click: an image becomes a link to it, naming its host.
        alt = text("".join(c.content for c in node.children if getattr(c, "content", "")) or "image")
        src = str(node.attrs.get("src", ""))
        host = image_host(src)
        if not safe_url(src) or not host or REMOTE_IMAGES == "drop":
            return f"🖼 {alt} " + ("(inline image)" if is_data_image(src) else "(image not shown)")
        return f"[🖼 {alt} (image from {text(host)})]({_url_escape(src)})"


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
    """A bare link destination (never ``<...>``: marked does not read one after
    a hard break in a list item, and its ``<`` is then raw HTML): no ``<``,
    ``>``, brackets, parentheses, backticks, spaces, ``\\``, ``$`` or ``@@``
    (percent-escaped); ``&`` as a reference (it decodes back)."""
    url = re.sub(r"[<>\s\\$()\[\]`]|@(?=@)", lambda m: "%{:02X}".format(ord(m.group(0))), url)
    return url.replace("&", "&amp;")


class _Plugin:
    """An mdformat parser extension carrying our renderers."""

    RENDERERS = {name: fn for name, fn in vars(_Renderers).items() if isinstance(fn, staticmethod)}
    POSTPROCESSORS: dict[str, Any] = {}

    @staticmethod
    def update_mdit(mdit: Any) -> None:
        pass


_Plugin.RENDERERS = {name: getattr(_Renderers, name) for name in _Plugin.RENDERERS}

_local = threading.local()


def _parsers() -> tuple[Any, Any]:
    """(writer, checker), built once per thread (markdown-it is not shared)."""
    pair = getattr(_local, "pair", None)
    if pair is None:
        from markdown_it import MarkdownIt
        from mdformat.renderer import MDRenderer
        import mdformat_tables

        from .mdfast import speed_up  # lazy: start-up time (it imports markdown-it)

        writer = MarkdownIt(renderer_cls=MDRenderer)  # type: ignore[arg-type]  # mdformat's renderer: a class, as mdformat passes it
        writer.options["mdformat"] = {}
        writer.options["store_labels"] = False
        writer.options["codeformatters"] = {}
        writer.options["parser_extension"] = [mdformat_tables.plugin, _Plugin]
        mdformat_tables.plugin.update_mdit(writer)
        checker = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
        checker.validateLink = lambda url: True  # type: ignore[method-assign]  # markdown-it's way: see every link, judge it ourselves
        pair = _local.pair = (speed_up(writer), speed_up(checker))
    return pair


#: The only tags our markdown holds: our templates' and the ones this module writes.
OWN_TAGS = frozenset({
    "<code>", "</code>", "<pre>", "</pre>", "<br />", "<sub>", "</sub>", "<details>", "</details>",
    "<summary>", "</summary>", _WRAP_OPEN, _WRAP_CLOSE,
})
_OWN_TAG = re.compile(r'<code class="language-[\w+.#-]*">\Z')
_TAG = re.compile(r"<[^<>]*>")
# What JupyterLab's math pre-pass and its placeholders look for.


def _foreign_html(content: str) -> str | None:
    """The first piece of ``content`` (an HTML token) that is not ours."""
    at = 0
    for m in _TAG.finditer(content):
        if "<" in content[at:m.start()] or ">" in content[at:m.start()]:
            return content[at:m.start()]
        tag = m.group(0)
        if tag not in OWN_TAGS and not _OWN_TAG.match(tag):
            return tag
        at = m.end()
    rest = content[at:]
    return rest if "<" in rest or ">" in rest else None


def problems(md: str) -> list[str]:
    """What would be live in ``md`` when rendered as CommonMark with raw HTML
    on (as JupyterLab renders trusted output): HTML other than our own tags,
    unsafe links, images; and what JupyterLab's math pre-pass would take
    (``$``, ``\\``) or replace (``@@``)."""
    _, checker = _parsers()
    found: list[str] = []
    if _mathy(md):
        found.append("math for JupyterLab's pre-pass ($, a backslash or @@N@@)")
    stack = list(checker.parse(md))
    while stack:
        tok = stack.pop()
        if tok.children:
            stack.extend(tok.children)
        if tok.type in ("html_block", "html_inline"):
            bad = _foreign_html(tok.content)
            if bad is not None:
                found.append(f"raw HTML {bad[:40]!r}")
        elif tok.type == "image":
            found.append(f"image {tok.attrGet('src')!r}")
        elif tok.type == "link_open" and not safe_url(str(tok.attrGet("href") or "")):
            found.append(f"link {tok.attrGet('href')!r}")
    return found


def _code_like(s: str) -> bool:
    """Where a character reference would not decode: a code span, indented code
    (four spaces anywhere: code in a list item or a quote starts after its marker)."""
    return "`" in s or "\t" in s or "    " in s


def _unparsed(s: str) -> str | None:
    """:func:`markdown` of cleaned text that needs no parse (not :func:`_needs_parse`): the
    text, its ``$`` as references when no code could hold one; None when code could."""
    if "$" not in s:
        return s
    if _code_like(s):
        return None
    return s.replace("$", "&#36;")  # prose with "$": a reference decodes to the same "$" everywhere


# Prose with links and angle brackets (an agent's "see [the docs](https://...)",
# "a <b>"): written without a parse when every "](" opens a destination of URL
# characters a safe link may hold, closed at once by ")" (the only way any
# renderer makes a link of it once "]:" definitions and "![" images are refused),
# and no "<" could start an HTML block or an autolink. Then each "<" written as
# "&lt;" decodes to the same "<" as text in every renderer (no code could hold
# it), so the text reads as CommonMark reads it with raw HTML off, and the links
# are the ones the parse keeps (a property test checks both on generated text).
_LINK_DEST = re.compile(r"\]\(([A-Za-z0-9\-._~:/?#=%+,;@]*)\)")
_LINE_START_TAG = re.compile(r"(?m)^[ \t>*+\-0-9.)]*<")
_AUTOLINK = re.compile(r"<(?:[A-Za-z][A-Za-z0-9+.\-]*:|[^<>\s]*@)")  # "<scheme:...>", "<a@b.c>": the parse's link


def _linked_prose(s: str) -> str | None:
    """:func:`markdown` of text whose only markdown to check is plain safe
    links and ``<``, without a parse; None for anything else."""
    if ("\\" in s or "```" in s or "~~~" in s or "]:" in s or "![" in s
            or ("@@" in s and _PLACEHOLDER.search(s) is not None)):
        return None
    angle, dollar = "<" in s, "$" in s
    if (angle or dollar) and _code_like(s):  # in code, a reference shows as written
        return None
    if angle and (_LINE_START_TAG.search(s) is not None  # an HTML block: the parse shows it as code
                  or _AUTOLINK.search(s) is not None):
        return None
    at = s.find("](")
    while at >= 0:
        m = _LINK_DEST.match(s, at)
        if m is None or not safe_url(m.group(1)):
            return None
        at = s.find("](", m.end())
    if angle:
        s = s.replace("<", "&lt;")
    return s.replace("$", "&#36;") if dollar else s


# mdformat's own escapes (a line start that would be a list, a heading...).
_MD_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")


def markdown(value: Any) -> Markdown:
    """Agent markdown, still markdown, with nothing live: raw HTML shown as
    text, links only to http(s)/mailto/relative targets, images as links,
    no ``$``, ``\\`` or ``@@`` (character references or our code HTML).

    Text that needs none of that (no ``<``, ``[``, ``\\``, ``@@N@@`` or
    fence) is returned as is, its ``$`` as references when no code could
    hold one (the common case, and the fast one); so is prose whose only
    links are plain safe ones, its ``<`` as references (:func:`_linked_prose`).
    The result for text up to 16 KiB that needs a parse is cached (the last 128)."""
    if isinstance(value, Markdown):
        return value
    s = visible_controls(str(value))
    done = _unparsed(s) if not _needs_parse(s) else _linked_prose(s)
    if done is not None:
        return Markdown(done)
    if len(s) > _CACHED_CHARS:
        return Markdown(_parsed(s, REMOTE_IMAGES))
    return Markdown(_parsed_cached(s, REMOTE_IMAGES))


#: Longest text whose :func:`markdown` is cached (a view's block or tail is 4,000 characters at most).
_CACHED_CHARS = 16_384


def _parsed(s: str, images: str) -> str:
    """:func:`markdown` of text that needs a parse: written back, checked, or a code block.
    ``images`` is :data:`REMOTE_IMAGES` (part of the cache's key)."""
    writer, _ = _parsers()
    try:
        out = writer.render(s)
    except (RecursionError, ValueError, AssertionError, IndexError, KeyError):  # a parser corner
        return str(block(s))
    out = _MD_ESCAPE.sub(lambda m: f"&#{ord(m.group(1))};", out)
    if problems(out):
        return str(block(s))
    # mdformat ends with one newline; the stream's pieces are joined by us.
    return out[:-1] if out.endswith("\n") and not s.endswith("\n") else out


# A view renders a block again when it completes (its last tail was the same
# text) and a transcript renders what a view did: the same text, the same result.
_parsed_cached = functools.lru_cache(maxsize=128)(_parsed)


_html_local = threading.local()


def _link_open(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
    href = str(tokens[idx].attrGet("href") or "")
    if not safe_url(href):
        return "<a>"
    return '<a href="{}" target="_blank" rel="noopener noreferrer nofollow">'.format(_html.escape(href, quote=True))


def _image(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
    tok = tokens[idx]
    alt = self.renderInlineAsText(tok.children or [], options, env) or "image"
    return str(image_placeholder(str(tok.attrGet("src") or ""), alt))


def _html_renderers() -> tuple[Any, Any]:
    """(agent, ours): markdown-it with raw HTML off (it escapes any) for agent
    markdown, on for our own inert markdown; our link and image rules."""
    pair = getattr(_html_local, "pair", None)
    if pair is None:
        from markdown_it import MarkdownIt

        from .mdfast import speed_up  # lazy: start-up time (it imports markdown-it)

        made = []
        for raw in (False, True):
            md = MarkdownIt("commonmark", {"html": raw}).enable(["table", "strikethrough"])
            md.validateLink = lambda url: safe_url(url) or is_data_image(url)  # type: ignore[method-assign]  # markdown-it's way
            md.add_render_rule("link_open", _link_open)
            md.add_render_rule("image", _image)
            made.append(speed_up(md))
        pair = _html_local.pair = (made[0], made[1])
    return pair


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


def ignored(fragment: Html) -> Html:
    """HTML inside an element MathJax does not typeset (:data:`IGNORE_CLASS`)."""
    if fragment.startswith(_WRAP_OPEN):
        return fragment
    return Html("".join((_WRAP_OPEN, fragment, _WRAP_CLOSE)))  # (one copy of a long turn's HTML, not three)


# Plain prose: nothing inline markdown reads (no emphasis, code, link, image,
# reference, HTML, escape, table or strikethrough character) and no line that
# could start or end a block (a list or heading marker, a quote, a fence, an
# indented line, trailing spaces that make a hard break). CommonMark makes
# paragraphs of it, and nothing else: :func:`_prose_html` writes them as
# markdown-it does, a hundred times faster (a property test compares the two
# on every kind of line; anything else goes to markdown-it).
_INLINE_SPECIALS = "\\`*_[]<>!|~&#\t"
_BLOCK_START = re.compile(r"\n {0,3}(?:[-+=> ]|\d{1,9}[.)])")  # after a newline: a marker or an indent


def _prose_html(s: str) -> str | None:
    """markdown-it's HTML of ``s`` when it is plain prose, else None. Substring
    tests first: a regex with a character class costs 8x more per KB."""
    if any(c in s for c in _INLINE_SPECIALS) or " \n" in s or _BLOCK_START.search("\n" + s) is not None:
        return None
    out = []
    for para in re.split(r"\n(?: *\n)+", s):
        if para.strip(" \n"):  # markdown-it: lines' spaces go, then the paragraph's whitespace
            body = "\n".join(line.lstrip(" ") for line in para.split("\n")).strip()
            out.append("<p>" + body.replace('"', "&quot;") + "</p>\n")
    return "".join(out)


def markdown_html(value: Any) -> Html:
    """Agent markdown as HTML for the turn widget: raw HTML escaped, links only
    to safe targets (opening a new tab), images as click-to-load placeholders,
    inside an element MathJax skips."""
    if isinstance(value, Html):
        return ignored(value)
    s = visible_controls(str(value))
    prose = _prose_html(s)
    if prose is not None:
        return ignored(Html(prose))
    try:
        return ignored(Html(_html_renderers()[0].render(s)))
    except (RecursionError, ValueError, AssertionError, IndexError, KeyError):  # a parser corner
        return ignored(Html("<pre>{}</pre>").format(s))


def prose_forms(value: Any) -> tuple[Markdown, Html, Plain] | None:
    """Agent text that is plain prose in the three forms a finished block of it takes,
    from one cleaning and one render: :func:`markdown` of it, its HTML (for prose the
    agent renderer, :func:`markdown_html`, and ours, :func:`inert_html_inner` of that
    markdown, write the same: :func:`_prose_html`), unwrapped, and :func:`plain` of it.
    None for anything else (a test compares each form with its function's)."""
    s = visible_controls(str(value))
    if _needs_parse(s):
        return None
    prose = _prose_html(s)
    if prose is None:
        return None
    md = _unparsed(s)
    if md is None:  # "$" beside four spaces inside a line: markdown parses it
        return None
    return Markdown(md), Html(prose), Plain(_unlinked(s))


@functools.lru_cache(maxsize=512)
def _inert_html(md: str) -> str:
    # Our markdown of plain prose is the prose, its "$" as a reference (which
    # decodes to "$"): the fast path when nothing else is there.
    prose = _prose_html(md.replace("&#36;", "$"))
    if prose is not None:
        return prose
    try:
        return _html_renderers()[1].render(md)
    except (RecursionError, ValueError, AssertionError, IndexError, KeyError):  # a parser corner
        return "<pre>" + _html.escape(md) + "</pre>"


def inert_html(md: Markdown) -> Html:
    """Our markdown (every agent string in it escaped here) as ``text/html``:
    its only raw HTML is our own, links open a new tab; inside an element
    MathJax skips. Cached: a turn's fallback re-renders unchanged blocks."""
    if not isinstance(md, Markdown):
        raise UnsafeOutput("inert_html takes markdown made by acp_kernel.safe")
    inner = str(md)
    if inner.startswith(_WRAP_OPEN):
        return Html(_inert_html(inner))
    return Html(_WRAP_OPEN + _inert_html(inner) + _WRAP_CLOSE)


def inert_html_inner(md: Markdown) -> Html:
    """:func:`inert_html` without the wrapper, for joining cached pieces
    (then :func:`ignored` the whole)."""
    if not isinstance(md, Markdown):
        raise UnsafeOutput("inert_html takes markdown made by acp_kernel.safe")
    return Html(_inert_html(str(md)))


def wrapped(md: Markdown) -> Markdown:
    """Our markdown inside an element MathJax skips: the ``div`` is an HTML
    block of its own line, blank lines keep the markdown between markdown."""
    if md.startswith(_WRAP_OPEN):
        return md
    return Markdown(f"{_WRAP_OPEN}\n\n{md}\n\n{_WRAP_CLOSE}")


def wrapped_join(parts: Iterable[Any]) -> Markdown:
    """:func:`wrapped` of the parts joined by blank lines (``Markdown.join``), in one join: a long turn's
    markdown is copied twice, not four times (each copy of a few hundred KB is a fresh
    allocation the machine must map)."""
    items = [p if isinstance(p, Markdown) else text(p) for p in parts]
    if not items or items[0].startswith(_WRAP_OPEN):  # (wrapped as it is: as wrapped() does)
        return wrapped(Markdown("\n\n".join(items)))  # (each item ours now: joined as text)
    return Markdown("\n\n".join([_WRAP_OPEN, *items, _WRAP_CLOSE]))


def ignored_join(parts: Iterable[Any]) -> Html:
    """:func:`ignored` of the parts joined by newlines (``Html.join``), in one join (as
    :func:`wrapped_join`)."""
    items = [p if isinstance(p, Html) else Html._escape(p) for p in parts]
    if not items or items[0].startswith(_WRAP_OPEN):
        return ignored(Html("\n".join(items)))
    if len(items) == 1:
        return Html(f"{_WRAP_OPEN}{items[0]}{_WRAP_CLOSE}")
    # (the short ends made longer, not the whole; f-strings: Html's + would escape the str)
    items[0], items[-1] = f"{_WRAP_OPEN}{items[0]}", f"{items[-1]}{_WRAP_CLOSE}"
    return Html("\n".join(items))


def unwrapped(md: str) -> str:
    """The markdown inside :func:`wrapped` (what a reader of the source
    sees; tests compare it); anything else as it is."""
    head, tail = _WRAP_OPEN + "\n\n", "\n\n" + _WRAP_CLOSE
    if md.startswith(head) and md.endswith(tail):
        inner = md[len(head):len(md) - len(tail)]
        return Markdown(inner) if isinstance(md, Markdown) else inner
    return md


def source_plain(md: Markdown) -> Plain:
    """Our markdown source as ``text/plain`` (callers with a better text pass
    their own: :mod:`acp_kernel.view.plaintext` renders it): our tags dropped,
    character references decoded, so ``$`` reads ``$`` and not ``&#36;``."""
    return plain(_html.unescape(_TAG.sub("", str(md))))  # a reference can spell a control


# -- display data ------------------------------------------------------------------

_CHECKED = {"text/markdown": Markdown, "text/html": Html, "text/plain": Plain}


def bundle(md: Markdown | None = None, plain_text: Any = None, html_text: Html | None = None,
           extra: Mapping[str, Any] | None = None, *, derive: bool = True) -> dict[str, Any]:
    """A display's data, checked. The markdown is :func:`wrapped`; unless
    ``derive`` is false, ``text/html`` (which JupyterLab, nbconvert and VS
    Code prefer) defaults to :func:`inert_html` of it and ``plain_text``
    (agent text is made :class:`Plain`) to :func:`source_plain`; ``extra``
    holds other mime types (a widget view)."""
    data: dict[str, Any] = dict(extra or {})
    if md is not None:
        if not isinstance(md, Markdown):
            raise UnsafeOutput(f"text/markdown output was not made by acp_kernel.safe ({type(md).__name__})")
        data["text/markdown"] = wrapped(md)
        if html_text is None and derive:
            html_text = inert_html(md)
        if plain_text is None and derive:
            plain_text = source_plain(md)
    if html_text is not None:
        if not isinstance(html_text, Html):
            raise UnsafeOutput(f"text/html output was not made by acp_kernel.safe ({type(html_text).__name__})")
        data["text/html"] = ignored(html_text)
    if plain_text is not None:
        data["text/plain"] = plain(plain_text)
    check_data(data)
    return data


def check_data(data: Mapping[str, Any]) -> None:
    """What every sink calls: text outputs must come from this module, and
    markdown and HTML must be inside the element MathJax skips, the markdown
    with nothing JupyterLab's math pre-pass takes (``$``, ``\\``, ``@@``)."""
    for mime, kind in _CHECKED.items():
        value = data.get(mime)
        if value is not None and not isinstance(value, kind):
            raise UnsafeOutput(f"{mime} output was not made by acp_kernel.safe ({type(value).__name__})")
    md = data.get("text/markdown")
    if md is not None:
        if not md.startswith(_WRAP_OPEN):
            raise UnsafeOutput("text/markdown output is not inside the math-ignoring element (use safe.bundle)")
        if _mathy(md):
            raise UnsafeOutput("text/markdown output holds $, a backslash or @@N@@, which JupyterLab's math pre-pass takes")
    html_value = data.get("text/html")
    if html_value is not None and not html_value.startswith(_WRAP_OPEN):
        raise UnsafeOutput("text/html output is not inside the math-ignoring element (use safe.bundle)")
