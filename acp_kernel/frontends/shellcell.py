"""``%%shell``: a cell body run as one shell line, in a fresh shell.

The same argv builder (:func:`~acp_kernel.services.shell.shell_argv`) and the same
:class:`~acp_kernel.services.terminals.Terminal` that answer the agent's
``terminal/create``, so a cell and an agent's command cannot drift apart. Used
by the ACP kernel and by the IPython magic alike, through one entry
(:func:`shell_cell`: options, whether a live status line is shown, the run, the
lines that say how it ended), so the two cannot show a command differently.
Output goes to a ``write`` callback (the caller streams it to the notebook), bounded: the first and last
lines, and between them a notice of what was left out and where the whole
output was saved (:mod:`acp_kernel.frontends.shellview`), so a megabyte of
output never floods the page.
"""

from __future__ import annotations

import argparse
import json
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field

from ..errors import AcpError
from ..services.output_window import HEAD_LINES, TAIL_LINES
from ..services.shell import shell_argv, terminal_request
from ..services.terminals import ExitStatus, Terminal
from ..view.frontend import Frontend
from .shellview import SAVE_LIMIT, LiveWindow, Sink

DEFAULT_LIMIT = 1024 * 1024


class ShellCellError(AcpError):
    """Bad ``%%shell`` options, or ``--raise`` with a non-zero exit."""


class ShellOptionsError(ShellCellError):
    """Bad ``%%shell`` options (a usage error: the magics show one line, no traceback)."""


@dataclass
class ShellOptions:
    pwsh: bool = False
    timeout: float | None = None
    limit: int = DEFAULT_LIMIT
    cwd: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    show_argv: bool = False
    raise_on_error: bool = False
    head: int = HEAD_LINES
    tail: int = TAIL_LINES
    save_limit: int = SAVE_LIMIT


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise ShellOptionsError(f"%%shell: {message}\n{self.format_usage().strip()}")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="%%shell", add_help=False)
    p.add_argument("--pwsh", action="store_true", help="run with PowerShell (-Command)")
    p.add_argument("--timeout", type=float, help="seconds before the process group is killed")
    p.add_argument("--limit", type=int, default=DEFAULT_LIMIT, help="bytes of output kept in the result (the end)")
    p.add_argument("--head", type=int, default=HEAD_LINES, help="first lines shown")
    p.add_argument("--tail", type=int, default=TAIL_LINES, help="last lines shown (after the cut notice)")
    p.add_argument("--save-limit", type=int, default=SAVE_LIMIT,
                   help="bytes of a cut output saved to a temp file (0: none)")
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
            raise ShellOptionsError(f"%%shell: --env wants K=V, got {item!r}")
        key, value = item.split("=", 1)
        env[key] = value
    if ns.limit <= 0:
        raise ShellOptionsError("%%shell: --limit must be a positive number of bytes")
    if ns.head < 0 or ns.tail < 0 or ns.save_limit < 0:
        raise ShellOptionsError("%%shell: --head, --tail and --save-limit must be >= 0")
    return ShellOptions(ns.pwsh, ns.timeout, ns.limit, ns.cwd, env, ns.show_argv, ns.raise_on_error,
                        ns.head, ns.tail, ns.save_limit)


def build(line: str, opts: ShellOptions) -> tuple[tuple[str, ...], dict]:
    """(argv, the equivalent CreateTerminalRequest) for a cell body."""
    shell = "pwsh" if opts.pwsh else None
    argv = shell_argv(line, shell)
    request = terminal_request(line, shell, cwd=opts.cwd, env=opts.env or None, output_byte_limit=opts.limit)
    return argv, request


@dataclass
class ShellResult:
    """How a ``%%shell`` cell ended. ``output`` is the kept end (``--limit``
    bytes); when the page or that limit cut the output, ``saved`` is a file
    with the whole of it (up to ``--save-limit``): :meth:`full_output`."""

    argv: tuple[str, ...]
    status: ExitStatus
    output: str
    truncated: bool
    timed_out: bool
    saved: str | None = None
    total_bytes: int = 0
    total_lines: int = 0

    @property
    def exit_code(self) -> int | None:
        return self.status.exit_code

    def full_output(self) -> str:
        """The whole output: the saved file when there is one, else ``output``."""
        if self.saved is None:
            return self.output
        with open(self.saved, encoding="utf-8", errors="replace") as f:
            return f.read()

    def __repr__(self) -> str:
        saved = f", saved to {self.saved}" if self.saved else ""
        return f"<ShellResult {self.status}{' (timed out)' if self.timed_out else ''}, {len(self.output)} chars{saved}>"


async def run_shell(
    line: str,
    opts: ShellOptions,
    write: Callable[[str], None],
    *,
    cwd: str,
    on_start: Callable[[Terminal], None] | None = None,
    display: Sink | None = None,
) -> ShellResult:
    """Run ``line``; show a bounded window of its output through ``write``
    (coalesced) and, given a ``display`` sink whose frontend applies updates,
    a live status line that becomes the cut notice; say how it ended."""
    argv, request = build(line, opts)
    if opts.show_argv:
        write(json.dumps({k: request[k] for k in ("command", "args") if k in request}) + "\n")
    term = Terminal(argv, cwd=opts.cwd or cwd, env=opts.env, output_limit=opts.limit, timeout=opts.timeout)
    await term.start()
    if on_start is not None:
        on_start(term)
    view = LiveWindow(opts, write, display)
    unsubscribe = term.subscribe(view.feed)
    try:
        status = await term.wait()
    finally:
        unsubscribe()
        view.stop()
    text, truncated = term.output()
    cut, saved = view.finish(keep_file=truncated)
    if term.timed_out:
        write(f"\n[timed out after {opts.timeout:g} s: process group killed]\n")
    result = ShellResult(argv, status, text, truncated, term.timed_out, saved, cut.total_bytes, cut.total_lines)
    if status.exit_code != 0:
        write(f"[{status}]\n")
    if opts.raise_on_error and status.exit_code != 0:
        raise ShellCellError(f"shell command failed: {status}")
    return result


def live_status(frontend: Frontend) -> bool:
    """Whether the cell gets a live status line that becomes the cut notice: only
    where displays are shown and updated in place (a notebook, a headless run that
    saves them). A console appends only, and code outside IPython shows no
    display at all: there the notice goes in the stream, after the head."""
    return frontend.updates and frontend.widgets


async def shell_cell(
    args: str | list[str],
    body: str,
    write: Callable[[str], None],
    *,
    frontend: Frontend,
    display: Sink,
    cwd: str,
    on_start: Callable[[Terminal], None] | None = None,
) -> ShellResult:
    """A ``%%shell`` cell, the one path of the ACP kernel and the magics: parse
    ``args`` (:class:`ShellOptionsError`), run ``body``, show its output, its
    status line per :func:`live_status`, and how it ended; ``--raise`` with a
    non-zero exit raises :class:`ShellCellError` after all of that is shown."""
    opts = parse_options(args)
    return await run_shell(body, opts, write, cwd=cwd, on_start=on_start,
                           display=display if live_status(frontend) else None)
