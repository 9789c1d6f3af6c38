"""The plain-text form of our own markdown messages, for terminal frontends.

A kernel message (``%status``, ``%help``, an error) is a markdown template
with agent strings escaped in it (:func:`acp_kernel.safe.text` /
:func:`~acp_kernel.safe.code`). Its markdown *source* is a poor ``text/plain``:
``jupyter console`` and terminal IPython print it with the escapes
(``a \\& b``, ``\\_``) and the ``**`` / backticks. This renders the markdown
instead: the text as a reader sees it (escapes resolved, emphasis and code
markers dropped, list bullets kept, tables as aligned columns, fenced blocks
verbatim). The result still goes through :func:`acp_kernel.safe.plain`
(controls neutralised) in :func:`~acp_kernel.safe.bundle`. Pure.
"""

from __future__ import annotations

import html
import re
import threading
from typing import Any
from ..safe import bundle

# Our markdown's only HTML is our own (agent text in it is escaped): its tags
# are markup, dropped from the text; a ``<br />`` is a line break.
_TAG = re.compile(r"<[^<>]*>")

_local = threading.local()


def _parser() -> Any:
    md = getattr(_local, "md", None)
    if md is None:
        from markdown_it import MarkdownIt

        md = _local.md = MarkdownIt("commonmark").enable(["table", "strikethrough"])
    return md


def _inline(children: list[Any]) -> str:
    out: list[str] = []
    href: list[str] = []
    start: list[int] = []
    for tok in children or []:
        kind = tok.type
        if kind in ("text", "code_inline"):
            out.append(tok.content)
        elif kind == "html_inline":
            out.append("\n" if tok.content.startswith("<br") else "")
        elif kind in ("softbreak", "hardbreak"):
            out.append("\n")
        elif kind == "image":
            out.append(tok.content or "image")
        elif kind == "link_open":
            href.append(str(tok.attrGet("href") or ""))
            start.append(len(out))
        elif kind == "link_close" and href:
            url, at = href.pop(), start.pop()
            label = "".join(out[at:])
            if url and url != label and url != "mailto:" + label:
                out.append(f" <{url}>")
    return "".join(out)


def _table(rows: list[list[str]]) -> list[str]:
    width = max((len(r) for r in rows), default=0)
    sizes = [max((len(r[i]) for r in rows if i < len(r)), default=0) for i in range(width)]
    return ["  ".join(cell.ljust(sizes[i]) for i, cell in enumerate(r)).rstrip() for r in rows]


def markdown_plain(md: str) -> str:
    """``md`` (CommonMark with tables) as the text a reader sees."""
    lines: list[str] = []
    lists: list[list[Any]] = []  # [ordered, next number]
    bullet: str | None = None  # the marker for the next line of a list item
    rows: list[list[str]] | None = None
    gap = False

    def emit(body: str) -> None:
        nonlocal bullet, gap
        if gap and lines:
            lines.append("")
        gap = False
        indent = "  " * max(len(lists) - 1, 0)
        first = indent + (bullet if bullet is not None else ("  " if lists else ""))
        rest = " " * len(first)
        for i, piece in enumerate(body.split("\n")):
            lines.append(((first if i == 0 else rest) + piece).rstrip())
        bullet = None

    for tok in _parser().parse(str(md)):
        kind = tok.type
        if kind in ("bullet_list_open", "ordered_list_open"):
            start = tok.attrGet("start")
            lists.append([kind == "ordered_list_open", int(start) if start else 1])
        elif kind in ("bullet_list_close", "ordered_list_close"):
            lists.pop()
            gap = not lists
        elif kind == "list_item_open" and lists:
            ordered, n = lists[-1]
            bullet = f"{n}. " if ordered else "- "
            lists[-1][1] = n + 1
        elif kind == "table_open":
            rows = []
        elif kind == "tr_open" and rows is not None:
            rows.append([])
        elif kind == "inline":
            body = _inline(tok.children)
            if rows is not None and rows:
                rows[-1].append(body.replace("\n", " "))
            else:
                emit(body)
        elif kind == "table_close" and rows is not None:
            table, rows = rows, None
            emit("\n".join(_table(table)))
            gap = True
        elif kind in ("fence", "code_block"):
            emit(tok.content.rstrip("\n"))
            gap = not lists
        elif kind in ("paragraph_close", "heading_close") and not lists:
            gap = True
        elif kind == "html_block":
            body = html.unescape(_TAG.sub("", tok.content)).rstrip("\n")
            if body.strip():
                emit(body)
                gap = not lists
        elif kind == "hr":
            emit("---")
            gap = True
    return "\n".join(lines)


def message(md: Any, plain_text: Any = None) -> dict[str, Any]:
    """A kernel message's display data: ``md`` (our markdown) and its
    rendered text as ``text/plain`` (or ``plain_text`` when given)."""
    return bundle(md, markdown_plain(md) if plain_text is None and md is not None else plain_text)
