"""Byte transports under a :class:`~acp_kernel.protocol.connection.Connection`.

A transport delivers bytes to ``on_data`` as they arrive (inline, from the
event loop's callback: no task, no extra copy) and takes bytes to write. Three
live here, like httpx's transports beside their mock:

- :class:`ProcessTransport`: an agent subprocess over its stdio, in its own
  session, stderr drained into a bounded ring, stopped as a whole tree;
- :class:`StdioTransport`: this process's own stdin/stdout (for agents written
  with this package, such as the demo agent);
- :class:`MemoryTransport`: an in-process pair, for unit tests of the seam.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import stat
import sys
import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from . import watchdog
from .scope import Scope
from ..errors import AcpError

OnData = Callable[[bytes], None]
OnEof = Callable[[], None]


@runtime_checkable
class Transport(Protocol):
    """What a connection needs from the bytes below it. Every transport
    declares every member: one without a process has no stall to report
    (``on_stall`` is never called, ``write_stall_seconds`` is 0) and no exit
    (``exited`` is None, ``on_exit`` is never called)."""

    #: Set by the connection: called with the bytes waiting when the peer stopped reading.
    on_stall: Callable[[int], None] | None
    #: Set by the connection: called with the exit status when the peer's process ended.
    on_exit: Callable[[int | None], None] | None

    @property
    def exited(self) -> asyncio.Future[int | None] | None:
        """Resolves with the peer process's exit status; None: no process."""
        ...

    @property
    def write_stall_seconds(self) -> float:
        """How long a full queue to the peer may go unread before ``on_stall``."""
        ...

    def attach(self, on_data: OnData, on_eof: OnEof) -> None: ...

    async def start(self) -> None: ...

    def write(self, data: bytes) -> None: ...

    async def drain(self) -> None: ...

    async def close(self) -> None: ...

    def exit_info(self) -> tuple[int | None, str]:
        """(exit status or None, recent stderr) for error messages."""
        ...


class CommandNotFound(AcpError):
    def __init__(self, program: str, hint: str = "") -> None:
        msg = f"cannot start the agent: {program!r} was not found on PATH"
        super().__init__(msg + (f". {hint}" if hint else ""))
        self.program = program


class StderrRing:
    """The last ``limit`` bytes of a stream, kept whole lines where it can."""

    def __init__(self, limit: int = 64 * 1024) -> None:
        self.limit = limit
        self._chunks: deque[bytes] = deque()
        self._size = 0
        self.total = 0

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        self._chunks.append(data)
        self._size += len(data)
        while self._size > self.limit and len(self._chunks) > 1:
            self._size -= len(self._chunks.popleft())
        if self._size > self.limit:
            only = self._chunks.pop()[-self.limit :]
            self._chunks.append(only)
            self._size = len(only)

    def text(self, max_lines: int = 40) -> str:
        text = b"".join(self._chunks).decode("utf-8", "replace")
        lines = text.splitlines()
        if self.total > self._size and lines:
            lines = lines[1:]  # the first line was probably cut
        return "\n".join(lines[-max_lines:])


def resolve_argv(argv: Sequence[str], env: Mapping[str, str] | None = None, hint: str = "") -> list[str]:
    """Resolve the program with ``shutil.which`` (honours PATHEXT, so npm's
    ``.cmd`` shims work on Windows); a path with a separator is used as is."""
    if not argv:
        raise AcpError("empty agent command")
    program = argv[0]
    if os.sep in program or (os.altsep and os.altsep in program):
        if not os.path.exists(program):
            raise CommandNotFound(program, hint)
        return list(argv)
    path = (env or os.environ).get("PATH")
    found = shutil.which(program, path=path)
    if found is None:
        raise CommandNotFound(program, hint)
    return [found, *argv[1:]]


