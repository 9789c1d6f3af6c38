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
imported, and offers ``AcpEngine`` (papermill's own nbclient engine,
unchanged, in :mod:`acp_kernel.frontends.papermill_engine`) for the ``papermill.engine``
entry point ``acp``: installing the package is then enough for ``papermill -p``
to work, with any engine.

The kernel's ``%set`` and ``{NAME}`` live in :mod:`acp_kernel.client.params` (no
papermill there: the kernel imports it at start-up).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..client.params import NAME_RE, parse_set, value_text

KERNEL_NAME = "acp"
#: The command the parameters cell uses (the kernel's verb for a named value).
SET = "%set"


def codify(parameters: Mapping[str, Any]) -> str:
    """The parameters cell: one ``%set NAME JSON`` line each. No comment line:
    in an ACP cell every line that is not a command is prompt text."""
    lines = []
    for name, value in parameters.items():
        if not NAME_RE.match(str(name)):
            raise ValueError(f"parameter name {name!r} is not an identifier (letters, digits, _)")
        lines.append(f"{SET} {name} {value_text(value)}")
    return "\n".join(lines) + ("\n" if lines else "")


# -- papermill glue ----------------------------------------------------------------

try:
    from papermill.translators import Translator as _Translator
    from papermill.translators import papermill_translators
except ImportError:  # papermill is optional
    _Translator = object  # type: ignore[assignment,misc,unused-ignore]  # needed only without papermill
    papermill_translators = None


class AcpTranslator(_Translator):  # type: ignore[misc,valid-type,unused-ignore]  # likewise
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
