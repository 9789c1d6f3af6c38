"""A stand-in for an agent's own terminal UI (Claude Code, Codex): a demo CLI with no model.

Passthrough terminals run an agent's interactive CLI under a PTY and show it live
in a notebook. This program behaves enough like such a TUI that the whole path can
be shown and tested without an API key: raw tty mode, bracketed paste, line
editing, a spinner, replies streamed in small pieces, Ctrl-C cutting a reply short.
Run it with ``python -m acp_kernel.demo.cli``. Standard library only, POSIX.

Modes
-----
- stdin is a tty: raw mode (restored on every exit path, SIGTERM and SIGHUP
  included), bracketed paste on (``ESC [ ? 2004 h``, off again on exit), a
  coloured banner, then the prompt ``> ``. Output lines end with ``\\r\\n``.
- stdin is not a tty (a pipe): each input line is one prompt; no raw mode, no
  prompt marker, no spinner, no escape sequences; replies are written at once.

Keys (tty mode)
---------------
Printable characters echo; Backspace (DEL or ^H) erases one; Enter (CR, or LF)
submits; Ctrl-C clears the line (``^C`` and a fresh prompt) or interrupts a
reply; Ctrl-D on an empty line quits; Ctrl-U clears the line. Other control
bytes and escape sequences (arrow keys...) are ignored. Text between
``ESC [ 200 ~`` and ``ESC [ 201 ~`` is a paste: inserted literally, newlines
included (not submitted). Keys typed during a reply are kept for the next prompt.

Prompts
-------
Any other prompt is answered after a short "thinking" spinner, streamed::

    You said: <prompt>
    (<n> characters, <m> lines)

("1 character", "1 line" in the singular). Special prompts for demos and tests:

- ``/help``: lists the special prompts.
- ``/exit``: quits with status 0.
- ``/slow N``: ``line i of N`` for i = 1..N, one every 50 ms, then ``slow done``.
- ``/flood BYTES``: exactly BYTES bytes of lines of 79 ``x`` plus a line end, as
  fast as possible, then ``flood done`` on its own line.
- ``/exitcode N``: exits at once with status N (0-255).
- ``/size``: ``size ROWSxCOLS`` of the terminal (``size unknown`` without one).

A bad argument prints ``usage: /slow N`` (and so on). Ctrl-C (or SIGINT) during
any reply stops it within one frame: ``^C``, then ``interrupted`` on its own line,
then the prompt.

Options: ``--no-bracketed-paste`` (mode 2004 stays off; paste markers are then
unknown escapes), ``--banner-delay SECONDS`` (wait before the first prompt, to
imitate an app slow to become ready).

Exit status: 0 for ``/exit``, Ctrl-D, end of input or a vanished terminal; N
for ``/exitcode N``; 128 + the signal number for SIGTERM/SIGHUP; 130 for SIGINT
while waiting for a line in pipe mode.
"""

from __future__ import annotations

import argparse
import codecs
import contextlib
import errno
import fcntl
import os
import select
import signal
import sys
import termios
import time
import tty
import unicodedata
from collections import deque
from collections.abc import Callable, Iterator
from types import FrameType

from ..errors import AcpError

# Events from :class:`InputParser`: ("text", str) or a one-element tuple.
TEXT = "text"
SUBMIT = "submit"
INTERRUPT = "interrupt"
EOF = "eof"
BACKSPACE = "backspace"
CLEAR = "clear"
Event = tuple[str, ...]

PASTE_START = "\x1b[200~"
PASTE_END = "\x1b[201~"
PASTE_ON = "\x1b[?2004h"
PASTE_OFF = "\x1b[?2004l"
PROMPT = "> "
TITLE = "Demo CLI (acp-kernel)"
HINT = "Type a prompt and press Enter. Ctrl-C interrupts a reply; Ctrl-D or /exit quits."
COMMANDS_LINE = "Demo commands: /help, /slow N, /flood BYTES, /size, /exitcode N, /exit"
HELP = """\
/slow N        N numbered lines, one every 50 ms (Ctrl-C interrupts)
/flood BYTES   BYTES bytes of text as fast as possible
/size          the terminal size as ROWSxCOLS
/exitcode N    exit at once with status N
/exit          quit
"""

SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
FRAME_SECONDS = 0.08
THINK_FRAMES = 5
CHUNK_SECONDS = 0.015
SLOW_LINE_SECONDS = 0.05
FLOOD_LINE = "x" * 79
FLOOD_LINES_PER_WRITE = 800

