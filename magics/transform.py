"""Rewrite ``%acp`` / ``%%acp`` / ``%%shell`` into ``await`` calls where Python allows one.

A plain cell magic is a blocking function: it cannot await the agent, and
while it blocks the kernel can handle no widget click. IPython runs cells
with a top-level ``await`` as coroutines on the kernel's event loop, and
ipykernel (>= 7.4) keeps handling comm messages while such a cell awaits. So
the extension turns these magics into awaits before IPython sees them: at the
top level, inside ``for`` / ``if`` / ``while`` / ``with`` / ``try`` blocks
(IPython allows a top-level ``await`` there) and inside ``async def``. Inside
a plain ``def``, a ``class`` body or a ``lambda`` an ``await`` is a syntax
error: the line is left to IPython, which calls the registered ``%acp``
magic (see :func:`magics.run_sync`).

``{name}`` and ``$name`` in a line are expanded as IPython expands them in
any line magic (with the names where the line stands: ``locals()``).

Pure string work; the runtime lives in :mod:`acp_kernel.magics.runtime`.
"""

from __future__ import annotations

import re

RUNTIME = "__import__('acp_kernel.magics.runtime', fromlist=['_']).runtime()"

_OPENER = re.compile(r"(async\s+def|def|class)\b")


def transform_cell(lines: list[str]) -> list[str]:
    """An IPython ``input_transformers_cleanup`` hook (list of lines in and out)."""
    if not lines:
        return lines
    first = lines[0].rstrip("\n")
    for magic, method in (("%%acp", "cell"), ("%%shell", "shell")):
        if first == magic or first.startswith(magic + " "):
            args = first[len(magic):].strip()
            body = "".join(lines[1:])
            return [f"await {RUNTIME}.{method}({args!r}, {body!r})\n"]
    out = []
    blocks: list[tuple[int, str]] = []  # (indent, "async def" | "def" | "class" | "block") enclosing this line
    for line in lines:
        stripped = line.rstrip("\n")
        content = stripped.lstrip()
        indent = len(stripped) - len(content)
        if content and not content.startswith("#"):
            while blocks and indent <= blocks[-1][0]:
                blocks.pop()
        if content == "%acp" or content.startswith("%acp "):
            if _await_allowed(blocks):
                newline = "\n" if line.endswith("\n") else ""
                out.append(f"{stripped[:indent]}await {RUNTIME}.line({content[4:].strip()!r}, locals()){newline}")
            else:
                out.append(line)
            continue
        out.append(line)
        if content.rstrip().endswith(":") and not content.startswith("#"):
            opener = _OPENER.match(content)
            kind = re.sub(r"\s+", " ", opener.group(1)) if opener else "block"
            blocks.append((indent, kind))
    return out


def _await_allowed(blocks: list[tuple[int, str]]) -> bool:
    """At the top level (any blocks) or inside ``async def``; not in ``def`` or ``class``."""
    for _, kind in reversed(blocks):
        if kind != "block":
            return kind == "async def"
    return True
