"""The one place a shell line becomes an argv.

ACP's ``terminal/create`` takes a *program* and its *args* and runs them
without a shell. Agents (and the ``%%shell`` magic) hold shell *lines*.
Turning one into the other happens here and nowhere else, so the terminal
service's fallback for agents that pack a whole line into ``command``, the
``terminal_request`` helper and ``%%shell`` can never drift apart
(see shared/seeds/kimi-terminal-argv-fix.txt).

Which shell, and why:

- An explicit ``shell`` is honoured. Its flavour comes from its name:
  ``pwsh``/``powershell`` get ``-Command``; ``cmd`` gets ``/d /s /c``;
  anything else gets ``-c`` (fish/csh too: the caller asked for them).
- Otherwise on POSIX: the user's ``$SHELL`` if it is an executable
  POSIX-compatible shell (sh, bash, zsh, dash, ksh, mksh, ash, yash,
  busybox). fish, csh, tcsh, nu, xonsh and the like are skipped: agents
  write POSIX shell lines (``a && b``, ``VAR=x cmd``, ``2>&1``) that those
  parse differently or reject. Then ``/bin/bash`` if present, else ``/bin/sh``.
- Otherwise on Windows: ``%COMSPEC%`` (cmd.exe) with ``/d /s /c``: no
  AutoRun, and ``/s`` keeps the line's quotes as written.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping, Sequence
from typing import Any

#: Shells whose ``-c`` accepts the POSIX shell language agents write.
POSIX_SHELLS: frozenset[str] = frozenset(
    {"sh", "bash", "zsh", "dash", "ksh", "ksh93", "mksh", "pdksh", "ash", "yash", "busybox"}
)
POWERSHELLS: frozenset[str] = frozenset({"pwsh", "powershell"})
CMD_SHELLS: frozenset[str] = frozenset({"cmd"})

# Characters that only make sense to a shell (plus whitespace, checked apart).
_SHELL_META = re.compile(r"[|&;<>()$`\\\"'*?\[\]{}~#=!\n]")


def shell_name(shell: str) -> str:
    """``/usr/bin/Bash.exe`` -> ``bash``: the flavour, from the program name."""
    base = re.split(r"[\\/]", shell)[-1].lower()
    for ext in (".exe", ".cmd", ".bat"):
        if base.endswith(ext):
            base = base[: -len(ext)]
    return base


def _is_executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def default_shell(*, windows: bool | None = None, env: Mapping[str, str] | None = None) -> str:
    """The shell used when the caller names none (see the module docstring)."""
    env = os.environ if env is None else env
    if windows is None:
        windows = sys.platform == "win32"
    if windows:
        return env.get("COMSPEC") or env.get("ComSpec") or "cmd.exe"
    user = env.get("SHELL", "")
    if user and os.path.isabs(user) and shell_name(user) in POSIX_SHELLS and _is_executable(user):
        return user
    if _is_executable("/bin/bash"):
        return "/bin/bash"
    return "/bin/sh"


def shell_argv(
    line: str,
    shell: str | None = None,
    *,
    windows: bool | None = None,
    env: Mapping[str, str] | None = None,
) -> tuple[str, ...]:
    """The argv that runs ``line`` through a shell: ``(shell, "-c", line)`` and kin."""
    if not isinstance(line, str):
        raise TypeError(f"shell line must be a str, not {type(line).__name__}")
    program = shell or default_shell(windows=windows, env=env)
    name = shell_name(program)
    if name in POWERSHELLS:
        return (program, "-Command", line)
    if name in CMD_SHELLS:
        return (program, "/d", "/s", "/c", line)
    return (program, "-c", line)


def terminal_request(
    line: str,
    shell: str | None = None,
    *,
    windows: bool | None = None,
    session_id: str | None = None,
    cwd: str | None = None,
    env: Mapping[str, str] | Sequence[Mapping[str, str]] | None = None,
    output_byte_limit: int | None = None,
) -> dict[str, Any]:
    """The spec-shaped ``terminal/create`` params for a shell line.

    ``env`` may be a mapping or ACP's list of ``{name, value}``; the result
    always carries the list form. Only given fields are included.
    """
    argv = shell_argv(line, shell, windows=windows)
    req: dict[str, Any] = {}
    if session_id is not None:
        req["sessionId"] = session_id
    req["command"] = argv[0]
    req["args"] = list(argv[1:])
    if cwd is not None:
        req["cwd"] = cwd
    if env is not None:
        if isinstance(env, Mapping):
            req["env"] = [{"name": k, "value": v} for k, v in env.items()]
        else:
            req["env"] = [{"name": e["name"], "value": e["value"]} for e in env]
    if output_byte_limit is not None:
        req["outputByteLimit"] = output_byte_limit
    return req


def looks_like_shell_line(command: str) -> bool:
    """True when ``command`` reads as a shell line, not a program name.

    Whitespace or shell metacharacters do it. The caller checks first that
    no program by that exact name exists (a path may hold spaces).
    """
    command = command.strip()
    if not command:
        return False
    return any(c.isspace() for c in command) or _SHELL_META.search(command) is not None
