"""Diff content (``{type: "diff", path, oldText?, newText}``) as a unified diff.

ACP v2's diff content (``{type: "diff", changes: [{operation, path, oldPath?,
fileType?, mimeType?}], patch?: {format: "git_patch", text}}``, the v2 draft's
migration guide, "Diff content") is shown the same way: its git patch typed
line by line, or, with no patch (binary, symlink, directory, an unknown
format), one header line per change (:func:`diff_from_changes`).

Computed once per change of a tool call's content (difflib), as typed lines
the widget colours (``+``, ``-``, hunk ``@``, header ``h``, context `` ``),
and as a fenced ``diff`` block for markdown readers. Big diffs are cut at
``max_lines`` so one tool call cannot flood the notebook. Pure.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
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
    #: A v2 change's operation when it is not an edit or a new file ("delete", "move", "copy", "2 files").
    operation: str = ""

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
        what = self.operation or ("new file" if self.new_file else "edit")
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
    """A DiffView from one ACP diff content item, v1 or v2 (lenient about field types)."""
    if "changes" in item and "newText" not in item:
        return diff_from_changes(item, max_lines=max_lines)
    old, new = item.get("oldText"), item.get("newText")
    path, old, new = str(item.get("path") or "?"), old if isinstance(old, str) else None, new if isinstance(new, str) else ""
    if max_lines > MAX_LINES or len(new) + len(old or "") > CACHE_CHARS:
        return render_diff(path, old, new, max_lines=max_lines)
    whole = _whole_diff(path, old, new)
    return dataclasses.replace(whole, lines=whole.lines[:max_lines],
                               truncated=whole.truncated or len(whole.lines) > max_lines)


#: The last few diffs made, whole (``MAX_LINES``), each cut to what its caller asks: one
#: call's diff is asked for by its row's state, its markdown and HTML, again when only its
#: status changes, and by the CLI's detail (difflib on a 2,000-line file: 13 ms a time).
#: Bounded: ``CACHED`` diffs of texts up to ``CACHE_CHARS`` characters (the cache keeps them).
CACHED = 16
CACHE_CHARS = 512 * 1024


@functools.lru_cache(maxsize=CACHED)
def _whole_diff(path: str, old: str | None, new: str) -> DiffView:
    return render_diff(path, old, new)


#: Lines of a git patch's file header (before its first hunk), besides ``---``/``+++``.
_GIT_HEADER = ("diff --git ", "index ", "new file mode", "deleted file mode", "old mode", "new mode",
               "similarity index", "dissimilarity index", "rename from", "rename to", "copy from", "copy to",
               "Binary files ", "GIT binary patch")


def _change_path(change: dict[str, Any]) -> str:
    path = change.get("path")
    old = change.get("oldPath")
    path = path if isinstance(path, str) and path else "?"
    return f"{old} -> {path}" if isinstance(old, str) and old else path


def diff_from_changes(item: dict[str, Any], *, max_lines: int = MAX_LINES) -> DiffView:
    """A DiffView from an ACP v2 diff content item: ``changes`` (the files and what
    happened to each) and an optional ``patch`` (``git_patch``: ``diff --git``
    sections), typed as :func:`render_diff` types difflib's lines. Lenient: a
    change or field of the wrong type is shown as ``?``, never an error."""
    raw_changes = item.get("changes")
    changes = [c for c in raw_changes if isinstance(c, dict)] if isinstance(raw_changes, list) else []
    ops: list[str] = [op if isinstance(op := c.get("operation"), str) else "?" for c in changes]
    if len(changes) == 1:
        path, operation = _change_path(changes[0]), ops[0]
    else:
        path, operation = (f"{_change_path(changes[0])} and {len(changes) - 1} more" if changes else "?"), \
            f"{len(changes)} files"
    view = DiffView(path, new_file=bool(ops) and all(op == "add" for op in ops),
                    operation="" if operation in ("add", "modify") else operation)

    def put(op: str, text: str) -> None:
        if len(view.lines) < max_lines:
            view.lines.append((op, text))
        else:
            view.truncated = True

    patch = item.get("patch")
    text = patch.get("text") if isinstance(patch, dict) and patch.get("format") == "git_patch" else None
    if not isinstance(text, str) or not text:
        for change, op in zip(changes, ops):
            kind = change.get("fileType")
            put("h", f"{op} {_change_path(change)}" + (f" ({kind})" if isinstance(kind, str) and kind else ""))
        other = patch.get("format") if isinstance(patch, dict) and patch.get("format") != "git_patch" else None
        put(" ", f"(a patch in a format not shown: {str(other)[:40]})" if other is not None else "(no text diff given)")
        return view
    in_hunk = False
    for line in text.splitlines():
        if line.startswith("diff --git "):
            in_hunk = False
        if line.startswith("@@"):
            in_hunk = True
            put("@", line)
        elif not in_hunk and (line.startswith(_GIT_HEADER) or line.startswith(("--- ", "+++ "))):
            put("h", line)
        elif in_hunk and line.startswith("+"):
            view.added += 1
            put("+", line)
        elif in_hunk and line.startswith("-"):
            view.removed += 1
            put("-", line)
        else:
            put(" ", line)
    return view
