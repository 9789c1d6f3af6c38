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

from ..client.commands import KERNEL, Call, UsageError, help_markdown as _help, help_plain, parse_line
from ..safe import Markdown
from ..client.params import parse_set

_MENTION = re.compile(r"(?<![\w@])@((?:[\w.~/-]|\\ )+)")


@dataclass
class Command:
    name: str
    args: list[str]
    line: str
    call: Call | None = None


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
            call = parse_line(line[1:], KERNEL, line)
            if call.verb.name == "set":  # a bad value is a usage error before anything runs
                try:
                    parse_set(call.rest)
                except ValueError as exc:
                    raise UsageError(str(exc)) from None
        except UsageError as exc:
            cell.errors.append(str(exc))
        else:
            cell.commands.append(Command(call.verb.name, list(call.args), line, call))
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
    if cell.shell is not None and not cell.shell.strip():
        return "incomplete"  # a bare %%shell: the shell line comes next
    if code.endswith("\\"):
        return "incomplete"
    return "complete"


def help_markdown() -> Markdown:
    return _help(KERNEL)


def help_text() -> str:
    """``%help`` as a console prints it (the same table, as lines)."""
    intro = "Each cell is a prompt for the agent. Lines starting with % at the top of a cell are kernel commands:"
    return intro + "\n\n" + help_plain(KERNEL)
