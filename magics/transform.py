"""Rewrite ``%acp`` / ``%%acp`` / ``%%shell`` into top-level ``await`` calls.

A plain cell magic is a blocking function: it cannot await the agent, and
while it blocks the kernel can handle no widget click. IPython runs cells
with a top-level ``await`` as coroutines on the kernel's event loop, and
ipykernel (>= 7.4) keeps handling comm messages while such a cell awaits. So
the extension turns these magics into awaits before IPython sees them.

Pure string work; the runtime lives in :mod:`magics.runtime`.
"""

from __future__ import annotations

RUNTIME = "__import__('magics.runtime', fromlist=['_']).runtime()"


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
    for line in lines:
        stripped = line.rstrip("\n")
        if stripped == "%acp" or stripped.startswith("%acp "):
            newline = "\n" if line.endswith("\n") else ""
            out.append(f"await {RUNTIME}.line({stripped[4:].strip()!r}){newline}")
        else:
            out.append(line)
    return out
