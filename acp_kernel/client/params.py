"""Named values of the ACP kernel: ``%set NAME VALUE`` and ``{NAME}`` in prompts.

``%set topic "flaky tests"`` keeps a value (JSON when it parses as JSON, else
the text); a later prompt's ``{topic}`` becomes it. papermill's ``-p``
parameters arrive as such lines (:mod:`acp_kernel.frontends.papermill` writes them).
Only names that were set are replaced, so a prompt full of code braces is
left alone. Pure, and free of papermill: the kernel imports this at start-up.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def value_text(value: Any) -> str:
    """A value as one line of JSON (newlines in strings escaped)."""
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=str)


def parse_set(rest: str) -> tuple[str, Any]:
    """``NAME VALUE`` of a ``%set`` line: the value is JSON when it parses
    as JSON, else the rest of the line as a string (``%set who the team``)."""
    parts = rest.strip().split(None, 1)
    if not parts:
        raise ValueError("usage: %set NAME VALUE (VALUE is JSON, or text)")
    name = parts[0]
    if not NAME_RE.match(name):
        raise ValueError(f"{name!r} is not a name (letters, digits, _; not starting with a digit)")
    if len(parts) == 1:
        raise ValueError(f"usage: %set {name} VALUE")
    raw = parts[1].strip()
    try:
        return name, json.loads(raw)
    except ValueError:
        return name, raw


def interpolate(text: str, values: Mapping[str, Any]) -> str:
    """``{name}`` -> its value for the names in ``values``; everything else as written."""
    if not values or "{" not in text:
        return text

    def sub(m: re.Match[str]) -> str:
        name = m.group(1)
        if name not in values:
            return m.group(0)
        value = values[name]
        return value if isinstance(value, str) else value_text(value)

    return _PLACEHOLDER.sub(sub, text)