class _ProcessProtocol(asyncio.SubprocessProtocol):
    def __init__(self, owner: "ProcessTransport") -> None:
        self.owner = owner

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        if fd == 1:
            self.owner._on_data(data)
        else:
            self.owner.stderr.feed(data)
            if self.owner.on_stderr is not None:
                self.owner.on_stderr(data)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        if fd == 1:
            self.owner.stdout_closed.set()
            self.owner._on_eof()

    # The stdin pipe's flow control (asyncio calls these past the high-water
    # mark and back under the low one), as a StreamWriter's drain uses it.
    def pause_writing(self) -> None:
        self.owner._pause_writing()

    def resume_writing(self) -> None:
        self.owner._resume_writing()

    def process_exited(self) -> None:
        self.owner._on_exited()


#: How long stdout may stay open after the agent exited (output still in the
#: pipe is read meanwhile) before a process it started, holding the pipe, is
#: taken for what it is: the agent is gone, the turn ends now.
EXIT_GRACE = 0.5


class ProcessTransport:
    """An agent process: stdout is the wire, stderr a drained ring, stdin our pen.

    The process starts in a new session (its own process group): the
    kernel's SIGINT never reaches it. It and everything it starts form one
    :class:`~acp_kernel.protocol.scope.Scope` (tree, environment marker,
    cgroup), ended whole when it is closed or when the agent exits.
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        stderr_limit: int = 64 * 1024,
        hint: str = "",
        write_buffer_bytes: int = 4 * 1024 * 1024,
        write_stall_seconds: float = 30.0,
        scope: Scope | None = None,
    ) -> None:
        full_env = dict(os.environ)
        if env:
            full_env.update(env)
        self.scope = scope if scope is not None else Scope("agent")
        self.env = self.scope.env(full_env)
        self.argv = resolve_argv(argv, full_env, hint)
        self.cwd = cwd
        self.stderr = StderrRing(stderr_limit)
        self.on_stderr: Callable[[bytes], None] | None = None
        self.pid: int | None = None
        self.exited: asyncio.Future[int | None] = asyncio.get_running_loop().create_future()
        self._proc: asyncio.SubprocessTransport | None = None
        self._stdin: asyncio.WriteTransport | None = None
        self._on_data: OnData = lambda data: None
        self._on_eof: OnEof = lambda: None
        self.stdout_closed = asyncio.Event()
        #: Called with the exit status when the agent exited while something
        #: else still holds its stdout (the connection fails what waits).
        self.on_exit: Callable[[int | None], None] | None = None
        self._ending: asyncio.Task[Any] | None = None
        self.write_buffer_bytes = write_buffer_bytes
        self.write_stall_seconds = write_stall_seconds
        #: Called with the bytes still waiting when the agent has not read its
        #: stdin for ``write_stall_seconds`` with the buffer past its limit.
        self.on_stall: Callable[[int], None] | None = None
        #: True once a stall was declared: the agent is not fed any more.
        self.stalled = False
        self._paused = False
        self._resumed = asyncio.Event()
        self._resumed.set()
        self._stall_timer: asyncio.TimerHandle | None = None
        self._stall_mark = 0  # queue size when the stall clock (re)started

    def attach(self, on_data: OnData, on_eof: OnEof) -> None:
        self._on_data, self._on_eof = on_data, on_eof

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        with self.scope.spawning() as join:
            self._proc, _ = await loop.subprocess_exec(
                lambda: _ProcessProtocol(self),
                *self.argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=self.env,
                cwd=self.cwd,
                start_new_session=True,
                preexec_fn=join,
            )
            self.pid = self._proc.get_pid()
            self.scope.started(self.pid)
        if self._proc.get_returncode() is not None and not self.exited.done():
            self._on_exited()  # it exited before subprocess_exec returned
        watchdog.watch(self.pid)  # a no-op unless the kernel enabled it
        self._stdin = self._proc.get_pipe_transport(0)  # type: ignore[assignment]
        if self._stdin is not None:
            high = max(1, self.write_buffer_bytes)
            self._stdin.set_write_buffer_limits(high=high, low=high // 4)

    # -- writing, with backpressure -------------------------------------------

    def write(self, data: bytes) -> None:
        """Queue ``data`` (one whole message: frames are never split). Async
        writers :meth:`drain` first, so the queue holds at most the limit plus
        one message; a stalled agent gets nothing more."""
        if self.stalled:
            raise BrokenPipeError("the agent stopped reading its input")
        if self._stdin is None or self._stdin.is_closing():
            raise BrokenPipeError("agent stdin is closed")
        self._stdin.write(data)

    @property
    def write_paused(self) -> bool:
        """More than ``write_buffer_bytes`` are waiting for the agent to read."""
        return self._paused

    def write_buffer_size(self) -> int:
        stdin = self._stdin
        return stdin.get_write_buffer_size() if stdin is not None else 0

    async def drain(self) -> None:
        """Wait while the queue is past its limit; returns at once when the
        agent is stalled or gone (the next write then fails clearly)."""
        while self._paused and not self.stalled:
            stdin = self._stdin
            if stdin is None or stdin.is_closing():
                return
            await self._resumed.wait()

    def _pause_writing(self) -> None:
        self._paused = True
        self._resumed.clear()
        if self._stall_timer is None and self.write_stall_seconds > 0:
            self._stall_mark = self.write_buffer_size()
            loop = asyncio.get_running_loop()
            self._stall_timer = loop.call_later(self.write_stall_seconds, self._stall)

    def _resume_writing(self) -> None:
        self._paused = False
        self._resumed.set()
        if self._stall_timer is not None:
            self._stall_timer.cancel()
            self._stall_timer = None

    def _stall(self) -> None:
        """The agent read nothing of a full queue for ``write_stall_seconds``."""
        self._stall_timer = None
        if not self._paused or self.stalled:
            return
        size = self.write_buffer_size()
        if size < self._stall_mark:  # slow, not stopped: it read something; wait again
            self._stall_mark = size
            self._stall_timer = asyncio.get_running_loop().call_later(self.write_stall_seconds, self._stall)
            return
        self.stalled = True
        self._resumed.set()  # wake every drain: they must not wait forever
        if self.on_stall is not None:
            self.on_stall(self.write_buffer_size())

    def exit_info(self) -> tuple[int | None, str]:
        code = self.exited.result() if self.exited.done() else None
        if code is None and self._proc is not None:
            # process_exited can run before _proc is set for an agent that exits at once
            code = self._proc.get_returncode()
        return code, self.stderr.text()

    def _on_exited(self) -> None:
        """The agent process ended (its owner reaped it). Whatever it started
        ends too; if one of those holds stdout open, the wire is dead anyway:
        say so after :data:`EXIT_GRACE` instead of waiting for an EOF."""
        proc = self._proc
        if proc is None or self.exited.done():
            return  # start() calls again once it has the process
        code = proc.get_returncode()
        if self.pid is not None:
            self.scope.reaped(self.pid)
        if not self.exited.done():
            self.exited.set_result(code)
        self._ending = asyncio.get_running_loop().create_task(self._after_exit(code))

    async def _after_exit(self, code: int | None) -> None:
        try:
            await asyncio.wait_for(self.stdout_closed.wait(), EXIT_GRACE)
        except asyncio.TimeoutError:
            if self.on_exit is not None:
                self.on_exit(code)
        await self.scope.end()

    def remember_tree(self) -> None:
        """Note the current members, so they can be ended after re-parenting."""
        self.scope.remember()

    async def close(self, grace: float = 0.5) -> None:
        """Close stdin, give the agent ``grace`` seconds, then end the whole tree."""
        if self._proc is None:
            return
        if self._stall_timer is not None:
            self._stall_timer.cancel()
            self._stall_timer = None
        pid = self.pid
        assert pid is not None
        self.remember_tree()
        if self._stdin is not None and not self._stdin.is_closing():
            self._stdin.close()
        if grace > 0 and not self.exited.done():
            try:
                await asyncio.wait_for(asyncio.shield(self.exited), grace)
            except asyncio.TimeoutError:
                pass
        if self._ending is not None:  # it exited: the scope is ended there
            await asyncio.shield(self._ending)
        else:
            await self.scope.end()
        watchdog.unwatch(pid)
        if not self.exited.done():
            try:
                await asyncio.wait_for(asyncio.shield(self.exited), 2.0)
            except asyncio.TimeoutError:
                pass
        self._proc.close()

    def kill_now(self) -> None:
        """Synchronous SIGKILL of the tree, for paths that cannot await."""
        if self.pid is not None:
            self.scope.kill_now()


class _ReadProtocol(asyncio.Protocol):
    def __init__(self, on_data: OnData, on_eof: OnEof) -> None:
        self.on_data, self.on_eof = on_data, on_eof

    def data_received(self, data: bytes) -> None:
        self.on_data(data)

    def eof_received(self) -> bool:
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.on_eof()


def watchable(stream: Any) -> Any:
    """``stream`` as something the event loop can watch. A pipe, socket or tty
    is used as is; a regular file or ``/dev/null`` cannot be registered with
    epoll (the read would never start and the agent would hang), so a thread
    copies it into a pipe."""
    fd = stream.fileno()
    mode = os.fstat(fd).st_mode
    if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or os.isatty(fd):
        return stream
    r, w = os.pipe()

    def pump() -> None:
        try:
            while data := os.read(fd, 1 << 16):
                view = memoryview(data)
                while view:
                    view = view[os.write(w, view):]
        except OSError:
            pass
        finally:
            os.close(w)

    threading.Thread(target=pump, name="stdin-pump", daemon=True).start()
    return os.fdopen(r, "rb", buffering=0)


class StdioTransport:
    """This process's own stdin/stdout, for the agent side of the wire."""

    def __init__(self, stdin=None, stdout=None) -> None:
        self._stdin = stdin or sys.stdin
        self._stdout = stdout or sys.stdout
        self._out_fd = self._stdout.fileno()
        self._on_data: OnData = lambda data: None
        self._on_eof: OnEof = lambda: None
        self._closed = False
        self.on_stall: Callable[[int], None] | None = None  # a blocking write: no queue to stall
        self.on_exit: Callable[[int | None], None] | None = None
        self.exited: asyncio.Future[int | None] | None = None  # this process is the peer's
        self.write_stall_seconds = 0.0

    def attach(self, on_data: OnData, on_eof: OnEof) -> None:
        self._on_data, self._on_eof = on_data, on_eof

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        await loop.connect_read_pipe(
            lambda: _ReadProtocol(self._on_data, self._on_eof), watchable(self._stdin)
        )

    def write(self, data: bytes) -> None:
        # Blocking writes keep an agent's output ordered and bounded: if the
        # client stops reading, the agent waits rather than buffering forever.
        view = memoryview(data)
        while view:
            n = os.write(self._out_fd, view)
            view = view[n:]

    async def drain(self) -> None:
        return None

    def exit_info(self) -> tuple[int | None, str]:
        return None, ""

    async def close(self) -> None:
        self._closed = True


