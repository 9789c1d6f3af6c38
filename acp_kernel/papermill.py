"""papermill parameters for ACP-kernel notebooks.

``papermill nb.ipynb out.ipynb -p topic "flaky tests"`` injects a cell of
parameters written by the translator registered for the notebook's kernel.
An ACP cell is a prompt (with ``%command`` lines before it), so the
parameters become command lines the kernel runs without asking the agent::

    %set topic "flaky tests"
    %set retries 3

and later prompts use them as ``{topic}``, as the magics interpolate Python
variables. Values are JSON, so every papermill value (string, number, bool,
null, list, dict) round-trips; a string is put in a prompt as is, anything
else as its JSON. Only names set this way are replaced: a prompt full of
code braces is left alone.

papermill 2.x finds translators by kernel name or language in a registry it
fills at import, and loads only *engines* from entry points
(``papermill.engine``). So this module registers its translator when it is
imported, and offers :class:`AcpEngine` (papermill's own nbclient engine,
unchanged) for the ``papermill.engine`` entry point ``acp``: installing
the package is then enough for ``papermill -p`` to work, with any engine.

The pure parts (:func:`codify`, :func:`parse_set`, :func:`interpolate`) are
what the kernel's ``%set`` command uses.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

KERNEL_NAME = "acp"
#: The command the parameters cell uses (the kernel's verb for a named value).
SET = "%set"

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def value_text(value: Any) -> str:
    """A value as one line of JSON (newlines in strings escaped)."""
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=str)


def codify(parameters: Mapping[str, Any]) -> str:
    """The parameters cell: one ``%set NAME JSON`` line each. No comment line:
    in an ACP cell every line that is not a command is prompt text."""
    lines = []
    for name, value in parameters.items():
        if not _NAME.match(str(name)):
            raise ValueError(f"parameter name {name!r} is not an identifier (letters, digits, _)")
        lines.append(f"{SET} {name} {value_text(value)}")
    return "\n".join(lines) + ("\n" if lines else "")


def parse_set(rest: str) -> tuple[str, Any]:
    """``NAME VALUE`` of a ``%set`` line: the value is JSON when it parses
    as JSON, else the rest of the line as a string (``%set who the team``)."""
    parts = rest.strip().split(None, 1)
    if not parts:
        raise ValueError("usage: %set NAME VALUE (VALUE is JSON, or text)")
    name = parts[0]
    if not _NAME.match(name):
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


# -- papermill glue ----------------------------------------------------------------

try:
    from papermill.translators import Translator as _Translator
    from papermill.translators import papermill_translators
except ImportError:  # papermill is optional
    _Translator = object  # type: ignore[assignment,misc]
    papermill_translators = None


class AcpTranslator(_Translator):  # type: ignore[misc,valid-type]
    """papermill's translator for the ACP kernel (see the module docstring)."""

    @classmethod
    def translate(cls, val: Any) -> str:
        return value_text(val)

    @classmethod
    def comment(cls, cmt_str: str) -> str:
        return ""

    @classmethod
    def assign(cls, name: str, str_val: str) -> str:
        return f"{SET} {name} {str_val}"

    @classmethod
    def codify(cls, parameters: Mapping[str, Any], comment: str = "Parameters") -> str:
        return codify(parameters)

    @classmethod
    def inspect(cls, parameters_cell: Any) -> list[Any]:
        """The parameters a notebook's ``parameters`` cell declares (``papermill --help-notebook``)."""
        from papermill.models import Parameter

        found = []
        for line in str(getattr(parameters_cell, "source", "")).splitlines():
            if line.startswith(SET + " "):
                try:
                    name, value = parse_set(line[len(SET):])
                except ValueError:
                    continue
                found.append(Parameter(name=name, inferred_type_name=type(value).__name__,
                                       default=value_text(value), help=""))
        return found


def register() -> bool:
    """Register the translator for the ``acp`` kernel; False without papermill."""
    if papermill_translators is None:
        return False
    papermill_translators.register(KERNEL_NAME, AcpTranslator)
    return True


register()

try:
    from papermill.engines import NBClientEngine as _NBClientEngine
except ImportError:
    _NBClientEngine = object  # type: ignore[assignment,misc]


class AcpEngine(_NBClientEngine):  # type: ignore[misc,valid-type]
    """papermill's nbclient engine, unchanged: the ``papermill.engine`` entry
    point that makes papermill import this module (and so register the
    translator) when it starts."""
