"""Make agent text inert before it is shown as markdown or HTML.

Outputs a notebook produced itself are *trusted*: JupyterLab renders their
raw HTML unsanitized. Agent text is not ours, so raw HTML in it must show as
text: outside code spans and fenced code blocks ``<`` and ``&`` are escaped
(inside them the renderer already shows text), and link targets with
``javascript:``/``vbscript:``/``data:`` schemes are broken with a zero-width
space so no browser runs them.

When unsure whether something is code, this module escapes: the cost is a
visible ``&lt;`` in an odd corner (indented code, fences inside quotes), never
live HTML. Pure functions.
"""

from __future__ import annotations

import html
import re

_FENCE_OPEN = re.compile(r"^( {0,3})(`{3,}|~{3,})(.*)$")
_BACKTICKS = re.compile(r"`+")
_SPECIAL = re.compile(r"(\\*)([<&])")
# A scheme that runs code, followed by a non-space (prose "data: 5 rows" stays).
_BAD_SCHEME = re.compile(r"(?i)(?<![A-Za-z0-9+.\-])(javascript|vbscript|data)(\\?:)(?=\S)")
_SAFE_INFO = re.compile(r"[^\w+.#-]")
ZWSP_ENTITY = "&#8203;"
# Text without any of these is returned as is: escaping needs "<" or "&",
# a bad scheme ":", a fence or code span "`" or "~".
_NEEDS_CARE = re.compile(r"[<&:`~]")


def escape_html(text: str) -> str:
    """For HTML contexts: everything escaped, quotes included."""
    return html.escape(text, quote=True)


def _escape_plain(text: str) -> str:
    """Escape ``<``/``&`` (unless already backslash-escaped) and break bad schemes."""

    def esc(m: re.Match[str]) -> str:
        slashes, ch = m.group(1), m.group(2)
        if len(slashes) % 2:
            return m.group(0)  # "\<" is already literal in markdown
        return slashes + ("&lt;" if ch == "<" else "&amp;")

    if "<" in text or "&" in text:
        text = _SPECIAL.sub(esc, text)
    if ":" in text:
        text = _BAD_SCHEME.sub(lambda m: m.group(1) + ZWSP_ENTITY + m.group(2), text)
    return text


def _escape_line(line: str) -> str:
    """One line outside fences: code spans verbatim, the rest escaped."""
    if "`" not in line:
        return _escape_plain(line)
    out: list[str] = []
    pos = 0  # start of text not yet emitted
    scan = 0
    while True:
        m = _BACKTICKS.search(line, scan)
        if m is None:
            break
        start, end = m.span()
        # A backtick run after an odd number of backslashes starts with a literal backtick.
        slashes = len(line[:start]) - len(line[:start].rstrip("\\"))
        if slashes % 2:
            start += 1
            if start == end:
                scan = end
                continue
        run = end - start
        close = None
        for c in _BACKTICKS.finditer(line, end):
            if c.end() - c.start() == run:
                close = c
                break
        if close is None:
            scan = end  # no closing run on this line: the backticks are literal
            continue
        out.append(_escape_plain(line[pos:start]))
        out.append(line[start : close.end()])
        pos = scan = close.end()
    out.append(_escape_plain(line[pos:]))
    return "".join(out)


def sanitize_markdown(text: str) -> str:
    """Agent markdown with raw HTML made inert and bad link schemes broken."""
    if _NEEDS_CARE.search(text) is None:
        return text  # every change below needs one of these characters
    out: list[str] = []
    fence: str | None = None
    indent = 0
    for line in text.split("\n"):
        if fence is not None:
            lead = len(line) - len(line.lstrip(" "))
            body = line.strip()
            if body and body == fence[0] * len(body) and len(body) >= len(fence) and lead <= 3:
                fence = None
                out.append(line)
                continue
            if not body or lead >= indent:
                out.append(line)
                continue
            # Less indented than the opener: the container (list item) may have
            # ended and the fence with it. Treat as outside, to be safe.
            fence = None
        m = _FENCE_OPEN.match(line)
        if m is not None and not (m.group(2)[0] == "`" and "`" in m.group(3)):
            fence, indent = m.group(2), len(m.group(1))
            info = m.group(3).strip().split(" ")[0] if m.group(3).strip() else ""
            out.append(m.group(1) + fence + _SAFE_INFO.sub("", info))
            continue
        out.append(_escape_line(line))
    return "\n".join(out)


def inline(text: str) -> str:
    """A one-line piece of agent text (a title, a plan entry) for markdown."""
    return sanitize_markdown(" ".join(str(text).split("\n")).strip())


def fenced(text: str, lang: str = "") -> str:
    """``text`` verbatim in a fenced code block whose fence it cannot close."""
    longest = max((len(m.group(0)) for m in _BACKTICKS.finditer(text)), default=0)
    fence = "`" * max(3, longest + 1)
    body = text if text.endswith("\n") or not text else text + "\n"
    return f"{fence}{_SAFE_INFO.sub('', lang)}\n{body}{fence}"


def truncate_head(text: str, limit: int) -> tuple[str, bool]:
    """The last ``limit`` characters (terminal output: the end matters)."""
    if len(text) <= limit:
        return text, False
    cut = text[-limit:]
    nl = cut.find("\n")
    if 0 <= nl < 200:
        cut = cut[nl + 1 :]
    return cut, True


def truncate_tail(text: str, limit: int) -> tuple[str, bool]:
    """The first ``limit`` characters (content, JSON: the start matters)."""
    if len(text) <= limit:
        return text, False
    return text[:limit], True
