"""What a cell of the ACP kernel says: kernel commands, a shell cell, or a prompt.

Pure parsing, so the rules are testable without a kernel:

- ``%%shell [options]`` on the first line: the rest of the cell is one shell line.
- ``%name args`` lines at the top are kernel commands, run in order.
- Everything after them is the prompt. ``/name args`` is an agent slash
  command and goes to the agent as it is.
- ``@path`` mentions of existing files become resource links beside the text.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field

from .safe import Markdown

#: name -> (usage, help). The single source for %help, completion and is_complete.
COMMANDS: dict[str, tuple[str, str]] = {
    "agent": ("%agent NAME | --command CMD", "switch to another agent (a known name or any ACP command)"),
    "new": ("%new", "start a fresh session with the current agent"),
    "sessions": ("%sessions", "list the agent's sessions for this directory"),
    "load": ("%load ID", "reopen a session (resume, or load with its history replayed)"),
    "mode": ("%mode ID", "set the session mode"),
    "model": ("%model ID", "set the model"),
    "config": ("%config ID VALUE", "set a session config option"),
    "permissions": ("%permissions ask|allow-reads|allow-all|deny", "how permission requests are answered"),
    "cwd": ("%cwd DIR", "the working directory for new sessions"),
    "auth": ("%auth METHOD", "let the agent authenticate with one of its methods"),
    "status": ("%status", "agent, session, mode, model, usage and policy"),
    "passthrough": ("%passthrough [AGENT | --command CMD] | off | stop [NAME] | list",
                    "run the agent's own CLI in a terminal here; the next cells are typed into it"),
    "restart": ("%restart", "restart the agent process (keeps the session where the agent can)"),
    "help": ("%help", "this list"),
}

_MENTION = re.compile(r"(?<![\w@])@((?:[\w.~/-]|\\ )+)")


@dataclass
class Command:
    name: str
    args: list[str]
    line: str


@dataclass
class Cell:
    commands: list[Command] = field(default_factory=list)
    prompt: str = ""
    shell: str | None = None  # the shell line of a %%shell cell
    shell_args: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def parse_cell(code: str) -> Cell:
    cell = Cell()
    lines = code.splitlines()
    if lines and lines[0].startswith("%%"):
        head = lines[0][2:].split(None, 1)
        name = head[0] if head else ""
        if name == "shell":
            try:
                cell.shell_args = shlex.split(head[1]) if len(head) > 1 else []
            except ValueError as exc:
                cell.errors.append(f"%%shell options: {exc}")
            cell.shell = "\n".join(lines[1:])
            return cell
        cell.errors.append(f"unknown cell magic %%{name}; this kernel knows %%shell")
        return cell
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        if not line and not cell.commands:
            i += 1
            continue
        if not line.startswith("%") or line.startswith("%%"):
            break
        try:
            words = shlex.split(line[1:])
        except ValueError as exc:
            cell.errors.append(f"{line}: {exc}")
            i += 1
            continue
        if not words:
            cell.errors.append("empty command line '%'")
        elif words[0] not in COMMANDS:
            cell.errors.append(f"unknown command %{words[0]}; try %help")
        else:
            cell.commands.append(Command(words[0], words[1:], line))
        i += 1
    cell.prompt = "\n".join(lines[i:]).strip()
    return cell


def mentions(prompt: str, cwd: str) -> list[str]:
    """Absolute paths of existing files named as ``@path`` in the prompt."""
    found: list[str] = []
    for match in _MENTION.finditer(prompt):
        raw = match.group(1).replace("\\ ", " ").rstrip(".,;:)")
        path = os.path.abspath(os.path.join(cwd, os.path.expanduser(raw)))
        if os.path.exists(path) and path not in found:
            found.append(path)
    return found


def is_complete(code: str) -> str:
    """``complete``, ``incomplete`` or ``invalid`` for the console frontends."""
    cell = parse_cell(code)
    if cell.errors:
        return "invalid"
    if code.endswith("\\"):
        return "incomplete"
    return "complete"


def help_markdown() -> Markdown:
    # A "|" inside a table cell must be escaped, even inside backticks.
    rows = "\n".join("| `" + usage.replace("|", "\\|") + f"` | {text} |" for usage, text in COMMANDS.values())
    return Markdown(
        "Each cell is a prompt for the agent. `/name args` runs an agent slash command; "
        "`@path` attaches a file. Lines starting with `%` at the top of a cell are kernel commands:\n\n"
        "| command | what it does |\n|---|---|\n" + rows +
        "\n| `%%shell` | run the rest of the cell as one shell line (fresh shell, output streamed) |"
    )
