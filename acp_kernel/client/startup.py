"""What a person reads while an agent starts, and when it cannot.

Every front-end (the CLI, the kernel, the magics) says the same thing: a
"Starting X…" line (noting the download a launcher such as ``npx`` does
on the first start), and on failure a :class:`Failure` with the agent's own
words (its error ``message`` *and* ``data``, its exit status, the tail of
its stderr) and a hint from the registry (what to install, which key to set,
which login command to run).

Pure: no process is started here. Agent strings are kept raw in a
:class:`Failure` and escaped only on the way out (:meth:`Failure.markdown`
through :mod:`acp_kernel.safe`, :meth:`Failure.plain` through
:mod:`acp_kernel.termsafe`); every piece is bounded.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from .. import safe, termsafe
from ..errors import (
    METHOD_NOT_FOUND,
    AcpError,
    AuthRequired,
    ConnectionClosed,
    RequestTimeout,
    RpcError,
)
from .discovery import first_start_download
from .registry import AgentSpec, launched_package
from ..safe import Markdown
from ..protocol.transport import CommandNotFound

__all__ = ["Failure", "explain_failure", "starting_line"]

#: Lines of the agent's stderr shown, and characters per line.
STDERR_LINES = 20
LINE_CHARS = 400
#: Characters of an error's ``data`` shown (as text or JSON).
DATA_CHARS = 1500
#: Characters of the whole detail.
DETAIL_CHARS = 4000

_UNSET: Any = object()


def starting_line(spec: AgentSpec, download: str | None = _UNSET) -> str:
    """``Starting Claude Code… (first start downloads PKG with npx)``.

    ``download`` is the package the launcher fetches first (default: asked of
    :func:`acp_kernel.client.registry.first_start_download`, a look at the
    launcher's cache on disk). An agent given as a command line is named by
    its program (or a launcher's package), never its whole command."""
    if download is _UNSET:
        download = first_start_download(spec)
    line = f"Starting {spec.display_name()}…"
    launched = launched_package(spec.command)
    if download and launched is not None:
        line += f" (first start downloads {download} with {launched.launcher.name})"
    return line


# -- failures ---------------------------------------------------------------------


@dataclass(frozen=True)
class Failure:
    """Why an agent could not start, in a person's words. Fields are raw
    text (agent strings included); render with :meth:`markdown` or :meth:`plain`."""

    headline: str
    detail: str = ""
    stderr_tail: str = ""
    hint: str = ""
    #: The hint as markdown, commands and keys as code spans (our template, escaped values).
    hint_md: Markdown = field(default=Markdown(""), repr=False, compare=False)

    def error_line(self) -> str:
        """The one line an error reply or exception says: the headline, and the
        detail's first line when there is one."""
        first = self.detail.split("\n", 1)[0]
        return f"{self.headline}: {first}" if first else self.headline

    def below(self) -> Failure:
        """What :meth:`error_line` leaves out (no headline, the detail past its first
        line, the stderr tail, the hint): shown beside an error that says the line,
        so a reader sees each thing once."""
        rest = self.detail.split("\n", 1)[1] if "\n" in self.detail else ""
        return replace(self, headline="", detail=rest)

    @property
    def empty(self) -> bool:
        """Nothing to show (what :meth:`below` leaves when the error line says it all)."""
        return not (self.headline or self.detail or self.stderr_tail or self.hint)

    def markdown(self) -> Markdown:
        parts = [Markdown("**{}**").format(safe.text(self.headline))] if self.headline else []
        if self.detail:
            lines = self.detail.split("\n")
            parts.append(safe.text(lines[0]) if len(lines) == 1 else safe.block(self.detail))
        if self.stderr_tail:
            parts.append(Markdown("Agent stderr (last lines):\n\n") + safe.block(self.stderr_tail))
        if self.hint:
            parts.append(Markdown("*Hint:* ") + (self.hint_md or safe.text(self.hint)))
        return Markdown("\n\n").join(parts)

    def plain(self) -> str:
        """Lines for a terminal, controls neutralised; the caller indents or prefixes."""
        rows = [termsafe.clean(self.headline, oneline=True)] if self.headline else []
        if self.detail:
            rows.append(termsafe.clean(self.detail))
        if self.stderr_tail:
            rows.append("agent stderr (last lines):")
            rows.extend("| " + termsafe.clean(row, oneline=True) for row in self.stderr_tail.split("\n"))
        if self.hint:
            rows.append("hint: " + termsafe.clean(self.hint, oneline=True))
        return "\n".join(rows)

    def as_json(self) -> dict[str, str]:
        """The fields for a JSON event (the encoder escapes what it must)."""
        return {"headline": self.headline, "detail": self.detail, "stderrTail": self.stderr_tail, "hint": self.hint}


def explain_failure(spec: AgentSpec, exc: BaseException, *, stderr: str = "", returncode: int | None = None,
                    environ: Mapping[str, str] | None = None) -> Failure:
    """A :class:`Failure` for an exception raised while ``spec`` started or
    opened its first session.

    ``stderr`` and ``returncode`` are what the front-end knows of the agent
    process (``client.transport.exit_info()`` after closing it) when the
    exception does not carry them (an ``RpcError``; a write that found the
    agent gone before it exited); ``environ`` is where API keys are looked
    for (default: this process's environment)."""
    env = os.environ if environ is None else environ
    name = spec.display_name()
    tail = _tail(getattr(exc, "stderr", "") or stderr)
    if isinstance(exc, CommandNotFound):
        return _failure(f"Cannot start {name}: {exc.program!r} was not found",
                        "", "", _install_hint(spec, exc.program))
    if isinstance(exc, AuthRequired):
        detail = str(exc)
        return _failure(f"{name} needs you to log in", _cut(detail, DETAIL_CHARS), tail,
                        _sign_in_hint(spec, env, always=True))
    if isinstance(exc, RequestTimeout):
        head = str(exc).split("\n", 1)[0]
        return _failure(f"{name} did not answer in time", head, tail, _timeout_hint(spec, exc))
    if isinstance(exc, ConnectionClosed):
        return _failure(f"{name} exited during start-up", _exit_text(exc, returncode), tail, _sign_in_hint(spec, env))
    if isinstance(exc, RpcError):
        detail = f"{exc.message or 'error'} (code {exc.code})"
        data = _data_text(exc.data)
        if data:
            detail += "\n" + data
        hint = (_not_acp_hint(spec) if exc.code == METHOD_NOT_FOUND else _sign_in_hint(spec, env))
        return _failure(f"{name} answered with an error", _cut(detail, DETAIL_CHARS), tail, hint)
    if isinstance(exc, OSError):
        reason = exc.strerror or type(exc).__name__
        return _failure(f"Cannot start {name}: {reason}", _cut(str(exc), DETAIL_CHARS), tail,
                        _Hint().add("check that {} is an executable program", spec.program()))
    if isinstance(exc, AcpError):
        return _failure(f"{name} failed to start", _cut(str(exc), DETAIL_CHARS), tail, _sign_in_hint(spec, env))
    return _failure(f"{name} failed to start", _cut(f"{type(exc).__name__}: {exc}", DETAIL_CHARS), tail, _Hint())


# -- pieces -----------------------------------------------------------------------


class _Hint:
    """A sentence built from our templates, with values shown as code:
    kept as plain text and as markdown at once."""

    def __init__(self) -> None:
        self.plain: list[str] = []
        self.md: list[Markdown] = []

    def add(self, template: str, *values: str, as_code: bool = True) -> "_Hint":
        """``template`` is ours; ``values`` are shown as code (or as escaped text)."""
        self.plain.append(template.format(*(f"`{v}`" if as_code else v for v in values)))
        self.md.append(Markdown(template).format(*(safe.code(v) if as_code else safe.text(v) for v in values)))
        return self

    def __bool__(self) -> bool:
        return bool(self.plain)


def _failure(headline: str, detail: str, tail: str, hint: _Hint) -> Failure:
    text = "; ".join(hint.plain)
    md = Markdown("; ").join(hint.md)
    return Failure(headline=_cut(headline, LINE_CHARS), detail=detail, stderr_tail=tail, hint=text, hint_md=md)


def _install_hint(spec: AgentSpec, program: str) -> _Hint:
    hint = _Hint()
    launched = launched_package(spec.command)
    if spec.install:
        hint.add("{}", spec.install, as_code=False)
    elif launched is not None:
        hint.add("install {}, which provides {}", "Node.js" if launched.launcher.cache == "npm" else "the launcher",
                 launched.launcher.name)
    else:
        hint.add("check the command, or install {} and make sure it is on PATH", os.path.basename(program))
    return hint


def _sign_in_hint(spec: AgentSpec, env: Mapping[str, str], always: bool = False) -> _Hint:
    """What to set or run when an agent that started refuses to work: the
    registry's API key variables (saying which are unset) and login command."""
    hint = _Hint()
    keys = [k for k in spec.env_keys if k]
    unset = [k for k in keys if not env.get(k) and not spec.env.get(k)]
    ways, values = [], []
    if keys:
        ways.append("set " + " or ".join("{}" for _ in keys) + (" (not set here)" if unset == keys else ""))
        values.extend(keys)
    if spec.login:
        ways.append("log in once with {}")
        values.append(spec.login)
    if ways:
        hint.add(("" if always else "if it is not signed in: ") + ", or ".join(ways), *values)
    else:
        hint.add("run {} in a terminal to see its own messages", _cut(shlex.join(spec.command), LINE_CHARS))
    return hint


def _timeout_hint(spec: AgentSpec, exc: RequestTimeout) -> _Hint:
    hint = _Hint()
    if launched_package(spec.command) is not None:
        hint.add("the first start may still be downloading the agent: try again, or raise {} in the config file",
                 f"limits.{exc.setting}")
    else:
        hint.add("raise {} under \"limits\" in the config file if the agent is just slow", f"limits.{exc.setting}")
    return hint


def _not_acp_hint(spec: AgentSpec) -> _Hint:
    return _Hint().add("this program may not speak ACP on stdio: check its command ({})", " ".join(spec.command))


def _exit_text(exc: ConnectionClosed, returncode: int | None) -> str:
    code = exc.returncode if exc.returncode is not None else returncode
    if code is None:
        return str(exc)
    if code < 0:  # asyncio reports death by signal N as -N
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _tail(text: str) -> str:
    """The last lines of stderr, each bounded, no blank ends."""
    rows = text.rstrip().split("\n")[-STDERR_LINES:] if text.strip() else []
    return "\n".join(_cut(r.rstrip("\r"), LINE_CHARS) for r in rows).strip("\n")


def _data_text(data: Any) -> str:
    """An error's ``data`` for a person: a string as is, an object of
    strings and numbers as ``key: value`` lines, anything else as JSON."""
    if data is None:
        return ""
    if isinstance(data, str):
        return _cut(data, DATA_CHARS)
    if isinstance(data, dict) and data and all(isinstance(v, (str, int, float, bool)) for v in data.values()):
        text = "\n".join(f"{k}: {v}" for k, v in data.items())
        return _cut(text, DATA_CHARS)
    try:
        text = json.dumps(data, ensure_ascii=False, indent=1, default=repr)
    except (TypeError, ValueError, RecursionError):
        text = repr(data)
    return _cut(text, DATA_CHARS)

