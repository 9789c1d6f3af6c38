"""``%%shell``: a cell body run as one shell line, in a fresh shell.

The same argv builder (:func:`~acp_kernel.services.shell.shell_argv`) and the same
:class:`~acp_kernel.services.terminals.Terminal` that answer the agent's
``terminal/create``, so a cell and an agent's command cannot drift apart. Used
by the ACP kernel and by the IPython magic alike; output goes to a ``write``
callback (the caller streams it to the notebook).
"""

from __future__ import annotations

import argparse
import json
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field

from ..services.shell import shell_argv, terminal_request
from ..services.terminals import ExitStatus, Terminal

DEFAULT_LIMIT = 1024 * 1024


class ShellCellError(Exception):
    """Bad ``%%shell`` options, or ``--raise`` with a non-zero exit."""


@dataclass
class ShellOptions:
    pwsh: bool = False
    timeout: float | None = None
    limit: int = DEFAULT_LIMIT
    cwd: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    show_argv: bool = False
    raise_on_error: bool = False


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise ShellCellError(f"%%shell: {message}\n{self.format_usage().strip()}")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="%%shell", add_help=False)
    p.add_argument("--pwsh", action="store_true", help="run with PowerShell (-Command)")
    p.add_argument("--timeout", type=float, help="seconds before the process group is killed")
    p.add_argument("--limit", type=int, default=DEFAULT_LIMIT, help="bytes of output kept (the end)")
    p.add_argument("--cwd", help="working directory")
    p.add_argument("--env", action="append", default=[], metavar="K=V", help="extra environment")
    p.add_argument("--show-argv", action="store_true", help="print the CreateTerminalRequest")
    p.add_argument("--raise", dest="raise_on_error", action="store_true", help="non-zero exit is an error")
    return p


def parse_options(args: str | list[str]) -> ShellOptions:
    words = shlex.split(args) if isinstance(args, str) else list(args)
    ns = _parser().parse_args(words)
    env: dict[str, str] = {}
    for item in ns.env:
        if "=" not in item:
            raise ShellCellError(f"%%shell: --env wants K=V, got {item!r}")
        key, value = item.split("=", 1)
        env[key] = value
    if ns.limit <= 0:
        raise ShellCellError("%%shell: --limit must be a positive number of bytes")
    return ShellOptions(ns.pwsh, ns.timeout, ns.limit, ns.cwd, env, ns.show_argv, ns.raise_on_error)


def build(line: str, opts: ShellOptions) -> tuple[tuple[str, ...], dict]:
    """(argv, the equivalent CreateTerminalRequest) for a cell body."""
    shell = "pwsh" if opts.pwsh else None
    argv = shell_argv(line, shell)
    request = terminal_request(line, shell, cwd=opts.cwd, env=opts.env or None, output_byte_limit=opts.limit)
    return argv, request


@dataclass
class ShellResult:
    argv: tuple[str, ...]
    status: ExitStatus
    output: str
    truncated: bool
    timed_out: bool

    @property
    def exit_code(self) -> int | None:
        return self.status.exit_code

    def __repr__(self) -> str:
        return f"<ShellResult {self.status}{' (timed out)' if self.timed_out else ''}, {len(self.output)} chars>"


async def run_shell(
    line: str,
    opts: ShellOptions,
    write: Callable[[str], None],
    *,
    cwd: str,
    on_start: Callable[[Terminal], None] | None = None,
) -> ShellResult:
    """Run ``line``; stream output through ``write``; say how it ended."""
    argv, request = build(line, opts)
    if opts.show_argv:
        write(json.dumps({k: request[k] for k in ("command", "args") if k in request}) + "\n")
    term = Terminal(argv, cwd=opts.cwd or cwd, env=opts.env, output_limit=opts.limit, timeout=opts.timeout)
    await term.start()
    if on_start is not None:
        on_start(term)
    # Stream the first half of the budget live; past it, keep quiet and show
    # the end at exit, so the notebook never holds more than ``limit`` bytes.
    budget = [opts.limit // 2]

    def stream(text: str) -> None:
        if budget[0] > 0:
            data = text.encode("utf-8", "replace")
            if len(data) > budget[0]:
                text = data[: budget[0]].decode("utf-8", "ignore")
            budget[0] -= len(data)
            write(text)
        else:
            budget[0] -= len(text.encode("utf-8", "replace"))

    unsubscribe = term.subscribe(stream)
    try:
        status = await term.wait()
    finally:
        unsubscribe()
    text, truncated = term.output()
    if budget[0] < 0:
        tail = text.encode("utf-8", "replace")[-(opts.limit // 2):].decode("utf-8", "ignore")
        write(f"\n[output cut at the {opts.limit:,}-byte limit; the last part follows]\n" + tail)
    if term.timed_out:
        write(f"\n[timed out after {opts.timeout:g} s: process group killed]\n")
    result = ShellResult(argv, status, text, truncated, term.timed_out)
    if status.exit_code != 0:
        write(f"[{status}]\n")
    if opts.raise_on_error and status.exit_code != 0:
        raise ShellCellError(f"shell command failed: {status}")
    return result
