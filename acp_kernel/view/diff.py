"""Diff content (``{type: "diff", path, oldText?, newText}``) as a unified diff.

Computed once per change of a tool call's content (difflib), as typed lines
the widget colours (``+``, ``-``, hunk ``@``, header ``h``, context `` ``),
and as a fenced ``diff`` block for markdown readers. Big diffs are cut at
``max_lines`` so one tool call cannot flood the notebook. Pure.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Any

from ..safe import Markdown, block

MAX_LINES = 2000


@dataclass
class DiffView:
    path: str
    lines: list[tuple[str, str]] = field(default_factory=list)  # (op, text)
    added: int = 0
    removed: int = 0
    truncated: bool = False
    new_file: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "lines": [[op, text] for op, text in self.lines],
            "added": self.added,
            "removed": self.removed,
            "truncated": self.truncated,
            "newFile": self.new_file,
        }

    def text(self) -> str:
        """The unified diff as text (headers, hunks, +/- lines)."""
        out = [text for _, text in self.lines]
        if self.truncated:
            out.append(f"... diff cut at {len(self.lines)} lines")
        return "\n".join(out)

    def markdown(self) -> Markdown:
        return block(self.text(), "diff")

    @property
    def stats(self) -> str:
        """E.g. "(edit, +3 -1)": what the summary says after the path."""
        what = "new file" if self.new_file else "edit"
        return f"({what}, +{self.added} -{self.removed})"

    @property
    def summary(self) -> str:
        return f"{self.path} {self.stats}"


def render_diff(path: str, old: str | None, new: str, *, max_lines: int = MAX_LINES) -> DiffView:
    """The unified diff of ``old`` -> ``new`` (``old`` None: a new file)."""
    view = DiffView(path or "?", new_file=old is None)
    old_lines = (old or "").splitlines()
    new_lines = (new or "").splitlines()
    # git's a/ b/ prefixes read badly on absolute paths ("a//tmp/x"): name the file as given.
    fromfile = "/dev/null" if old is None else path
    for line in difflib.unified_diff(old_lines, new_lines, fromfile, path, lineterm="", n=3):
        if line.startswith("---") and not view.lines or line.startswith("+++") and len(view.lines) == 1:
            op = "h"
        elif line.startswith("@@"):
            op = "@"
        elif line.startswith("+"):
            op = "+"
            view.added += 1
        elif line.startswith("-"):
            op = "-"
            view.removed += 1
        else:
            op = " "
        if len(view.lines) < max_lines:
            view.lines.append((op, line))
        else:
            view.truncated = True
    return view


def diff_from_content(item: dict[str, Any], *, max_lines: int = MAX_LINES) -> DiffView:
    """A DiffView from one ACP diff content item (lenient about field types)."""
    old = item.get("oldText")
    new = item.get("newText")
    return render_diff(
        str(item.get("path") or "?"),
        old if isinstance(old, str) else None,
        new if isinstance(new, str) else "",
        max_lines=max_lines,
    )
