"""``acp-kernel report NOTEBOOK``: what produced each answer in a saved notebook.

Reads the turn records a finished turn keeps in its output's metadata
(:mod:`acp_kernel.client.record`) and prints, per notebook, the turns, the
agents and models that answered, the time, tokens and cost, the tool calls by
kind and status, and the files written (path, bytes, sha256). ``--format
json`` prints the same as one JSON object. Pure apart from reading the file:
:func:`summarize` takes the notebook's JSON. Every string in a record came from
an agent: printed through :mod:`acp_kernel.termsafe`, one line each.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ..client.record import KEY
from ..errors import AcpError
from ..termsafe import json_safe, line


class ReportError(AcpError):
    """The file is not a notebook this can read: the message says why, in one line."""


@dataclass
class Summary:
    turns: list[dict[str, Any]] = field(default_factory=list)  # {"cell": n, "record": {...}}

    def totals(self) -> dict[str, Any]:
        agents: Counter[str] = Counter()
        models: Counter[str] = Counter()
        stops: Counter[str] = Counter()
        kinds: Counter[str] = Counter()
        statuses: Counter[str] = Counter()
        cost: dict[str, float] = {}
        seconds = 0.0
        tokens = 0
        files: dict[str, dict[str, Any]] = {}
        calls = 0
        for turn in self.turns:
            r = turn["record"]
            agents[_agent(r)] += 1
            if r.get("model"):
                models[str(r["model"])] += 1
            stops[str(r.get("stop_reason") or ("error" if r.get("error") else "unknown"))] += 1
            seconds += _num(r.get("seconds"))
            usage = _dict(r.get("usage"))
            tokens = max(tokens, int(_num(usage.get("used"))))
            c = usage.get("cost") if isinstance(usage.get("cost"), dict) else None
            if c is not None:
                cur = str(c.get("currency") or "?")
                cost[cur] = cost.get(cur, 0.0) + _num(c.get("amount"))
            calls += int(_num(r.get("tool_calls_total")))
            for call in r.get("tool_calls") or []:
                if isinstance(call, dict):
                    kinds[str(call.get("kind") or "other")] += 1
                    statuses[str(call.get("status") or "?")] += 1
            for f in r.get("files_written") or []:
                if isinstance(f, dict) and isinstance(f.get("path"), str):
                    files[f["path"]] = {**f, "cell": turn["cell"]}  # the last write wins
        return {"turns": len(self.turns), "agents": dict(agents), "models": dict(models), "stop_reasons": dict(stops),
                "seconds": round(seconds, 3), "context_tokens_max": tokens, "cost": cost, "tool_calls": calls,
                "tool_call_kinds": dict(kinds), "tool_call_statuses": dict(statuses),
                "files_written": sorted(files.values(), key=lambda f: f["path"])}


def _num(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _agent(record: dict[str, Any]) -> str:
    agent = _dict(record.get("agent"))
    info = _dict(agent.get("info"))
    name = agent.get("name") or info.get("name") or "?"
    version = info.get("version")
    return f"{name} {version}" if version else str(name)


def summarize(nb: Any) -> Summary:
    """The turn records of a notebook's JSON, in cell order (cells counted from 1)."""
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        raise ReportError("not a Jupyter notebook (no list of cells)")
    out = Summary()
    for n, cell in enumerate(nb["cells"], 1):
        outputs = cell.get("outputs") if isinstance(cell, dict) else None
        for output in outputs if isinstance(outputs, list) else []:
            meta = output.get("metadata") if isinstance(output, dict) else None
            record = meta.get(KEY) if isinstance(meta, dict) else None
            if isinstance(record, dict):
                out.turns.append({"cell": n, "record": record})
    return out


def load(path: str) -> Summary:
    try:
        with open(path, encoding="utf-8") as f:
            nb = json.load(f)
    except OSError as exc:
        raise ReportError(f"cannot read {line(path)}: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ReportError(f"{line(path)} is not a notebook: {exc}") from None
    return summarize(nb)


def _counts(counter: dict[str, int]) -> str:
    return ", ".join(f"{line(k)} {v}" for k, v in sorted(counter.items(), key=lambda kv: (-kv[1], kv[0])))


def text_report(path: str, summary: Summary) -> str:
    t = summary.totals()
    if not t["turns"]:
        return (f"{line(path)}: no agent turns with a record (turns finished by acp-kernel 0.x before records, "
                "or a notebook without ACP turns)\n")
    out = [f"{line(path)}: {t['turns']} turn{'s' if t['turns'] != 1 else ''}",
           f"  agents: {_counts(t['agents'])}"]
    if t["models"]:
        out.append(f"  models: {_counts(t['models'])}")
    out.append(f"  ended: {_counts(t['stop_reasons'])}")
    spent = [f"{t['seconds']:.1f} s"]
    if t["context_tokens_max"]:
        spent.append(f"context up to {t['context_tokens_max']:,} tokens")
    spent += [f"{amount:.2f} {line(cur)}" for cur, amount in sorted(t["cost"].items())]
    out.append("  spent: " + "; ".join(spent))
    calls = f"  tool calls: {t['tool_calls']}"
    if t["tool_call_kinds"]:
        calls += f" ({_counts(t['tool_call_kinds'])}); {_counts(t['tool_call_statuses'])}"
    out.append(calls)
    out.append(f"  files written: {len(t['files_written'])}")
    for f in t["files_written"]:
        digest = str(f.get("sha256") or "")[:12]
        out.append(f"    {line(f.get('path'))}  {int(_num(f.get('bytes'))):,} bytes"
                   + (f"  sha256 {line(digest)}…" if digest else "") + f"  (cell {f['cell']})")
    out.append("  turns:")
    for turn in summary.turns:
        r = turn["record"]
        model = f" · {line(r.get('model'))}" if r.get("model") else ""
        out.append(f"    cell {turn['cell']}: {line(_agent(r))}{model} · {line(r.get('stop_reason') or r.get('error') or '?')}"
                   f" · {int(_num(r.get('tool_calls_total')))} tool calls · {_num(r.get('seconds')):.1f} s")
    return "\n".join(out) + "\n"


def json_report(path: str, summary: Summary) -> str:
    return json_safe(json.dumps({"notebook": path, "totals": summary.totals(), "turns": summary.turns},
                                ensure_ascii=False)) + "\n"
