"""A turn's record: what produced an answer, small and documented, kept with the cell.

A finished turn's output carries it in its metadata under :data:`KEY` (nbformat keeps
an output's metadata, so a shared notebook says what made each answer); the magics'
``_acp.record`` and the CLI's JSON ``end`` event hold the same dict, and
``acp-kernel report NOTEBOOK`` sums a notebook's records. Pure: it reads a finished
:class:`~acp_kernel.client.turn.Turn` and the :class:`Provenance` its session gave it.

Every string in it came from the agent (or its config): it is data, bounded
(:data:`TEXT` characters a string, :data:`ITEMS` tool calls and files), never shown
unescaped. Fields (:data:`VERSION` 1):

- ``version``; ``agent`` (``name``: our registry's, ``info``: the agent's own
  ``agentInfo`` name, title and version); ``session``; ``model`` and ``mode`` (ids, or null);
  ``policy`` (the permission policy in force);
- ``stop_reason`` and ``error``; ``started`` and ``ended`` (Unix seconds) and ``seconds``;
- ``usage``: the last ``usage_update`` (``used``, ``size``, ``cost``) or null;
- ``tool_calls``: ``[{kind, title, status}]`` in order, and ``tool_calls_total``;
- ``files_written``: ``[{path, bytes, created, sha256}]`` through the client's file service.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .turn import Turn

VERSION = 1
#: The output metadata key (and the name in a notebook's JSON a reader looks for).
KEY = "acp_kernel"
TEXT = 300
ITEMS = 200


@dataclass(frozen=True)
class Provenance:
    """What a session knows when a turn starts: who answers, in which session, under what policy."""

    agent: str = ""  # the registry name ("demo", "claude")
    info: dict[str, Any] | None = None  # the agent's agentInfo
    session: str = ""
    model: str | None = None
    mode: str | None = None
    policy: str = ""


def _text(value: Any) -> str | None:
    if value is None:
        return None
    s = value if isinstance(value, str) else str(value)
    return s if len(s) <= TEXT else s[:TEXT - 1] + "…"


def _info(info: dict[str, Any] | None) -> dict[str, str | None]:
    info = info if isinstance(info, dict) else {}
    return {k: _text(info.get(k)) for k in ("name", "title", "version")}


def _usage(usage: Any) -> dict[str, Any] | None:
    if not isinstance(usage, dict):
        return None
    out: dict[str, Any] = {}
    for k in ("used", "size"):
        if isinstance(usage.get(k), (int, float)) and not isinstance(usage.get(k), bool):
            out[k] = usage[k]
    cost = usage.get("cost")
    if isinstance(cost, dict) and isinstance(cost.get("amount"), (int, float)) and not isinstance(cost.get("amount"), bool):
        out["cost"] = {"amount": cost["amount"], "currency": _text(cost.get("currency"))}
    return out or None


def turn_record(turn: Turn) -> dict[str, Any]:
    """The record of ``turn`` (see the module docstring); a running turn has no end yet."""
    prov = turn.provenance or Provenance()
    calls = list(turn.tool_calls.values())
    files = turn.files_written
    return {
        "version": VERSION,
        "agent": {"name": _text(prov.agent), "info": _info(prov.info)},
        "session": _text(prov.session or turn.session_id),
        "model": _text(prov.model),
        "mode": _text(turn.last_mode() or prov.mode),  # the agent may switch it mid-turn
        "policy": _text(prov.policy),
        "stop_reason": _text(turn.stop_reason),
        "error": _text(turn.error),
        "started": round(turn.started, 3),
        "ended": round(turn.ended, 3) if turn.ended is not None else None,
        "seconds": round(turn.ended - turn.started, 3) if turn.ended is not None else None,
        "usage": _usage(turn.usage),
        "tool_calls": [{"kind": _text(c.kind), "title": _text(c.title), "status": _text(c.status)}
                       for c in calls[:ITEMS]],
        "tool_calls_total": len(calls),
        "files_written": [{"path": _text(f.path), "bytes": f.bytes, "created": f.created, "sha256": f.sha256}
                          for f in files[:ITEMS]],
    }