class MemoryTransport:
    """One end of an in-process pair; see :func:`memory_pair`."""

    def __init__(self) -> None:
        self.peer: MemoryTransport | None = None
        self._on_data: OnData = lambda data: None
        self._on_eof: OnEof = lambda: None
        self._closed = False
        self.on_stall: Callable[[int], None] | None = None  # in-process: no queue to stall, no process
        self.on_exit: Callable[[int | None], None] | None = None
        self.exited: asyncio.Future[int | None] | None = None
        self.write_stall_seconds = 0.0
        self._loop = asyncio.get_running_loop()

    def attach(self, on_data: OnData, on_eof: OnEof) -> None:
        self._on_data, self._on_eof = on_data, on_eof

    async def start(self) -> None:
        return None

    def write(self, data: bytes) -> None:
        if self._closed or self.peer is None or self.peer._closed:
            raise BrokenPipeError("memory transport closed")
        self._loop.call_soon(self.peer._on_data, bytes(data))

    async def drain(self) -> None:
        await asyncio.sleep(0)

    def exit_info(self) -> tuple[int | None, str]:
        return None, ""

    async def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._loop.call_soon(self._on_eof)
            if self.peer is not None:
                self._loop.call_soon(self.peer._on_eof)


def memory_pair() -> tuple[MemoryTransport, MemoryTransport]:
    a, b = MemoryTransport(), MemoryTransport()
    a.peer, b.peer = b, a
    return a, b
