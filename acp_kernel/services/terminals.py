"""Terminals: processes the agent (or ``%%shell``) runs, answering ``terminal/*``.

:class:`Terminal` is one process, usable on its own (``%%shell`` builds one
from :func:`~acp_kernel.services.shell.shell_argv` with a timeout). It runs its argv
directly (no shell), stdout and stderr in one pipe, stdin ``/dev/null``, in
its own session, as a :class:`~acp_kernel.protocol.scope.Scope` (a child of
the client's, when an agent asked for it): ending it ends everything it
started, double-forked daemons included. Output goes into a bounded
:class:`~acp_kernel.services.output_buffer.OutputBuffer` and, decoded, to live
subscribers.

:class:`TerminalService` maps ACP's ``terminal/create|output|wait_for_exit|
kill|release`` onto terminals, including the two misbehaviours every client
meets: a whole shell line in ``command`` (run through the shell, and said so)
and ``release`` while ``wait_for_exit`` is pending (the wait is answered).

A terminal runs code, so ``terminal/create`` obeys the permission policy
before anything starts: ``deny`` refuses, ``allow-all`` runs, ``ask`` and
``allow-reads`` ask through the same broker and prompt UI as the agent's
``session/request_permission``, showing the real command line (the shell
line, or program + args; the agent's env; the cwd). When nobody can answer,
it is refused with the reason. A person's allow of the agent's own request
for exactly this command line counts as the answer (once), so one action is
not asked twice. Limits at the edge: live terminals per session
(``limits.terminals_per_session``; ``release`` frees the slot) and the
largest ``outputByteLimit`` (``limits.max_output_byte_limit``; larger asks
are capped, and the notice says so).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import shlex
import shutil
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from ..protocol import watchdog
from ..protocol.scope import Scope
from ..errors import INVALID_PARAMS, RESOURCE_NOT_FOUND, AcpError, RpcError
from .output_buffer import OutputBuffer, StreamDecoder
from .events import Notice, TerminalExited, TerminalStarted
from .shell import looks_like_shell_line, shell_argv
from .permissions import PermissionBroker, without_markers

log = logging.getLogger(__name__)

OutputCallback = Callable[[str], None]
ExitCallback = Callable[["ExitStatus"], None]

#: How long to keep reading after the process exited, for output still in the
#: pipe, before ``wait()`` answers anyway (a background child may hold it open).
PIPE_GRACE = 0.5


@dataclass(frozen=True)
class ExitStatus:
    exit_code: int | None
    signal: str | None

    @classmethod
    def from_returncode(cls, rc: int | None) -> ExitStatus:
        if rc is None:
            return cls(None, None)
        if rc < 0:
            try:
                name = signal.Signals(-rc).name
            except ValueError:
                name = f"SIG{-rc}"
            return cls(None, name)
        return cls(rc, None)

    def to_dict(self) -> dict[str, Any]:
        return {"exitCode": self.exit_code, "signal": self.signal}

    def __str__(self) -> str:
        return f"killed by {self.signal}" if self.signal else f"exit code {self.exit_code}"


class TerminalError(AcpError):
    """A terminal could not start (program missing, bad cwd, ...)."""

    def __init__(self, message: str, code: int = RESOURCE_NOT_FOUND) -> None:
        super().__init__(message)
        self.code = code


class _Protocol(asyncio.SubprocessProtocol):
    def __init__(self, term: Terminal) -> None:
        self.term = term

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        self.term._on_output(data)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        self.term._on_pipe_closed()

    def process_exited(self) -> None:
        self.term._on_process_exited()


class Terminal:
    """One process with bounded, live output. Start it with :meth:`start`."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        output_limit: int = 1024 * 1024,
        timeout: float | None = None,
        terminal_id: str = "",
        via_shell: bool = False,
        scope: Scope | None = None,
    ) -> None:
        if not argv:
            raise ValueError("empty argv")
        self.argv: tuple[str, ...] = tuple(argv)
        self.cwd = cwd or os.getcwd()
        self.env_overrides: dict[str, str] = dict(env or {})
        self.timeout = timeout
        self.id = terminal_id
        self.via_shell = via_shell
        self.buffer = OutputBuffer(output_limit)
        self.pid: int | None = None
        self.exit_status: ExitStatus | None = None
        self.started_at: float | None = None
        self.ended_at: float | None = None
        #: "exited", "killed", "released", "timeout" once ended.
        self.how: str = ""
        self.released = False
        self.timed_out = False
        self._transport: asyncio.SubprocessTransport | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._done: asyncio.Future[ExitStatus] | None = None
        self._returncode: int | None = None
        self._proc_exited = False
        self._pipe_closed = False
        self._grace: asyncio.TimerHandle | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._killing: asyncio.Task[None] | None = None
        #: The process and everything it starts (setsid'd and double-forked
        #: daemons too): ended by kill and release.
        self.scope = scope if scope is not None else Scope("term")
        self._decoder: StreamDecoder | None = None
        self._out_subs: list[OutputCallback] = []
        self._exit_subs: list[ExitCallback] = []

    # -- life ---------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._transport is not None and self.exit_status is None

    async def start(self) -> Terminal:
        """Spawn the process; raises :class:`TerminalError` with a clear message."""
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._done = loop.create_future()
        env = dict(os.environ)
        env.update(self.env_overrides)
        env = self.scope.env(env)  # after the agent's env: the marker is ours
        if not os.path.isdir(self.cwd):
            raise TerminalError(f"working directory {self.cwd!r} does not exist or is not a directory")
        program = self.argv[0]
        try:
            with self.scope.spawning() as join:
                self._transport, _ = await loop.subprocess_exec(
                    lambda: _Protocol(self),
                    *self.argv,
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.STDOUT,
                    cwd=self.cwd,
                    env=env,
                    start_new_session=True,
                    preexec_fn=join,
                )
                self.scope.started(self._transport.get_pid())
        except FileNotFoundError as exc:
            raise TerminalError(f"cannot run {program!r}: no such program ({exc.strerror})") from exc
        except PermissionError as exc:
            raise TerminalError(f"cannot run {program!r}: permission denied (not executable?)", INVALID_PARAMS) from exc
        except OSError as exc:
            raise TerminalError(f"cannot run {program!r}: {exc}", INVALID_PARAMS) from exc
        self.pid = self._transport.get_pid()
        watchdog.watch(self.pid)  # a no-op unless the kernel enabled it
        self.started_at = time.monotonic()
        if self.timeout is not None:
            self._timer = loop.call_later(self.timeout, self._on_timeout)
        return self

    async def wait(self) -> ExitStatus:
        """The exit status, once the process ended and its output is read."""
        if self._done is None:
            raise RuntimeError("terminal not started")
        return await asyncio.shield(self._done)

    async def kill(self, how: str = "killed") -> ExitStatus | None:
        """End the whole process tree (SIGTERM, then SIGKILL); idempotent.

        Returns the exit status, or None if the process never started.
        """
        if self._transport is None or self._done is None:
            return None
        if self._killing is None:
            if self.exit_status is None:
                self.how = how
            self._killing = asyncio.ensure_future(self._kill_tree())
        await asyncio.shield(self._killing)
        return await self.wait()

    async def _kill_tree(self) -> None:
        pid = self.pid
        assert pid is not None
        # Everything it started, whether or not it still runs or holds our pipe.
        await self.scope.end()
        watchdog.unwatch(pid)
        if self._done is not None and not self._done.done():
            try:
                await asyncio.wait_for(asyncio.shield(self._done), 2.0)
            except asyncio.TimeoutError:
                self._finish()

    async def release(self) -> None:
        """Kill if running; the output snapshot stays for display."""
        self.released = True
        await self.kill("released")

    # -- output -------------------------------------------------------------

    def output(self) -> tuple[str, bool]:
        """(text kept so far, truncated)."""
        return self.buffer.text(final=self.exit_status is not None), self.buffer.truncated

    def subscribe(
        self,
        on_output: OutputCallback | None = None,
        on_exit: ExitCallback | None = None,
        *,
        replay: bool = True,
    ) -> Callable[[], None]:
        """Get decoded output as it arrives, and the exit status once.

        With ``replay`` the text kept so far is delivered first (and an exit
        already happened is reported at once), so a late renderer misses
        nothing that is still kept. Returns an unsubscribe function.
        Callbacks run on the event loop thread.
        """
        if on_output is not None:
            if not self._out_subs and self.exit_status is None:
                # Nobody was listening, so the decoder (if any) skipped bytes:
                # start afresh where the buffer's complete text ends.
                self._decoder = StreamDecoder()
                self._decoder.feed(self.buffer.pending_tail())
            if replay:
                text, _ = self.output()
                if text:
                    on_output(text)
            self._out_subs.append(on_output)
        if on_exit is not None:
            if self.exit_status is not None:
                if replay:
                    on_exit(self.exit_status)
            else:
                self._exit_subs.append(on_exit)

        def unsubscribe() -> None:
            if on_output in self._out_subs:
                self._out_subs.remove(on_output)
            if on_exit in self._exit_subs:
                self._exit_subs.remove(on_exit)

        return unsubscribe

    def _on_output(self, data: bytes) -> None:
        self.buffer.append(data)
        if self._decoder is not None and self._out_subs:
            text = self._decoder.feed(data)
            if text:
                for cb in list(self._out_subs):
                    try:
                        cb(text)
                    except Exception:
                        log.exception("terminal output subscriber failed")

    # -- ending -------------------------------------------------------------

    def _on_pipe_closed(self) -> None:
        self._pipe_closed = True
        if self.exit_status is not None:
            if self._transport is not None:
                self._transport.close()
        elif self._proc_exited:
            self._finish()

    def _on_process_exited(self) -> None:
        self._proc_exited = True
        assert self._transport is not None
        self._returncode = self._transport.get_returncode()
        self.scope.reaped(self._transport.get_pid())
        if self._pipe_closed:
            self._finish()
        elif self._loop is not None:
            self._grace = self._loop.call_later(PIPE_GRACE, self._finish)

    def _on_timeout(self) -> None:
        if self.exit_status is None:
            self.timed_out = True
            asyncio.ensure_future(self.kill("timeout"))

    def _finish(self) -> None:
        if self.exit_status is not None:
            return
        for handle in (self._grace, self._timer):
            if handle is not None:
                handle.cancel()
        status = ExitStatus.from_returncode(self._returncode)
        self.exit_status = status
        self.ended_at = time.monotonic()
        self.how = self.how or "exited"
        if self._decoder is not None:
            tail = self._decoder.flush()
            if tail:
                for cb in list(self._out_subs):
                    try:
                        cb(tail)
                    except Exception:
                        log.exception("terminal output subscriber failed")
        exits, self._exit_subs = self._exit_subs, []
        for on_exit in exits:
            try:
                on_exit(status)
            except Exception:
                log.exception("terminal exit subscriber failed")
        if self._done is not None and not self._done.done():
            self._done.set_result(status)
        if self._pipe_closed and self._transport is not None:
            self._transport.close()


