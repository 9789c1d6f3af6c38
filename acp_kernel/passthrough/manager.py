"""Passthrough terminals: an agent's own interactive CLI under a PTY, driven from cells.

terminado owns the PTYs: :class:`PassthroughManager` is a small
``NamedTermManager`` policy (terminals named after their agent, each guarded
by the watchdog, reaped off the event loop, ended as a whole tree). A
terminal's readers are terminado's duck-typed clients (``size``,
``on_pty_read``, ``on_pty_died``): :class:`PassthroughTerminal` is the one
that knows about prompts, and the notebook widget (``view/terminal.py``) is
another.

A prompt is typed the way a person would paste it (``pty_input.paste``),
then the submit key. Readiness and the end of a reply are both the idle
window: no output for ``idle_seconds``. That is agent-agnostic (no screen
scraping), and per agent it is data in the registry.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections import deque
from dataclasses import dataclass
from typing import Any, Literal

from terminado.management import NamedTermManager, PtyWithClients
from tornado.ioloop import IOLoop

from ..protocol import proctree, watchdog
from . import pty_input
from ..errors import PassthroughError
from ..client.registry import Passthrough
from ..protocol.transport import CommandNotFound

#: Output of one reply kept for its :class:`Reply` (the widget keeps its own history).
REPLY_KEEP = 1024 * 1024
#: Most bytes read from a PTY before its clients hear of them.
READ_MAX = 256 * 1024
#: Input waiting for an application that is not reading, at most.
OUTBOX_LIMIT = 8 * 1024 * 1024
#: How long a terminal gets to exit after a hangup before its tree is killed.
HANGUP_GRACE = 1.0

Outcome = Literal["idle", "interrupted", "exited"]

__all__ = ["PassthroughError", "PassthroughManager", "PassthroughTerminal", "Reply"]


@dataclass
class Reply:
    """What a prompt typed into the terminal got back."""

    prompt: str
    raw: str  # the output after the submit key, as the terminal got it
    outcome: Outcome
    exit_status: int | None = None
    truncated: bool = False

    @property
    def text(self) -> str:
        """The output as plain text (escape sequences removed)."""
        return pty_input.plain_text(self.raw).strip("\n")

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:  # the output itself is on screen, in the terminal
        return f"<Reply {self.outcome}: {len(self.text)} chars>"


class PassthroughManager(NamedTermManager):
    """Terminals named after their agent; nothing outlives the kernel."""

    def __init__(self) -> None:
        super().__init__(shell_command=[], max_terminals=None)
        self._paused: set[int] = set()

    def new_terminal(self, **kwargs: Any) -> PtyWithClients:
        argv = kwargs.get("shell_command") or []
        try:
            term = super().new_terminal(**kwargs)
        except FileNotFoundError as exc:
            raise CommandNotFound(argv[0] if argv else "?") from exc
        except OSError as exc:
            raise PassthroughError(f"cannot start {' '.join(argv)}: {exc}") from exc
        # Each client keeps what it needs; terminado's own 1,000-read history would be a copy.
        term.read_buffer = deque(maxlen=0)
        term.ptyproc.delayafterclose = 0.0
        # Non-blocking both ways: reads drain what is there (pty_read), and a
        # program that stops reading its input cannot block a write (the kernel).
        os.set_blocking(term.ptyproc.fd, False)
        watchdog.watch(term.ptyproc.pid)
        return term

    def pty_read(self, fd: int, events: Any = None) -> None:
        """Read everything the PTY has (up to ``READ_MAX``), then tell the clients once.

        terminado makes one read per wake-up, and a PTY hands over about 4 KiB
        per read: when the kernel falls behind a flood, draining turns many
        wake-ups (each a round of client calls) into one.
        """
        pty = self.ptys_by_fd.get(fd)
        if pty is None:
            return
        chunks: list[bytes] = []
        size, eof = 0, False
        while size < READ_MAX:
            try:
                data = os.read(fd, 65536)
            except BlockingIOError:
                break
            except OSError:  # EIO: every process on the other side has closed it
                eof = True
                break
            if not data:
                eof = True
                break
            chunks.append(data)
            size += len(data)
        if chunks:
            text = pty.ptyproc.decoder.decode(b"".join(chunks))
            for client in list(pty.clients):
                client.on_pty_read(text)
        if eof:
            self.on_eof(pty)
            for client in list(pty.clients):
                client.on_pty_died()

    def pause_reading(self, pty: PtyWithClients) -> None:
        """Stop reading (flow control): the program blocks once the PTY's buffer is full."""
        fd = pty.ptyproc.fd
        if self.ptys_by_fd.get(fd) is pty and fd not in self._paused:
            IOLoop.current().remove_handler(fd)
            self._paused.add(fd)

    def resume_reading(self, pty: PtyWithClients) -> None:
        fd = pty.ptyproc.fd
        if fd in self._paused:
            self._paused.discard(fd)
            if self.ptys_by_fd.get(fd) is pty:
                loop = IOLoop.current()
                loop.add_handler(fd, self.pty_read, loop.READ)

    def on_eof(self, ptywclients: PtyWithClients) -> None:
        """Stop reading at once; reap the child on the executor, not the event loop
        (``ptyprocess.close`` waits for it)."""
        proc = ptywclients.ptyproc
        self.ptys_by_fd.pop(proc.fd, None)
        if proc.fd in self._paused:
            self._paused.discard(proc.fd)
        else:
            IOLoop.current().remove_handler(proc.fd)
        asyncio.get_running_loop().remove_writer(proc.fd)  # a client's pending input (before the fd closes)
        if self.terminals.get(ptywclients.term_name or "") is ptywclients:
            del self.terminals[ptywclients.term_name or ""]
        ptywclients.reaped = asyncio.get_running_loop().run_in_executor(  # type: ignore[attr-defined]
            self.blocking_io_executor, _reap, proc
        )

    def unique_name(self, base: str) -> str:
        if base not in self.terminals:
            return base
        n = 2
        while f"{base}-{n}" in self.terminals:
            n += 1
        return f"{base}-{n}"

    def open(self, name: str, settings: Passthrough, *, cwd: str, env: dict[str, str] | None = None,
             rows: int = 24, cols: int = 80) -> "PassthroughTerminal":
        """Start ``settings.command`` under a new PTY named ``name`` (made unique)."""
        name = self.unique_name(name)
        _, pty = self.new_named_terminal(
            name=name, shell_command=list(settings.command), cwd=cwd,
            extra_env=dict(env or {}), height=rows, width=cols,
        )
        pty.ptyproc.setwinsize(rows, cols)
        terminal = PassthroughTerminal(name, pty, settings, self)
        pty.clients.append(terminal)
        return terminal

    def kill_now(self) -> None:
        """Synchronous SIGKILL of every terminal's tree (atexit, a dying kernel)."""
        for pty in list(self.terminals.values()):
            proctree.kill_tree_now(pty.ptyproc.pid)


