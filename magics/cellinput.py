"""What a ``%%acp`` cell sends: its options, ``{name}`` values, attached variables.

Pure: no kernel, no agent.
"""

from __future__ import annotations

import argparse
from typing import Any

from acp_kernel.client.session import embedded_resource

from .bridge import UsageError

#: Bytes of a variable sent with ``--attach`` at most.
ATTACH_CAP = 64 * 1024


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message}")


def cell_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="%%acp", add_help=False)
    p.add_argument("alias", nargs="?")
    p.add_argument("--no-interpolate", action="store_true")
    p.add_argument("--attach", action="append", default=[], metavar="VAR")
    return p


def attachment(name: str, value: Any, cap: int = ATTACH_CAP) -> dict[str, Any]:
    """A variable as an embedded resource: a DataFrame's head as CSV, else its repr."""
    mime = "text/plain"
    head = getattr(value, "head", None)
    to_csv = getattr(value, "to_csv", None)
    if callable(head) and callable(to_csv):
        try:
            text_ = head(50).to_csv()
            mime = "text/csv"
        except Exception:  # noqa: BLE001 - fall back to repr
            text_ = repr(value)
    else:
        text_ = repr(value)
    data = text_.encode("utf-8", "replace")
    if len(data) > cap:
        text_ = data[:cap].decode("utf-8", "ignore") + f"\n... [cut at {cap:,} bytes]"
    return embedded_resource(f"python:{name}", text_, mime)


def interpolate(text_: str, ns: dict[str, Any]) -> str:
    """``{name}`` -> value, like IPython's ``!cmd {x}``; unknown names stay as written."""
    import string

    class _Keep(dict):
        def __missing__(self, key: str) -> str:
            return "{" + key + "}"

    try:
        return string.Formatter().vformat(text_, (), _Keep(ns))
    except (ValueError, AttributeError, IndexError, KeyError):
        return text_
