"""Tab completion and Shift-Tab help for the ACP kernel's cells.

Completes ``%`` commands and their arguments (agents, modes, models,
policies), agent slash commands (from ``available_commands_update``) and
``@path`` mentions. Reads the command table (:mod:`acp_kernel.client.commands`)
and the controller's state; sends nothing to the agent.
"""

from __future__ import annotations

import os
import re
from typing import Any

from .. import safe
from ..client.commands import KERNEL, POLICIES, VERBS, verbs
from ..safe import Markdown
from ..client.controller import available

_WORD = re.compile(r"[^\s]*$")


def _line_at(code: str, pos: int) -> tuple[str, int]:
    start = code.rfind("\n", 0, pos) + 1
    return code[start:pos], start


def _session_values(controller: Any, what: str) -> list[str]:
    session = getattr(controller, "session", None)
    if session is None:
        return []
    if what in ("mode", "model"):
        return [c.id for c in available(session, what)]
    if what == "config":
        return [str(o.get("id")) for o in session.config_options]
    if what == "slash":
        return ["/" + c["name"] for c in session.commands if isinstance(c.get("name"), str)]
    return []


def _paths(prefix: str, cwd: str) -> list[str]:
    base = os.path.join(cwd, os.path.expanduser(prefix))
    folder, stem = os.path.split(base)
    try:
        names = sorted(os.listdir(folder or "."))
    except OSError:
        return []
    shown_folder = prefix[: len(prefix) - len(stem)]
    out = []
    for name in names:
        if name.startswith(stem) and (stem.startswith(".") or not name.startswith(".")):
            full = os.path.join(folder, name)
            out.append(shown_folder + name + ("/" if os.path.isdir(full) else ""))
    return out[:200]


def complete(code: str, pos: int, *, controller: Any, pty_target: str | None = None) -> tuple[list[str], int]:
    """(matches, cursor_start) for the text before ``pos``."""
    line, line_start = _line_at(code, pos)
    word = _WORD.search(line).group(0)  # type: ignore[union-attr]
    word_start = pos - len(word)
    stripped = line.lstrip()
    cwd = controller.cwd
    if stripped.startswith("%") and " " not in stripped:
        names = ["%" + v.name for v in verbs(KERNEL)] + ["%%shell"]
        return [n for n in names if n.startswith(stripped)], line_start + len(line) - len(stripped)
    if stripped.startswith("%"):
        cmd = stripped[1:].split()[0]
        choices: list[str] = []
        if cmd == "agent":
            choices = sorted(controller.config.agents) + ["--command"]
        elif cmd == "passthrough":
            agents = controller.config.agents
            choices = sorted(n for n, a in agents.items() if a.passthrough) + ["--command", "off", "stop", "list"]
        elif cmd == "auth":
            client = controller.client
            methods = client.auth_methods if client is not None else []
            choices = [str(m.get("id")) for m in methods if isinstance(m, dict) and m.get("id")]
        elif cmd == "permissions":
            choices = list(POLICIES)
        elif cmd in ("mode", "model", "config"):
            choices = _session_values(controller, cmd)
        elif cmd == "cwd":
            return _paths(word, cwd), word_start
        return [c for c in choices if c.startswith(word)], word_start
    if word.startswith("@"):
        return ["@" + p for p in _paths(word[1:], cwd)], word_start
    if pty_target is not None:
        return [], pos  # prompts go to a terminal: the ACP agent's slash commands do not apply
    if word.startswith("/") and code[:word_start].strip() == "" and stripped == word:
        return [c for c in _session_values(controller, "slash") if c.startswith(word)], word_start
    return [], pos


def inspect(code: str, pos: int, *, controller: Any) -> Markdown:
    """Markdown help for the slash command or ``%`` command under the cursor."""
    line, _ = _line_at(code, pos)
    rest = code[pos:].split("\n", 1)[0]
    token = (line.split()[-1] if line.split() else "") + (rest.split()[0] if rest.split() and not line.endswith(" ") else "")
    stripped = line.lstrip()
    if stripped.startswith("%"):
        name = stripped[1:].split()[0] if stripped[1:].split() else ""
        verb = VERBS.get(name)
        if verb is not None and KERNEL in verb.frontends:
            return Markdown("{}\n\n{}").format(safe.code(verb.usage(KERNEL)), verb.help)
    if token.startswith("/"):
        session = getattr(controller, "session", None)
        for c in (session.commands if session else []):
            if "/" + str(c.get("name")) == token:
                hint = (c.get("input") or {}).get("hint") if isinstance(c.get("input"), dict) else None
                return Markdown("{}{}\n\n{}").format(
                    safe.code(token), Markdown(" ") + safe.code(hint) if hint else Markdown(""),
                    safe.markdown(str(c.get("description") or "")))
    return Markdown("")