# -- pure decisions ---------------------------------------------------------------


class Plan(NamedTuple):
    argv: tuple[str, ...]
    via_shell: bool
    note: str


def _program_exists(program: str, path: str | None, cwd: str) -> bool:
    if os.sep in program or (os.altsep and os.altsep in program):
        full = program if os.path.isabs(program) else os.path.join(cwd, program)
        return os.path.isfile(full) and os.access(full, os.X_OK)
    return shutil.which(program, path=path) is not None


def plan_command(
    command: str,
    args: Sequence[str] | None,
    *,
    shell_fallback: bool,
    exists: Callable[[str], bool],
    shell: str | None = None,
) -> Plan:
    """Decide the argv for a ``terminal/create``: the spec way, or via the shell.

    Raises :class:`TerminalError` for a missing program, or for a shell line
    when the fallback is off.
    """
    if not command or not command.strip():
        raise TerminalError("terminal/create: command is empty", INVALID_PARAMS)
    if args:
        if not exists(command):
            raise TerminalError(f"terminal/create: program {command!r} was not found (PATH or path)")
        return Plan((command, *args), False, "")
    if exists(command):
        return Plan((command,), False, "")
    if looks_like_shell_line(command):
        argv = shell_argv(command, shell)
        if not shell_fallback:
            raise TerminalError(
                f"terminal/create: command {command!r} looks like a shell line, not a program; "
                f"send command={argv[0]!r}, args={list(argv[1:])!r} (shell fallback is off)",
                INVALID_PARAMS,
            )
        note = (
            f"The agent sent a whole shell line as the program name; ran it as "
            f"{argv[0]} {' '.join(argv[1:-1])} <line>, as a spec-compliant agent would have sent."
        )
        return Plan(argv, True, note)
    raise TerminalError(f"terminal/create: program {command!r} was not found (PATH or path)")


