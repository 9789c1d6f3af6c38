"""Cut long agent text for display: the end of terminal output, the start of content."""

from __future__ import annotations


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
