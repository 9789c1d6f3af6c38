"""Passthrough terminals: an agent's own interactive CLI under a PTY, driven from cells.

terminado owns the PTYs: :class:`PassthroughManager` is a small
``NamedTermManager`` policy (terminals named after their agent, each guarded
by the watchdog, reaped off the event loop, ended as a whole tree). A
terminal's readers are terminado's duck-typed clients (``size``,
``on_pty_read``, ``on_pty_died``): :class:`PassthroughTerminal` is the one
that knows about prompts, and the notebook widget (``passthrough/panel.py``) is
another.

Each terminal runs a terminal emulator (``screen.ScreenModel``, pyte) over
its output, and every decision is made on the *rendered* screen, with the
agent's registry data (:class:`~acp_kernel.client.registry.Passthrough`):

- ready: the program left canonical mode (``termios`` on the master shows the
  slave's flags), has drawn, shows its ready pattern and its input box, not
  its start-up pattern, and the screen stayed the same for the quiet window
  (``idle_seconds``, longer when the CLI shows keys slowly: ``input_box.Pace``)
  without the busy pattern; the first cell (and the first after an interrupt,
  or a try the CLI did not take) waits for that, up to ``ready_timeout`` (until the
  CLI was first ready: after the screen last changed, as a CLI still drawing its
  start on a loaded machine is not stuck, at most ``READY_CAP`` times
  ``ready_timeout`` in all);
- a prompt (``input_box``): the input box emptied (``clear_input``, pressed
  again while the box still shows text), the text pasted (bracketed when the
  application asked for it and the agent allows) and seen in the box, the
  screen settled, then the submit key, a write of its own; the submit counts
  once the text left the box and the CLI went busy or echoed the prompt. A
  prompt not taken is typed again once the CLI is ready again (``MAX_TRIES``),
  else the cell says it was not sent;
- the end of a reply: the screen unchanged for the quiet window and not
  showing the busy pattern, once the CLI showed it busy or something new (or
  after a long quiet window without either), or ``cell_timeout``;
- a question of the CLI's own (its ``dialog_pattern``: kimi's approval box): the cell
  shows it and waits for the person's answer in the terminal (never the end of the
  reply), and no prompt is typed while it shows (its Enter would answer it);
- an interrupt: the agent's ``cancel_keys``, then the screen settles;
- the reply's text: the lines the screen gained since the prompt, less the
  CLI's chrome.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import signal
import termios
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from terminado.management import NamedTermManager, PtyWithClients
from tornado.ioloop import IOLoop

from .. import compat
from ..protocol import proctree, watchdog
from . import pty_input
from .input_box import InputBox, Pace, dialog_text, echoes, extra
from .screen import FEED_MAX, Mark, ScreenModel, last_lines, reply_text
from ..errors import PassthroughError
from ..client.registry import Passthrough
from ..protocol.transport import CommandNotFound

log = logging.getLogger(__name__)

#: Output of one reply kept for its :class:`Reply` (the widget keeps its own history).
REPLY_KEEP = 1024 * 1024
#: Most bytes read from a PTY before its clients hear of them.
READ_MAX = 256 * 1024
#: Input waiting for an application that is not reading, at most.
OUTBOX_LIMIT = 8 * 1024 * 1024
#: How long a terminal gets to exit after a hangup before its tree is killed.
HANGUP_GRACE = 1.0

#: How long the screen may take to settle after an interrupt before the cell reports it.
SETTLE_SECONDS = 10.0
#: Between the clear-input keys and the paste (so they arrive as separate reads).
CLEAR_PAUSE = 0.05
#: How often readiness looks at the terminal's mode (a change of mode prints nothing).
MODE_POLL = 0.05
#: Output this recent means it is still pouring in: the screen is fed when it pauses.
STREAMING = 0.05
#: Times a prompt is submitted at most when the screen shows the CLI did not take it.
MAX_TRIES = 3
#: Times at most a prompt is typed and never shows in the input box (a CLI still starting
#: drops keys): nothing was submitted, so these go on until the ready timeout, up to this many.
MAX_UNSEEN = 20
#: Presses of the clear-input keys at most, while the input box still shows text.
CLEAR_MAX = 16
#: The first ready wait goes on while the screen changes (``ready_timeout`` after its last
#: change), at most this many times ``ready_timeout`` in all.
READY_CAP = 5
#: How often a wait for the screen looks again when nothing is read (a CLI may draw nothing new).
LOOK_AGAIN = 0.2

Outcome = Literal["idle", "interrupted", "exited", "timeout"]
#: How a wait for the screen ended, and how a try at typing a prompt did.
Seen = Literal["ok", "timeout", "interrupted", "exited"]
Tried = Literal["sent", "again", "unseen", "interrupted", "exited"]

__all__ = ["PassthroughError", "PassthroughManager", "PassthroughTerminal", "Reply"]


@dataclass
class Reply:
    """What a prompt typed into the terminal got back.

    ``text`` is the reply as the screen shows it (the lines new since the
    prompt, without the echo of the prompt nor the CLI's chrome); ``screen``
    is the whole screen when the cell ended; ``raw`` the output as it came.
    """

    prompt: str
    raw: str  # the output after the submit key, as the terminal got it
    outcome: Outcome
    exit_status: int | None = None
    truncated: bool = False
    text: str = ""
    screen: str = ""
    #: Why the cell ended as it did, for a person ("not ready after 60 s", "Esc sent").
    detail: str = ""
    #: Whether the prompt was sent at all (not when the CLI never got ready or never took it).
    sent: bool = True
    #: How many times the prompt was typed (more than once: the CLI did not take a try).
    tries: int = 1

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:  # the output itself is on screen, in the terminal
        return f"<Reply {self.outcome}: {len(self.text)} chars>"


class PassthroughManager(NamedTermManager):
    """Terminals named after their agent; nothing outlives the kernel."""

    def __init__(self) -> None:
        super().__init__(shell_command=[], max_terminals=None)
        self._paused: set[int] = set()
        for line in compat.terminado_seams():  # the internals replaced below, still there?
            log.warning(line)

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
             rows: int = 40, cols: int = 120) -> "PassthroughTerminal":
        """Start ``settings.command`` under a new PTY named ``name`` (made unique)."""
        name = self.unique_name(name)
        _, pty = self.new_named_terminal(
            name=name, shell_command=list(settings.command), cwd=cwd,
            extra_env=dict(env or {}), height=rows, width=cols,
        )
        pty.ptyproc.setwinsize(rows, cols)
        terminal = PassthroughTerminal(name, pty, settings, self)
        compat.add_pty_client(pty, terminal)
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

    A terminado client: it reads every output chunk into its screen emulator
    to know when the application is ready or busy, when it asked for
    bracketed paste, and what a reply said. It shows nothing itself.
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
        try:
            rows, cols = pty.ptyproc.getwinsize()
        except OSError:
            rows, cols = 24, 80
        self._screen = ScreenModel(rows, cols)
        # Output not yet given to the emulator: reads are cheap, the emulator is
        # not (pyte), so a burst is fed once it pauses, or when the screen is
        # looked at; a flood's tail only (ScreenModel.feed keeps FEED_MAX).
        self._pending: list[str] = []
        self._pending_len = 0
        self._loop = asyncio.get_running_loop()
        self._started = self._loop.time()
        self._last_output = self._started
        self._last_change = self._started
        self._output_count = 0
        self._activity = asyncio.Event()
        self._interrupt_seq = 0
        self._need_ready = True  # at start, and after an interrupt
        self._was_ready = False  # once: the start is over (its slow first draw is waited for)
        self._cancel: asyncio.Task | None = None
        self._capture: list[str] | None = None
        self._captured = 0
        self._busy = asyncio.Lock()
        self._outbox = bytearray()
        self._writer = False
        self._output_paused = False
        self.dropped = 0  # input bytes refused because the outbox was full
        self.pace = Pace(settings.idle_seconds)
        self._typed_at: float | None = None  # keys written, their effect not seen yet (Pace)
        self._box = InputBox(settings.input_pattern, settings.input_placeholder) if settings.input_pattern else None
        self._busy_seen = False  # since the last submit
        self._mark: Mark | None = None  # the screen before the prompt of the current try
        self._submitted_at = 0.0

    # -- terminado client --------------------------------------------------------

    def on_pty_read(self, text: str) -> None:
        now = self._loop.time()
        self._last_output = now
        self._output_count += 1
        self.modes.feed(text)
        self._pending.append(text)
        self._pending_len += len(text)
        if self._pending_len > 4 * FEED_MAX:  # bounded: only the tail can show
            tail = "".join(self._pending)[-2 * FEED_MAX:]
            self._pending, self._pending_len = [tail], len(tail)
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

    @property
    def screen(self) -> ScreenModel:
        """The emulated screen, with every read so far applied."""
        if self._pending:
            text = "".join(self._pending)
            self._pending.clear()
            self._pending_len = 0
            if self._screen.feed(text):
                self._last_change = self._last_output
                typed = self._typed_at
                if typed is not None and self._last_output > typed:
                    self.pace.observe(self._last_output - typed)
                    self._typed_at = None
                if self._capture is not None and not self._busy_seen and self.settings.busy_pattern:
                    # a prompt in flight: a busy frame counts even if the next read replaces it
                    self._busy_seen = self._screen.search(self.settings.busy_pattern) is not None
        return self._screen

    def screen_text(self) -> str:
        """The screen as the emulator renders it now, as text (trailing blanks dropped)."""
        return self.screen.text()

    def raw_mode(self) -> bool:
        """Whether the program reads keys one by one (canonical mode off): it set up its UI."""
        try:
            return not termios.tcgetattr(self.pty.ptyproc.fd)[3] & termios.ICANON
        except (termios.error, OSError, ValueError):
            return False

    def busy(self) -> str | None:
        """What on the screen says the CLI is working (its busy pattern), or None."""
        return self.screen.search(self.settings.busy_pattern)

    def dialog(self) -> str:
        """The question the CLI asks in its own TUI (its dialog pattern), as text; "" none."""
        return dialog_text(self.screen.text(), self.settings.dialog_pattern) if self.settings.dialog_pattern else ""

    def unready(self) -> str | None:
        """Why the CLI cannot take a prompt yet, or None when it can (bar the idle window)."""
        s = self.settings
        if s.raw_mode and not self.raw_mode():
            return "it has not switched its terminal to raw input"
        if not self.screen.drawn():
            return "it has drawn nothing"
        if s.ready_pattern and self.screen.search(s.ready_pattern) is None:
            return f"its screen does not show /{s.ready_pattern}/"
        starting = self.screen.search(s.startup_pattern)
        if starting is not None:
            return f"it is still starting (its screen shows {starting!r})"
        asking = self.dialog()
        if asking:
            return f"it asks in its own terminal ({asking.splitlines()[0]!r}): answer it there"
        if self._box is not None and self._box.text(self.screen.text()) is None:
            return "its input box is not on the screen"
        return None

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
        """Keystrokes, as they are (from the widget, a prompt, or the cancel keys).

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
        self._activity.set()  # the outbox is empty: a paste waiting for it goes on

    @property
    def cancel_description(self) -> str:
        return pty_input.key_names(self.settings.cancel_keys)

    def interrupt(self) -> None:
        """The agent's cancel keys (Esc for most CLIs, Ctrl-C for a shell), as a
        person would press them; ends any wait for a reply, and drops typed
        input the application has not taken yet."""
        self._interrupt_seq += 1
        self._need_ready = True  # the next prompt waits for the input box again (no dialog eats it)
        self._outbox.clear()
        if self._cancel is not None and not self._cancel.done():
            self._cancel.cancel()
        self._cancel = self._loop.create_task(self._press(self.settings.cancel_keys))
        self._activity.set()

    async def _settle(self) -> Outcome:
        """After an interrupt, until the CLI is quiet again or quits. The quiet window
        counts from the last cancel key, not from the screen's last change: a CLI that
        quits on the key often draws nothing first, and its exit can come later than
        a window counted from the reply's last line."""
        if self._cancel is not None:
            await asyncio.wait({self._cancel}, timeout=SETTLE_SECONDS)
        return await self.wait_quiet(timeout=SETTLE_SECONDS, seq=self._interrupt_seq, since=self._loop.time())

    async def _press(self, keys: tuple[tuple[str, float], ...]) -> None:
        for key, pause in keys:
            self.write(key)
            if pause > 0:
                await asyncio.sleep(pause)  # the CLI's own protocol (opencode: Esc, 250 ms, Esc)

    def pause_output(self) -> None:
        """Flow control: stop reading. A paused program is not idle (see wait_quiet)."""
        if self.manager is not None and not self.exited.done():
            self.manager.pause_reading(self.pty)
            self._output_paused = True

    def resume_output(self) -> None:
        if self.manager is not None and self._output_paused:
            self.manager.resume_reading(self.pty)
            self._output_paused = False
            self._last_output = self._last_change = self._loop.time()  # the quiet window starts again
            self._activity.set()

    def resize(self, rows: int, cols: int) -> None:
        if self.exited.done():
            return
        if self.pty.ptyproc.getwinsize() != (rows, cols):
            self.pty.ptyproc.setwinsize(rows, cols)
        self.screen.resize(rows, cols)

    # -- waiting -------------------------------------------------------------------

    async def wait_quiet(self, *, after: float | None = None, ready: bool = False,
                         timeout: float | None = None, seq: int | None = None,
                         shown: Callable[[], bool] | None = None,
                         on_dialog: Callable[[str], None] | None = None, extend: bool = False,
                         since: float = 0.0) -> Outcome:
        """Until the screen has stayed the same for the quiet window without the
        busy pattern nor a dialog of the CLI's own (after some change following
        ``after``, if given; with ``ready``, once :meth:`unready` has nothing to
        say; with ``shown``, once the busy pattern was seen or ``shown()`` says a
        reply shows, else for the long window of a reply that shows nothing), the
        process exits, an interrupt (since ``seq``), or ``timeout`` seconds
        (``"timeout"``; with ``extend``, ``timeout`` seconds after the screen last
        changed, at most ``READY_CAP`` times ``timeout`` in all). ``on_dialog``
        hears the dialog's text each time it changes ("" once it is gone). The quiet
        window starts at the screen's last change, or at ``since`` if that is later."""
        seq = self._interrupt_seq if seq is None else seq
        deadline = None if not timeout else self._loop.time() + timeout
        cap = None if not timeout else self._loop.time() + READY_CAP * timeout
        asked = ""
        while True:
            if self.exited.done():
                return "exited"
            if self._interrupt_seq != seq:
                return "interrupted"
            now = self._loop.time()
            if extend and deadline is not None and cap is not None and timeout:
                deadline = min(cap, max(deadline, self._last_change + timeout))
            if deadline is not None and now >= deadline:
                return "timeout"
            self._activity.clear()
            wake: float | None = None
            streaming = bool(self._pending) and now - self._last_output < STREAMING
            asking = ""
            if not streaming:
                self.screen  # noqa: B018 - applies the reads so far (and _last_change)
                asking = self.dialog()
                if asking != asked:
                    asked = asking
                    if on_dialog is not None:
                        on_dialog(asking)
            if streaming:
                wake = STREAMING  # output still pouring in: look at the screen once it pauses
            elif self._output_paused or (after is not None and self._last_change <= after):
                pass  # output held back by flow control, or no answer yet
            elif ready and self.unready() is not None:
                wake = MODE_POLL  # raw mode comes with no output to wake us
            elif self.busy() is not None:
                self._busy_seen = True  # the CLI says it works: only a change of screen can end that
            elif asking:
                pass  # it waits for the person's answer in the terminal: only a change of screen ends that
            else:
                wake = max(self._last_change, since) + self.pace.quiet() - now
                if wake <= 0 and shown is not None and not self._busy_seen and not shown():
                    wake = self._last_change + self.pace.no_reply_quiet() - now  # no sign of a reply yet
                if wake <= 0:
                    return "idle"
            if deadline is not None:
                wake = deadline - now if wake is None else min(wake, deadline - now)
            try:
                await asyncio.wait_for(self._activity.wait(), wake)
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

    async def ready(self, timeout: float | None = None) -> Outcome:
        """The CLI takes input: see :meth:`unready`, then the idle window (``timeout``:
        the agent's ``ready_timeout``; until the CLI was first ready, counted from the
        screen's last change)."""
        outcome = await self.wait_quiet(ready=True, timeout=self.settings.ready_timeout if timeout is None else timeout,
                                        extend=not self._was_ready)
        self._was_ready = self._was_ready or outcome == "idle"
        return outcome

    async def _drained(self, seq: int) -> bool:
        """Until the outbox is written; False on an interrupt or exit."""
        while self._outbox:
            if self._interrupt_seq != seq or self.exited.done():
                return False
            self._activity.clear()
            await self._activity.wait()
        return self._interrupt_seq == seq and not self.exited.done()

    async def _pause(self, seconds: float, seq: int) -> bool:
        """A fixed pause (the CLI's submit delay); False when interrupted meanwhile."""
        end = self._loop.time() + seconds
        while self._interrupt_seq == seq and not self.exited.done():
            left = end - self._loop.time()
            if left <= 0:
                return True
            self._activity.clear()
            try:
                await asyncio.wait_for(self._activity.wait(), left)
            except asyncio.TimeoutError:
                pass
        return False

    # -- a prompt --------------------------------------------------------------------

    async def send_prompt(self, text: str, on_dialog: Callable[[str], None] | None = None) -> Reply:
        """Wait until the CLI is ready, type ``text`` into its emptied input box and
        submit it (:meth:`_try`), and wait for the reply to end. A try the screen
        shows the CLI did not take is made again once the CLI is ready again, at
        most ``MAX_TRIES`` times; then the reply says the prompt was not sent.
        ``on_dialog`` hears a question the CLI asks in its own TUI meanwhile (see
        :meth:`wait_quiet`): the reply waits for the person's answer."""
        async with self._busy:
            if self.exited.done():
                raise PassthroughError(f"{self.name} has {self.describe_exit()}; start it again with %passthrough")
            s = self.settings
            seq = self._interrupt_seq
            tries, unseen, why = 0, 0, ""
            mark: Mark | None = None
            submitted_at = 0.0
            give_up = self._loop.time() + s.ready_timeout  # for tries whose keys never showed
            try:
                while True:
                    if self._need_ready:
                        started = self._loop.time()
                        outcome = await self.ready()
                        if outcome == "timeout":
                            why_not = self.unready() or (f"it still shows {self.busy()!r}" if self.busy()
                                                         else "its screen kept changing")
                            waited = self._loop.time() - started  # longer than the timeout: its screen changed
                            took = f"{s.ready_timeout:g}" if waited < 1.5 * s.ready_timeout else f"{waited:.0f}"
                            return self._unsent(text, "timeout", f"not ready after {took} s: {why_not}"
                                                + (f" (the try before: {why})" if why else ""), tries)
                    else:
                        outcome = await self.wait_quiet(timeout=s.cell_timeout or None)
                        if outcome == "timeout":
                            return self._unsent(text, "timeout", f"still busy after {s.cell_timeout:g} s", tries)
                    if outcome != "idle":
                        return await self._ended_early(text, outcome, seq, tries)
                    self._need_ready = False
                    if mark is not None and self._took(text, mark):
                        submitted_at = self._submitted_at
                        break  # the try before was taken after all, late
                    if tries >= MAX_TRIES or unseen >= MAX_UNSEEN or (unseen and self._loop.time() > give_up):
                        await self._clear(seq)  # leave no half-typed prompt for the next cell
                        return self._unsent(text, "timeout", f"the prompt was not sent ({tries + unseen} tries): {why}",
                                            tries + unseen)
                    state, why = await self._try(text, seq)
                    mark = self._mark
                    if state == "unseen":
                        unseen += 1
                        mark = None  # not submitted: nothing to be taken late
                        self._need_ready = True
                        continue
                    tries += 1
                    if state == "sent":
                        submitted_at = self._submitted_at
                        break
                    if state == "interrupted" or state == "exited":
                        return await self._ended_early(text, state, seq, tries)
                    self._need_ready = True  # the CLI did not take it: wait until it is ready again
                assert mark is not None
                outcome = await self.wait_quiet(
                    after=submitted_at, timeout=s.cell_timeout or None,
                    shown=lambda: bool(reply_text(self.screen.since(mark), text, s.chrome_pattern)),
                    on_dialog=on_dialog)
                detail = ""
                if outcome == "interrupted":
                    detail = f"{self.cancel_description} sent"
                    if await self._settle() == "exited":
                        outcome, detail = "exited", f"{detail}; it quit"
                elif outcome == "timeout":
                    busy, asking = self.busy(), self.dialog()
                    detail = (f"still working after {s.cell_timeout:g} s (the screen shows {busy!r})" if busy
                              else f"its own question was still open after {s.cell_timeout:g} s "
                                   f"({asking.splitlines()[0]!r}): answer it in the terminal" if asking
                              else f"the reply had not ended after {s.cell_timeout:g} s")
                raw = "".join(self._capture or ())
            finally:
                self._capture = None
            return Reply(text, raw, outcome, self.exit_status, truncated=self._captured >= REPLY_KEEP,
                         text=reply_text(self.screen.since(mark), text, s.chrome_pattern),
                         screen=self.screen_text(), detail=detail, tries=tries)

    async def _try(self, text: str, seq: int) -> tuple[Tried, str]:
        """Type the prompt once: empty the input box, paste, see the text in the box,
        let the screen settle, press submit and see it taken. ``("sent", "")``,
        ``("again", why)`` when the screen shows the submit was not taken,
        ``("unseen", why)`` when the box never showed the text (nothing was
        submitted), or ``("interrupted" | "exited", "")``. Without an input box (no
        ``input_pattern``) the screen's changes stand in, and a try is never
        made again."""
        s, box = self.settings, self._box
        self._mark = self.screen.mark()
        stopped = await self._clear(seq)
        if stopped in ("interrupted", "exited"):
            return self._stop_state(), ""
        if stopped:
            return "unseen", stopped
        self._mark = mark = self.screen.mark()
        before = box.raw(self.screen.text()) if box is not None else None
        pasted_at = self._loop.time()
        self._typed()
        self.write(pty_input.paste(text, s.bracketed_paste and self.modes.bracketed_paste))
        if not await self._drained(seq):
            return self._stop_state(), ""
        if box is not None:  # the box shows more than before (which may be a placeholder)
            typed = await self.wait_screen(lambda: self._box_took_paste(box, before), self.pace.confirm(), seq)
        else:
            typed = await self.wait_screen(lambda: self._changed_after(pasted_at), self.pace.confirm(), seq)
        if typed == "interrupted" or typed == "exited":
            return typed, ""
        if typed == "timeout" and box is not None:
            return "unseen", "its input box did not show the typed text"
        # The CLI has taken the whole paste (its screen settled) before the submit key: a
        # submit in the same burst as the paste is a newline to some (Ink, on a slow machine).
        window = max(s.submit_delay, 2 * self.pace.latency)
        settled = await self.wait_screen(lambda: self._quiet_since(pasted_at, window), self.pace.confirm(), seq)
        if settled == "interrupted" or settled == "exited":
            return settled, ""
        extra = self._box_extra(text)
        if extra:  # never submit a prompt merged with what was left in the box
            return "unseen", f"its input box showed more than the prompt ({extra!r})"
        if self._capture is None:
            self._capture, self._captured = [], 0
        self._busy_seen = False
        self._submitted_at = self._loop.time()
        self._typed()
        self.write(s.submit)
        if box is None:
            return "sent", ""
        took = await self.wait_screen(lambda: self._took(text, mark), self.pace.confirm(), seq)
        if took == "ok":
            return "sent", ""
        if took == "interrupted" or took == "exited":
            return took, ""
        if self._holds(text):
            return "again", f"the CLI did not take {pty_input.key_name(s.submit)}: its input box still shows the prompt"
        return "again", "the prompt left the input box, but the CLI neither showed it nor went busy"

    def _took(self, text: str, mark: Mark) -> bool:
        """The submitted prompt was taken: the CLI shows it busy, or the text left the
        input box and the prompt's echo is on the screen (one more than at ``mark``)."""
        if self._busy_seen or self.busy() is not None:
            self._busy_seen = True
            return True
        box = self._box
        if box is None:
            return self._changed_after(self._submitted_at)
        if self._holds(text):
            return False
        screen = self.screen.text()
        now = self.screen.scrolled_since(mark) + box.outside(screen).splitlines()
        return echoes(now, text) > echoes(mark.lines, text)

    async def _clear(self, seq: int) -> str:  # "", "interrupted", "exited" or why not
        """Empty the input box: the clear-input keys, pressed again while the box
        still shows text (a multi-line input may lose one line per press). ""
        when empty, "interrupted"/"exited", or why it could not be emptied."""
        s, box = self.settings, self._box
        if not s.clear_input:
            return ""
        if box is None:  # nothing to look at: one press, as a person would
            self._typed()
            self.write(s.clear_input)
            return "" if await self._pause(CLEAR_PAUSE, seq) else self._stop_state()
        for press in range(CLEAR_MAX):
            drawn = box.raw(self.screen.text())
            if drawn is None:
                return "its input box is not on the screen"
            held = box.text(self.screen.text())
            if press and not held:
                return ""
            # Pressed even when the box looks empty: keys typed by hand may not be drawn yet.
            self._typed()
            pressed_at = self._loop.time()
            self.write(s.clear_input)
            changed = functools.partial(self._box_changed, box, drawn)
            window = max(CLEAR_PAUSE, 2 * self.pace.latency)
            got = await self.wait_screen(
                changed if held else functools.partial(self._changed_or_quiet, changed, pressed_at, window),
                self.pace.confirm(), seq)
            if got == "interrupted" or got == "exited":
                return got
            if held and not changed():  # a placeholder of the CLI's (or it takes no keys: the paste tells)
                return ""
            now = box.text(self.screen.text()) or ""
            if held and len(now) > len(held):
                return f"{pty_input.key_name(s.clear_input)} did not clear its input box (it shows {now!r})"
        return f"its input box still shows {box.text(self.screen.text())!r} after {CLEAR_MAX} presses of " \
               f"{pty_input.key_name(s.clear_input)}"

    def _changed_or_quiet(self, changed: Callable[[], bool], since: float, window: float) -> bool:
        return changed() or self._quiet_since(since, window)

    def _changed_after(self, since: float) -> bool:
        """The screen changed after ``since``, the reads so far applied (unapplied
        reads leave ``_last_change`` where it was)."""
        self.screen  # noqa: B018 - applies the reads so far (and _last_change)
        return self._last_change > since

    def _quiet_since(self, since: float, window: float) -> bool:
        """The screen has not changed for ``window`` seconds since ``since`` (keys written then)."""
        self.screen  # noqa: B018 - a read not yet applied is a change not yet seen
        return self._loop.time() - max(self._last_change, since) >= window

    def _holds(self, text: str) -> bool:
        """The input box still shows the start of ``text`` (a long paste shown as a
        placeholder of the CLI's own does not count)."""
        held = self._box.text(self.screen.text()) if self._box is not None else None
        return bool(held) and echoes([" ".join((held or "").split())], text) > 0

    def _box_extra(self, text: str) -> str:
        """What the input box shows besides the prompt (:func:`input_box.extra`): the
        leftovers of a clear key the CLI took as text, say."""
        return extra(self._box.text(self.screen.text()) or "", text) if self._box is not None else ""

    def _box_took_paste(self, box: InputBox, before: str | None) -> bool:
        return bool(box.text(self.screen.text())) and box.raw(self.screen.text()) != before

    def _box_changed(self, box: InputBox, drawn: str) -> bool:
        return box.raw(self.screen.text()) != drawn

    def _typed(self) -> None:
        """Keys are being written: the next change of the screen tells the CLI's pace."""
        self._typed_at = self._loop.time()

    def _stop_state(self) -> Literal["interrupted", "exited"]:
        return "interrupted" if self.alive else "exited"

    async def wait_screen(self, until: Callable[[], bool], timeout: float, seq: int) -> Seen:
        """Until ``until()`` holds (``"ok"``), ``timeout`` seconds, an interrupt
        since ``seq`` or the process's exit."""
        end = self._loop.time() + timeout
        while True:
            if self.exited.done():
                return "exited"
            if self._interrupt_seq != seq:
                return "interrupted"
            self._activity.clear()
            if until():
                return "ok"
            left = end - self._loop.time()
            if left <= 0:
                self._typed_at = None  # keys with no effect in sight say nothing of the CLI's pace
                return "timeout"
            try:
                await asyncio.wait_for(self._activity.wait(), min(left, LOOK_AGAIN))
            except asyncio.TimeoutError:
                pass

    def _unsent(self, prompt: str, outcome: Outcome, detail: str, tries: int = 0) -> Reply:
        return Reply(prompt, "", outcome, self.exit_status, screen=self.screen_text(), detail=detail, sent=False,
                     tries=tries)

    async def _ended_early(self, prompt: str, outcome: Outcome, seq: int, tries: int = 0) -> Reply:
        """Interrupted (or exited) before the prompt was submitted: nothing was sent."""
        detail = ""
        if outcome == "interrupted":
            detail = f"{self.cancel_description} sent"
            await self.wait_quiet(timeout=SETTLE_SECONDS, seq=self._interrupt_seq)
        reply = self._unsent(prompt, outcome, detail, tries)
        reply.exit_status = self.exit_status
        return reply

    # -- ending ----------------------------------------------------------------------

    async def close(self, grace: float = HANGUP_GRACE) -> None:
        """Hang up (SIGHUP to its process group, as closing a terminal does), then
        end whatever is left of the tree. Once the process is reaped its pid may
        belong to someone else: nothing is signalled by pid after that."""
        if self._cancel is not None:
            self._cancel.cancel()
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

    def last_words(self) -> str:
        """The last lines of the screen, for a one-line message."""
        return last_lines(reply_text(self.screen.lines(), "", self.settings.chrome_pattern))