_KEYS = {
    "\r": SUBMIT,
    "\n": SUBMIT,
    "\x03": INTERRUPT,
    "\x04": EOF,
    "\x7f": BACKSPACE,
    "\x08": BACKSPACE,
    "\x15": CLEAR,
}
_MAX_CSI = 64
# name: (argument name, smallest, largest)
_NUMERIC = {
    "/slow": ("N", 0, 1_000_000),
    "/flood": ("BYTES", 0, 1 << 40),
    "/exitcode": ("N", 0, 255),
}


class InputParser:
    """Keyboard bytes to editing events, incrementally: pure, no I/O.

    Reads arrive in arbitrary pieces (a UTF-8 character, an arrow key's escape
    sequence or a paste marker may be split), so all partial state is kept
    between :meth:`feed` calls.
    """

    def __init__(self, bracketed_paste: bool = True) -> None:
        self.bracketed_paste = bracketed_paste
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._state = self._normal
        self._seq = ""  # the escape sequence read so far
        self._paste = ""  # pasted text not yet emitted (may end in part of PASTE_END)
        self._after_cr = False
        self._paste_after_cr = False
        self._events: list[Event] = []

    def feed(self, data: bytes) -> list[Event]:
        """The events completed by ``data``; adjacent text is merged into one event."""
        for ch in self._decoder.decode(data):
            self._state(ch)
        if self._state == self._in_paste:
            self._flush_paste(hold_marker_prefix=True)
        events, self._events = self._events, []
        return events

    @property
    def in_paste(self) -> bool:
        """True between a paste's start and end markers."""
        return self._state == self._in_paste

    def _text(self, text: str) -> None:
        if not text:
            return
        if self._events and self._events[-1][0] == TEXT:
            self._events[-1] = (TEXT, self._events[-1][1] + text)
        else:
            self._events.append((TEXT, text))

    def _normal(self, ch: str) -> None:
        after_cr, self._after_cr = self._after_cr, ch == "\r"
        if ch == "\x1b":
            self._state, self._seq = self._escape, ch
        elif ch == "\n" and after_cr:
            pass  # CR LF from a pipe-like sender is one Enter
        elif ch in _KEYS:
            self._events.append((_KEYS[ch],))
        elif ch.isprintable():
            self._text(ch)

    def _escape(self, ch: str) -> None:
        if ch == "[":
            self._state, self._seq = self._csi, self._seq + ch
        elif ch == "O":
            self._state = self._ss3
        elif ch == "\x1b":
            pass  # the first ESC was the Escape key on its own
        else:
            self._state = self._normal
            if not ch.isprintable():
                self._normal(ch)  # ESC then a control key: keep the key

    def _ss3(self, ch: str) -> None:
        self._state = self._normal
        if not ch.isprintable():
            self._normal(ch)

    def _csi(self, ch: str) -> None:
        self._seq += ch
        if "@" <= ch <= "~":
            self._state = self._normal
            if self._seq == PASTE_START and self.bracketed_paste:
                self._state, self._paste_after_cr = self._in_paste, False
        elif not " " <= ch <= "?" or len(self._seq) > _MAX_CSI:
            self._state = self._normal  # malformed: drop it
            if not ch.isprintable():
                self._normal(ch)

    def _in_paste(self, ch: str) -> None:
        self._paste += ch
        if ch == "~" and self._paste.endswith(PASTE_END):
            self._paste = self._paste[: -len(PASTE_END)]
            self._flush_paste(hold_marker_prefix=False)
            self._state = self._normal

    def _flush_paste(self, hold_marker_prefix: bool) -> None:
        """Emit pasted text, keeping back a tail that may be the start of the end marker."""
        keep = 0
        if hold_marker_prefix:
            keep = next(
                (
                    n
                    for n in range(len(PASTE_END) - 1, 0, -1)
                    if self._paste.endswith(PASTE_END[:n])
                ),
                0,
            )
        text = self._paste[: len(self._paste) - keep]
        self._paste = self._paste[len(self._paste) - keep :]
        self._text(self._clean_paste(text))

    def _clean_paste(self, text: str) -> str:
        """Pasted line ends (CR, as terminals send them, or CR LF, LF) become LF;
        other control characters but tab are dropped."""
        out = []
        for ch in text:
            after_cr, self._paste_after_cr = self._paste_after_cr, ch == "\r"
            if ch == "\r" or (ch == "\n" and not after_cr):
                out.append("\n")
            elif ch == "\t" or ch.isprintable():
                out.append(ch)
        return "".join(out)