def _reap(proc: Any) -> int | None:
    try:
        proc.close(force=True)
    except Exception:  # noqa: BLE001 - ptyprocess raises if it cannot kill; the tree kill follows
        return None
    if proc.signalstatus is not None:
        return -int(proc.signalstatus)
    return proc.exitstatus


class PassthroughTerminal:
    """One agent CLI in a PTY: type prompts, wait for replies, interrupt, end it.

    A terminado client: it reads every output chunk to know when the
    application is busy, when it asked for bracketed paste, and what a reply
    said. It shows nothing itself.
    """

    size = (None, None)  # not a viewer: terminado sizes the PTY by its views

    def __init__(self, name: str, pty: PtyWithClients, settings: Passthrough,
                 manager: PassthroughManager | None = None) -> None:
        self.name = name
        self.manager = manager
        self.pty = pty
        self.settings = settings
        self.pid: int = pty.ptyproc.pid
        self.exit_status: int | None = None
        self.exited = asyncio.get_running_loop().create_future()
        self.modes = pty_input.ModeWatch()
        self._loop = asyncio.get_running_loop()
        self._started = self._loop.time()
        self._last_output = self._started
        self._output_count = 0
        self._activity = asyncio.Event()
        self._interrupt_seq = 0
        self._capture: list[str] | None = None
        self._captured = 0
        self._busy = asyncio.Lock()
        self._outbox = bytearray()
        self._writer = False
        self._output_paused = False
        self.dropped = 0  # input bytes refused because the outbox was full

    # -- terminado client --------------------------------------------------------

    def on_pty_read(self, text: str) -> None:
        self._last_output = self._loop.time()
        self._output_count += 1
        self.modes.feed(text)
        if self._capture is not None and self._captured < REPLY_KEEP:
            self._capture.append(text)
            self._captured += len(text)
        self._activity.set()

    def on_pty_died(self) -> None:
        self._outbox.clear()
        self._writer = False
        reaped = getattr(self.pty, "reaped", None)
        if reaped is None:
            self._set_exited(self.pty.ptyproc.exitstatus)
        else:
            reaped.add_done_callback(lambda f: self._set_exited(None if f.exception() else f.result()))
        self._activity.set()

    def _set_exited(self, status: int | None) -> None:
        watchdog.unwatch(self.pid)
        if not self.exited.done():
            self.exit_status = status
            self.exited.set_result(status)
        self._activity.set()

    # -- state -------------------------------------------------------------------

    @property
    def alive(self) -> bool:
        return not self.exited.done()

    @property
    def title(self) -> str:
        return " ".join(self.settings.command)

    def describe_exit(self) -> str:
        status = self.exit_status
        if status is None:
            return "ended"
        if status < 0:
            try:
                return f"killed by {signal.Signals(-status).name}"
            except ValueError:
                return f"killed by signal {-status}"
        return f"exited with status {status}"

    # -- input ---------------------------------------------------------------------

    def write(self, text: str) -> None:
        """Keystrokes, as they are (from the widget, a prompt, or Ctrl-C).

        Never blocks the event loop: an application that stops reading fills
        the PTY's input buffer, and a blocking write would freeze the kernel.
        What does not fit waits in an outbox (at most ``OUTBOX_LIMIT``) and is
        written when the PTY can take it.
        """
        if self.exited.done():
            return
        data = text.encode("utf-8", "replace")
        if len(self._outbox) + len(data) > OUTBOX_LIMIT:
            self.dropped += len(data)
            return
        self._outbox += data
        self._drain()

    def _drain(self) -> None:
        fd = self.pty.ptyproc.fd
        while self._outbox and not self.exited.done():
            try:
                n = os.write(fd, self._outbox[:65536])
            except BlockingIOError:
                if not self._writer:
                    self._loop.add_writer(fd, self._drain)
                    self._writer = True
                return
            except OSError:  # the application is going away; on_pty_died follows
                self._outbox.clear()
                break
            del self._outbox[:n]
        if self._writer:
            self._loop.remove_writer(fd)
            self._writer = False

    def interrupt(self) -> None:
        """Ctrl-C, as a person at the terminal would press it; ends any wait for a
        reply, and drops typed input the application has not taken yet."""
        self._interrupt_seq += 1
        self._outbox.clear()
        self.write(pty_input.CTRL_C)
        self._activity.set()

    def pause_output(self) -> None:
        """Flow control: stop reading. A paused program is not idle (see wait_quiet)."""
        if self.manager is not None and not self.exited.done():
            self.manager.pause_reading(self.pty)
            self._output_paused = True

    def resume_output(self) -> None:
        if self.manager is not None and self._output_paused:
            self.manager.resume_reading(self.pty)
            self._output_paused = False
            self._last_output = self._loop.time()  # the quiet window starts again
            self._activity.set()

    def resize(self, rows: int, cols: int) -> None:
        if self.exited.done():
            return
        if self.pty.ptyproc.getwinsize() != (rows, cols):
            self.pty.ptyproc.setwinsize(rows, cols)

    async def wait_quiet(self, *, after: float | None = None) -> Outcome:
        """Until no output for the idle window (after some output following
        ``after``, if given), the process exits, or :meth:`interrupt`."""
        idle = self.settings.idle_seconds
        seq = self._interrupt_seq
        while True:
            if self.exited.done():
                return "exited"
            if self._interrupt_seq != seq:
                return "interrupted"
            self._activity.clear()
            timeout: float | None
            if self._output_paused or (after is not None and self._last_output <= after):
                timeout = None  # output held back by flow control, or no answer yet
            else:
                timeout = self._last_output + idle - self._loop.time()
                if timeout <= 0:
                    return "idle"
            try:
                await asyncio.wait_for(self._activity.wait(), timeout)
            except asyncio.TimeoutError:
                pass

    async def wait_exit(self) -> Outcome:
        """Until the process exits (``exited``) or :meth:`interrupt` (``interrupted``)."""
        seq = self._interrupt_seq
        while not self.exited.done():
            if self._interrupt_seq != seq:
                return "interrupted"
            self._activity.clear()
            await self._activity.wait()
        return "exited"

    async def ready(self) -> Outcome:
        """The application settled after starting: first quiet window since launch."""
        return await self.wait_quiet()

    async def send_prompt(self, text: str) -> Reply:
        """Type ``text`` as a paste, press submit, and wait for the reply to settle."""
        async with self._busy:
            if self.exited.done():
                raise PassthroughError(f"{self.name} has {self.describe_exit()}; start it again with %passthrough")
            seq = self._interrupt_seq
            outcome = await self.ready()
            if outcome != "idle":
                return Reply(text, "", outcome, self.exit_status)
            bracketed = self.settings.bracketed_paste and self.modes.bracketed_paste
            pasted_at = self._loop.time()
            self.write(pty_input.paste(text, bracketed))
            await self._echo(pasted_at)
            if self._interrupt_seq != seq:
                return Reply(text, "", "interrupted", self.exit_status)
            self._capture, self._captured = [], 0
            submitted_at = self._loop.time()
            try:
                self.write(self.settings.submit)
                outcome = await self.wait_quiet(after=submitted_at)
                raw = "".join(self._capture)
            finally:
                self._capture = None
            return Reply(text, raw, outcome, self.exit_status, truncated=self._captured >= REPLY_KEEP)

    async def _echo(self, since: float) -> None:
        """Give the application up to ``submit_delay`` to take the pasted text, so
        the submit key does not arrive inside the paste burst."""
        deadline = since + self.settings.submit_delay
        seq = self._interrupt_seq
        while self._last_output <= since and not self.exited.done() and self._interrupt_seq == seq:
            remaining = deadline - self._loop.time()
            if remaining <= 0:
                return
            self._activity.clear()
            try:
                await asyncio.wait_for(self._activity.wait(), remaining)
            except asyncio.TimeoutError:
                return

    # -- ending ----------------------------------------------------------------------

    async def close(self, grace: float = HANGUP_GRACE) -> None:
        """Hang up (SIGHUP to its process group, as closing a terminal does), then
        end whatever is left of the tree. Once the process is reaped its pid may
        belong to someone else: nothing is signalled by pid after that."""
        if self.exited.done():
            return
        members = proctree.tree(self.pid)
        proctree.signal_all(self.pid, (), signal.SIGHUP)  # a PTY child leads its own group
        try:
            await asyncio.wait_for(asyncio.shield(self.exited), grace)
        except asyncio.TimeoutError:
            await proctree.terminate_tree(self.pid, known=members)
            await asyncio.shield(self.exited)
        else:
            proctree.signal_all(0, [p for p in members if proctree.alive(p)], signal.SIGKILL)

    def kill_now(self) -> None:
        if not self.exited.done():
            proctree.kill_tree_now(self.pid)