def command_text(plan: Plan, command: str, env: Mapping[str, str]) -> str:
    """The command line as a person reads it, and as answers are remembered by.

    The agent's env assignments first (``PATH=...`` changes what runs), then
    the shell line as sent (when it runs through the shell) or the argv
    joined with :func:`shlex.join`.
    """
    body = command.strip() if plan.via_shell else shlex.join(plan.argv)
    prefix = " ".join(shlex.quote(f"{k}={v}") for k, v in env.items())
    return f"{prefix} {body}" if prefix else body


def refusal(by: str, text: str, cwd: str, policy: str) -> str:
    """Why a terminal was not started, for the agent's error and the notice."""
    head = f"terminal/create: {text!r} (in {cwd}) was not run"
    if by == "policy":
        return f"{head}: the permission policy is {policy!r}, which refuses every command"
    if by == "headless":
        return (f"{head}: the permission policy {policy!r} asks before running a command and nobody can "
                f"answer here (not interactive); policy allow-all lets it run")
    if by == "limit":
        return f"{head}: too many questions already wait for an answer in this session (limits.pending_prompts)"
    if by == "cancelled":
        return f"{head}: the question was cancelled"
    return f"{head}: the user refused it"


class TerminalService:
    """Answers ``terminal/*`` for every session of one client."""

    def __init__(self, host: Any, broker: Any = None) -> None:
        self.host = host
        self.broker = broker if broker is not None else PermissionBroker(host)
        self._terminals: dict[str, tuple[str, Terminal]] = {}
        #: Slots taken by creates still asking or starting, per session.
        self._reserved: dict[str, int] = {}
        self._ids = itertools.count(1)
        self._prefix = os.urandom(3).hex()

    def terminals(self, session_id: str | None = None) -> list[Terminal]:
        return [t for sid, t in self._terminals.values() if session_id is None or sid == session_id]

    def live(self, session_id: str) -> int:
        """Terminals of the session not yet released (plus creates in progress)."""
        return sum(1 for sid, _ in self._terminals.values() if sid == session_id) + self._reserved.get(session_id, 0)

    def _get(self, params: Any, model: Any) -> tuple[Any, Terminal]:
        req = model.model_validate(params)
        self.host.session_context(req.session_id)
        entry = self._terminals.get(req.terminal_id)
        if entry is None or entry[0] != req.session_id:
            raise RpcError(
                RESOURCE_NOT_FOUND,
                f"unknown terminal {req.terminal_id!r} in session {req.session_id!r} (released, or never created)",
            )
        return req, entry[1]

    async def create(self, params: Any) -> dict[str, Any]:
        from ..protocol.schema import CreateTerminalRequest  # lazy: start-up time

        req = CreateTerminalRequest.model_validate(params)
        ctx = self.host.session_context(req.session_id)
        sid = req.session_id
        settings = ctx.settings
        limits = settings.limits
        cwd = req.cwd
        if cwd is None or cwd == "":
            cwd = ctx.cwd
        elif not os.path.isabs(cwd):
            raise RpcError(INVALID_PARAMS, f"terminal/create: cwd must be an absolute path, got {cwd!r}")
        env = {e.name: e.value for e in req.env or ()}
        path_var = env.get("PATH", os.environ.get("PATH"))
        try:
            plan = plan_command(
                req.command,
                req.args,
                shell_fallback=settings.shell_fallback,
                exists=lambda p: _program_exists(p, path_var, cwd),
            )
        except TerminalError as exc:
            ctx.emit(Notice("error", str(exc), sid))
            raise RpcError(exc.code, str(exc)) from None
        text = command_text(plan, req.command, env)
        if not os.path.isdir(cwd):  # said before anyone is asked about a run that cannot start
            msg = f"terminal/create: working directory {cwd!r} does not exist or is not a directory"
            ctx.emit(Notice("error", msg, sid))
            raise RpcError(RESOURCE_NOT_FOUND, msg)

        live = self.live(sid)
        if live >= limits.terminals_per_session:
            msg = (
                f"terminal/create: {text!r} was not run: this session already holds {live} live terminals "
                f"(limits.terminals_per_session = {limits.terminals_per_session}); release one "
                f'(terminal/release) first, or raise the limit under "limits" in the config file'
            )
            ctx.emit(Notice("error", msg, sid, kind="terminal"))
            raise RpcError(INVALID_PARAMS, msg)

        self._reserved[sid] = self._reserved.get(sid, 0) + 1
        try:
            return await self._authorize_and_start(ctx, req, plan, text, cwd, env)
        finally:
            self._reserved[sid] -= 1
            if not self._reserved[sid]:
                del self._reserved[sid]

    async def _authorize_and_start(self, ctx: Any, req: Any, plan: Plan, text: str, cwd: str, env: dict[str, str]) -> dict[str, Any]:
        sid = req.session_id
        settings = ctx.settings
        via = f" (through {' '.join(plan.argv[:-1])})" if plan.via_shell else ""
        raw_input: dict[str, Any] = {"command": list(plan.argv), "cwd": cwd}
        if env:
            raw_input["env"] = dict(env)
        verdict = await self.broker.authorize(
            ctx,
            title=f"Run {text}{via} in {cwd}",
            kind="execute",
            # what a grant and an "always" answer match: an agent's marker variable is no part of it
            command=command_text(plan, req.command, without_markers(env)),
            cwd=cwd,
            raw_input=raw_input,
            use_grant=True,
            hint="Policy allow-all lets it run (%permissions allow-all, or --permissions allow-all).",
        )
        if not verdict.allowed:
            msg = refusal(verdict.by, text, cwd, settings.permissions)
            if verdict.by not in ("headless", "limit"):  # those already said so, naming the command
                ctx.emit(Notice("warning", msg, sid, kind="terminal"))
            raise RpcError(INVALID_PARAMS, msg)

        cap = settings.limits.max_output_byte_limit
        asked = req.output_byte_limit
        limit = asked if asked is not None else settings.terminal_output_limit
        if limit > cap:
            if asked is not None:
                ctx.emit(Notice(
                    "info",
                    f"terminal/create: the agent asked to keep {asked} bytes of output of {text!r}; kept "
                    f"{cap} (limits.max_output_byte_limit; change it under \"limits\" in the config file)",
                    sid,
                ))
            limit = cap
        tid = f"term-{self._prefix}-{next(self._ids)}"
        parent = getattr(self.host, "scope", None)
        scope = parent.child("term") if isinstance(parent, Scope) else None
        term = Terminal(plan.argv, cwd=cwd, env=env, output_limit=limit, terminal_id=tid, via_shell=plan.via_shell,
                        scope=scope)
        try:
            await term.start()
        except TerminalError as exc:
            ctx.emit(Notice("error", f"terminal/create: {exc}", sid))
            raise RpcError(exc.code, str(exc)) from None
        self._terminals[tid] = (sid, term)
        term.subscribe(on_exit=lambda st: ctx.emit(TerminalExited(sid, tid, st, term.how or "exited")))
        ctx.emit(TerminalStarted(sid, tid, plan.argv, cwd, plan.via_shell, term, plan.note, output_limit=limit))
        return {"terminalId": tid}

    async def output(self, params: Any) -> dict[str, Any]:
        from ..protocol.schema import TerminalOutputRequest  # lazy: start-up time

        _, term = self._get(params, TerminalOutputRequest)
        text, truncated = term.output()
        result: dict[str, Any] = {"output": text, "truncated": truncated}
        if term.exit_status is not None:
            result["exitStatus"] = term.exit_status.to_dict()
        return result

    async def wait_for_exit(self, params: Any) -> dict[str, Any]:
        from ..protocol.schema import WaitForTerminalExitRequest  # lazy: start-up time

        _, term = self._get(params, WaitForTerminalExitRequest)
        status = await term.wait()
        return status.to_dict()

    async def kill(self, params: Any) -> dict[str, Any]:
        from ..protocol.schema import KillTerminalRequest  # lazy: start-up time

        _, term = self._get(params, KillTerminalRequest)
        await term.kill()
        return {}

    async def release(self, params: Any) -> dict[str, Any]:
        from ..protocol.schema import ReleaseTerminalRequest  # lazy: start-up time

        req, term = self._get(params, ReleaseTerminalRequest)
        await term.release()
        self._terminals.pop(req.terminal_id, None)
        return {}

    async def release_session(self, session_id: str) -> None:
        """End and forget every terminal of one session (session closed)."""
        ids = [tid for tid, (sid, _) in self._terminals.items() if sid == session_id]
        terms = [self._terminals.pop(tid)[1] for tid in ids]
        await asyncio.gather(*(t.release() for t in terms), return_exceptions=True)

    async def shutdown(self) -> None:
        """Kill every terminal (the client is closing)."""
        terms = [t for _, t in self._terminals.values()]
        self._terminals.clear()
        await asyncio.gather(*(t.release() for t in terms), return_exceptions=True)

    def register(self, conn: Any) -> None:
        conn.on_request("terminal/create", self.create)
        conn.on_request("terminal/output", self.output)
        conn.on_request("terminal/wait_for_exit", self.wait_for_exit)
        conn.on_request("terminal/kill", self.kill)
        conn.on_request("terminal/release", self.release)