def reply_text(prompt: str) -> tuple[str, str]:
    """The deterministic answer to ``prompt``: what was said, and its size."""
    lines = prompt.count("\n") + 1
    return (
        f"You said: {prompt}\n",
        f"({_plural(len(prompt), 'character')}, {_plural(lines, 'line')})\n",
    )


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def terminal_size() -> str:
    """``ROWSxCOLS`` of the first of stdin, stdout, stderr that is a terminal."""
    for fd in (0, 1, 2):
        try:
            size = os.get_terminal_size(fd)
        except OSError:
            continue
        return f"{size.lines}x{size.columns}"
    return "unknown"


class Closed(AcpError):
    """The terminal (or input) is gone: end quietly."""


class Interrupted(AcpError):
    """The user pressed Ctrl-C during a reply."""


class Terminated(AcpError):
    """SIGTERM or SIGHUP: unwind so the tty is restored on the way out."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class Screen:
    """Output: a raw tty needs CR LF and may have colour; a pipe gets neither."""

    def __init__(self, fd: int, tty: bool) -> None:
        self.fd = fd
        self.tty = tty
        self.newline = "\r\n" if tty else "\n"

    def write(self, text: str) -> None:
        if self.tty:
            text = text.replace("\n", "\r\n")
        _write_all(self.fd, text.encode())

    def write_bytes(self, data: bytes) -> None:
        _write_all(self.fd, data)

    def sgr(self, code: str) -> str:
        """An SGR (colour) escape, or nothing off a tty."""
        return f"\x1b[{code}m" if self.tty else ""

    def style(self, text: str, code: str) -> str:
        return f"{self.sgr(code)}{text}{self.sgr('0')}"

    def control(self, seq: str) -> None:
        """Cursor and erase sequences: tty only."""
        if self.tty:
            _write_all(self.fd, seq.encode())


#: Waits up to the given seconds; True when the user interrupted meanwhile.
Waiter = Callable[[float], bool]


def sleep_waiter(seconds: float) -> bool:
    """Pipe mode has no keys to watch: Ctrl-C arrives as SIGINT (KeyboardInterrupt)."""
    time.sleep(seconds)
    return False


class Responder:
    """Answers submitted prompts: the part that stands in for the agent."""

    def __init__(self, screen: Screen, wait: Waiter, live: bool) -> None:
        self.screen = screen
        self.wait = wait
        self.live = live  # spinner and paced streaming (tty), or plain and at once (pipe)

    def answer(self, prompt: str) -> int | None:
        """Reply to one prompt; an exit status means quit with it."""
        try:
            return self._dispatch(prompt)
        except (Interrupted, KeyboardInterrupt):
            self.screen.write(
                self.screen.sgr("0") + "^C\n" + self.screen.style("interrupted", "33") + "\n"
            )
            return None

    def _dispatch(self, prompt: str) -> int | None:
        word, _, arg = prompt.strip().partition(" ")
        arg = arg.strip()
        if word == "/exit" and not arg:
            return 0
        if word == "/help":
            self.screen.write(HELP)
        elif word == "/size":
            self.screen.write(f"size {terminal_size()}\n")
        elif word in _NUMERIC:
            return self._numeric(word, arg)
        else:
            self._reply(prompt)
        return None

    def _numeric(self, word: str, arg: str) -> int | None:
        name, low, high = _NUMERIC[word]
        n = int(arg) if arg.isdigit() else -1
        if not low <= n <= high:
            self.screen.write(f"usage: {word} {name}\n")
            return None
        if word == "/exitcode":
            return n
        (self._slow if word == "/slow" else self._flood)(n)
        return None

    def _pause(self, seconds: float) -> None:
        if self.wait(seconds):
            raise Interrupted

    def _reply(self, prompt: str) -> None:
        said, size = reply_text(prompt)
        self._think()
        self._stream(said, "36")
        self._stream(size, "2")

    def _think(self) -> None:
        """A spinner for a moment, erased afterwards, as agent TUIs show while waiting."""
        if not self.live:
            return
        try:
            for i in range(THINK_FRAMES):
                frame = self.screen.style(SPINNER[i % len(SPINNER)], "35")
                self.screen.write(f"\r{frame} thinking…")
                self._pause(FRAME_SECONDS)
        finally:
            self.screen.control("\r\x1b[2K")

    def _stream(self, text: str, colour: str) -> None:
        """Text in small pieces so it looks live (a long text in bigger ones: under ~1 s)."""
        if not self.live:
            self.screen.write(self.screen.style(text, colour))
            return
        step = max(4, len(text) // 50)
        self.screen.write(self.screen.sgr(colour))
        for i in range(0, len(text), step):
            self.screen.write(text[i : i + step])
            self._pause(CHUNK_SECONDS)
        self.screen.write(self.screen.sgr("0"))

    def _slow(self, n: int) -> None:
        for i in range(1, n + 1):
            self.screen.write(f"line {i} of {n}\n")
            self._pause(SLOW_LINE_SECONDS)
        self.screen.write("slow done\n")

    def _flood(self, total: int) -> None:
        """Exactly ``total`` bytes, in big writes, still checking for Ctrl-C between them."""
        line = (FLOOD_LINE + self.screen.newline).encode()
        block = line * FLOOD_LINES_PER_WRITE
        left = total
        while left > 0:
            piece = block[: min(left, len(block))]
            self.screen.write_bytes(piece)
            left -= len(piece)
            self._pause(0)
        ended_mid_line = total % len(line) != 0
        self.screen.write(("\n" if ended_mid_line else "") + "flood done\n")


class Keyboard:
    """Raw-mode input: tty bytes parsed into events, queued so keys typed
    during a reply are not lost, and Ctrl-C can be picked out of them."""

    def __init__(self, fd: int, parser: InputParser) -> None:
        self.fd = fd
        self.parser = parser
        self.pending: deque[Event] = deque()

    def next(self) -> Event:
        """The next event, waiting for one as long as it takes."""
        while not self.pending:
            self._read()
        return self.pending.popleft()

    def wait_interrupt(self, seconds: float) -> bool:
        """Wait up to ``seconds`` for Ctrl-C (True), keeping every other key for later."""
        deadline = time.monotonic() + seconds
        while (INTERRUPT,) not in self.pending:
            remaining = max(0.0, deadline - time.monotonic())
            if not select.select([self.fd], [], [], remaining)[0]:
                return False
            self._read()
        self.pending.remove((INTERRUPT,))
        return True

    def _read(self) -> None:
        try:
            data = os.read(self.fd, 4096)
        except OSError as exc:  # Linux reports a hung-up tty as EIO
            if exc.errno != errno.EIO:
                raise
            data = b""
        if not data:
            raise Closed
        self.pending.extend(self.parser.feed(data))


def _width(ch: str) -> int:
    """Columns a character takes on screen (tabs are echoed as one space)."""
    if unicodedata.combining(ch):
        return 0
    return 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1


class Editor:
    """The line being typed, echoed the way the terminal would show it."""

    def __init__(self, screen: Screen) -> None:
        self.screen = screen
        self.text = ""

    def insert(self, text: str) -> None:
        self.text += text
        self.screen.write(text.replace("\t", " "))

    def backspace(self) -> None:
        if not self.text:
            return
        ch, self.text = self.text[-1], self.text[:-1]
        if ch == "\n":  # back to the end of the previous (pasted) line
            last = self.text.rsplit("\n", 1)[-1]
            col = sum(map(_width, last)) + (0 if "\n" in self.text else len(PROMPT))
            self.screen.write("\x1b[A\r" + (f"\x1b[{col}C" if col else ""))
        else:
            w = _width(ch)
            self.screen.write("\b" * w + " " * w + "\b" * w)

    def clear(self) -> None:
        self.screen.write("\r\x1b[2K" + "\x1b[A\x1b[2K" * self.text.count("\n") + PROMPT)
        self.text = ""

    def take(self) -> str:
        text, self.text = self.text, ""
        return text


class TtyApp:
    """The interactive program on a raw tty: banner, prompt, editing, replies."""

    def __init__(self, in_fd: int, out_fd: int, bracketed_paste: bool, banner_delay: float) -> None:
        self.screen = Screen(out_fd, tty=True)
        self.keys = Keyboard(in_fd, InputParser(bracketed_paste))
        self.editor = Editor(self.screen)
        self.responder = Responder(self.screen, self.keys.wait_interrupt, live=True)
        self.banner_delay = banner_delay

    def run(self) -> int:
        s = self.screen
        s.write(
            s.style(TITLE, "1;32")
            + "\n"
            + s.style(HINT, "2")
            + "\n"
            + s.style(COMMANDS_LINE, "2")
            + "\n"
        )
        time.sleep(self.banner_delay)
        s.write(PROMPT)
        while True:
            try:
                event = self.keys.next()
            except KeyboardInterrupt:  # a SIGINT from outside: same as the key
                event = (INTERRUPT,)
            status = self.handle(event)
            if status is not None:
                return status

    def handle(self, event: Event) -> int | None:
        """Apply one event at the prompt; an exit status means quit."""
        kind = event[0]
        if kind == TEXT:
            self.editor.insert(event[1])
        elif kind == BACKSPACE:
            self.editor.backspace()
        elif kind == CLEAR:
            self.editor.clear()
        elif kind == INTERRUPT:
            self.editor.take()
            self.screen.write("^C\n" + PROMPT)
        elif kind == EOF and not self.editor.text:
            self.screen.write("\n")
            return 0
        elif kind == SUBMIT:
            return self._submit()
        return None

    def _submit(self) -> int | None:
        prompt = self.editor.take()
        self.screen.write("\n")
        if prompt.strip():
            status = self.responder.answer(prompt)
            if status is not None:
                return status
        self.screen.write(PROMPT)
        return None


def _write_nonblocking(fd: int, data: bytes) -> None:
    """A last write that must not hang when nobody reads the terminal any more."""
    with contextlib.suppress(OSError):
        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        try:
            fcntl.fcntl(fd, fcntl.F_SETFL, flags | os.O_NONBLOCK)
            os.write(fd, data)
        finally:
            fcntl.fcntl(fd, fcntl.F_SETFL, flags)  # the fd may be shared with a shell


@contextlib.contextmanager
def _signals_ignored(*signums: int) -> Iterator[None]:
    """Keep a second SIGTERM/SIGHUP from cutting the clean-up short."""
    previous = {s: signal.signal(s, signal.SIG_IGN) for s in signums}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


@contextlib.contextmanager
def raw_terminal(in_fd: int, out_fd: int, bracketed_paste: bool) -> Iterator[None]:
    """Raw mode (and bracketed paste) for the duration, restored however we leave."""
    saved = termios.tcgetattr(in_fd)
    try:
        tty.setraw(in_fd, termios.TCSANOW)  # TCSANOW: keep keys typed before we were ready
        if bracketed_paste:
            _write_all(out_fd, PASTE_ON.encode())
        yield
    finally:
        with _signals_ignored(signal.SIGTERM, signal.SIGHUP):
            _write_nonblocking(
                out_fd, ("\x1b[0m" + (PASTE_OFF if bracketed_paste else "")).encode()
            )
            with contextlib.suppress(OSError, termios.error):  # the terminal may be gone
                termios.tcsetattr(in_fd, termios.TCSANOW, saved)


def _on_terminate(signum: int, frame: FrameType | None) -> None:
    raise Terminated(signum)


def _on_resize(signum: int, frame: FrameType | None) -> None:
    """Nothing to redraw: ``/size`` reads the size when asked. Handling the
    signal (rather than trusting its default) keeps a resize harmless at any point."""


def _run_tty(args: argparse.Namespace) -> int:
    signal.signal(signal.SIGWINCH, _on_resize)
    paste = not args.no_bracketed_paste
    with raw_terminal(0, 1, paste):
        return TtyApp(0, 1, paste, args.banner_delay).run()


def _run_lines(args: argparse.Namespace) -> int:
    screen = Screen(1, tty=False)
    responder = Responder(screen, sleep_waiter, live=False)
    screen.write(f"{TITLE}\n{HINT}\n{COMMANDS_LINE}\n")
    time.sleep(args.banner_delay)
    for raw in iter(sys.stdin.buffer.readline, b""):
        prompt = raw.decode("utf-8", "replace").rstrip("\r\n")
        if prompt.strip():
            status = responder.answer(prompt)
            if status is not None:
                return status
    return 0


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m acp_kernel.demo.cli",
        description="A demo agent TUI (no model) for passthrough terminals.",
    )
    parser.add_argument(
        "--no-bracketed-paste",
        action="store_true",
        help="do not enable bracketed paste (mode 2004)",
    )
    parser.add_argument(
        "--banner-delay",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="wait before the first prompt",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run the demo CLI; the return value is the exit status."""
    args = _parse_args(argv)
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _on_terminate)
    try:
        return _run(args)
    finally:  # the status is settled: a late hang-up must not become a traceback
        for signum in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, signal.SIG_IGN)


def _run(args: argparse.Namespace) -> int:
    try:
        return _run_tty(args) if os.isatty(0) else _run_lines(args)
    except Terminated as exc:
        return 128 + exc.signum
    except KeyboardInterrupt:
        return 130
    except (Closed, BrokenPipeError):
        return 0
    except OSError as exc:
        if exc.errno == errno.EIO:  # the terminal went away under a write
            return 0
        raise


if __name__ == "__main__":
    sys.exit(main())
