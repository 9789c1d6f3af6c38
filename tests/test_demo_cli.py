"""The demo CLI: its pure input parser, then the real program under a real PTY and a pipe."""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from ptyprocess import PtyProcess

from acp_kernel.protocol import proctree
from acp_kernel.demo.cli import (
    BACKSPACE,
    CLEAR,
    EOF,
    INTERRUPT,
    PASTE_OFF,
    PASTE_ON,
    SUBMIT,
    TEXT,
    InputParser,
    reply_text,
)

REPO = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "acp_kernel.demo.cli"]
ENV = {
    **os.environ,
    "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    "TERM": "xterm-256color",
}
#: Generous: a deadline that fails the test, not an expected duration.
DEADLINE = 30.0  # generous: a waited event, never a sleep; 10 s was too short under a full suite (CI)


# --- the parser --------------------------------------------------------------


def feed_all(chunks: list[bytes], bracketed_paste: bool = True) -> list[tuple]:
    """Events from feeding ``chunks`` one by one, adjacent text merged (as one feed would)."""
    parser = InputParser(bracketed_paste)
    events: list[tuple] = []
    for chunk in chunks:
        for event in parser.feed(chunk):
            if event[0] == TEXT and events and events[-1][0] == TEXT:
                events[-1] = (TEXT, events[-1][1] + event[1])
            else:
                events.append(event)
    return events


def bytewise(data: bytes) -> list[bytes]:
    return [data[i : i + 1] for i in range(len(data))]


def test_typing_and_enter():
    assert InputParser().feed(b"hello\r") == [(TEXT, "hello"), (SUBMIT,)]
    assert InputParser().feed(b"hi\n") == [(TEXT, "hi"), (SUBMIT,)]


def test_cr_lf_is_one_enter_even_split():
    assert feed_all([b"a\r", b"\nb\r\n"]) == [(TEXT, "a"), (SUBMIT,), (TEXT, "b"), (SUBMIT,)]
    assert feed_all([b"\r\r"]) == [(SUBMIT,), (SUBMIT,)]


def test_control_keys():
    events = InputParser().feed(b"\x03\x04\x7f\x08\x15")
    assert events == [(INTERRUPT,), (EOF,), (BACKSPACE,), (BACKSPACE,), (CLEAR,)]


def test_other_control_bytes_are_ignored():
    assert InputParser().feed(b"a\x00\x01\x07\t\x0cb") == [(TEXT, "ab")]


@pytest.mark.parametrize(
    "keys",
    [b"\x1b[A", b"\x1b[B", b"\x1b[1;5C", b"\x1bOP", b"\x1b[3~", b"\x1b[<0;12;5M", b"\x1bx"],
    ids=["up", "down", "ctrl-right", "f1", "delete", "mouse", "alt-x"],
)
def test_escape_sequences_never_become_text(keys):
    assert InputParser().feed(b"a" + keys + b"b") == [(TEXT, "ab")]
    assert feed_all(bytewise(b"a" + keys + b"b")) == [(TEXT, "ab")]


def test_escape_then_a_control_key_keeps_the_key():
    assert InputParser().feed(b"\x1b\x03") == [(INTERRUPT,)]
    assert InputParser().feed(b"\x1b[1\r") == [(SUBMIT,)]


def test_utf8_split_across_reads():
    data = "héllo ✓".encode()
    assert feed_all(bytewise(data)) == [(TEXT, "héllo ✓")]


PASTE = b"\x1b[200~line1\rline2\r\nline3\nend\x1b[201~\r"
PASTE_EVENTS = [(TEXT, "line1\nline2\nline3\nend"), (SUBMIT,)]


def test_paste_keeps_newlines_as_text():
    assert InputParser().feed(PASTE) == PASTE_EVENTS


@pytest.mark.parametrize("cut", range(1, len(PASTE)))
def test_paste_split_anywhere(cut):
    assert feed_all([PASTE[:cut], PASTE[cut:]]) == PASTE_EVENTS


def test_paste_fed_byte_by_byte():
    assert feed_all(bytewise(PASTE)) == PASTE_EVENTS


def test_paste_is_streamed_before_its_end_marker():
    parser = InputParser()
    assert parser.feed(b"\x1b[200~abc\x1b[20") == [(TEXT, "abc")]  # the marker's start held back
    assert parser.in_paste
    assert parser.feed(b"1~x") == [(TEXT, "x")]
    assert not parser.in_paste


def test_false_end_marker_inside_paste_is_text():
    assert InputParser().feed(b"\x1b[200~a\x1b[20x\x1b[201~") == [(TEXT, "a[20x")]


def test_keys_inside_a_paste_are_literal():
    events = InputParser().feed(b"\x1b[200~a\x03b\x04c\x7fd\tz\x1b[201~")
    assert events == [(TEXT, "abcd\tz")]


def test_without_bracketed_paste_the_markers_are_unknown_escapes():
    events = InputParser(bracketed_paste=False).feed(b"\x1b[200~one\rtwo\x1b[201~")
    assert events == [(TEXT, "one"), (SUBMIT,), (TEXT, "two")]


def test_reply_text():
    assert reply_text("hello") == ("You said: hello\n", "(5 characters, 1 line)\n")
    assert reply_text("a\nb") == ("You said: a\nb\n", "(3 characters, 2 lines)\n")
    assert reply_text("x")[1] == "(1 character, 1 line)\n"


# --- the program under a PTY -------------------------------------------------


class Cli:
    """A process under a real PTY; output is read on demand, against deadlines."""

    def __init__(self, argv: list[str], dimensions: tuple[int, int] = (24, 80)) -> None:
        self.proc = PtyProcess.spawn(argv, cwd=str(REPO), env=ENV, dimensions=dimensions)
        self.proc.delayafterclose = 0
        self.output = b""
        self.pos = 0  # what expect() has consumed
        self.eof = False

    def send(self, data: bytes) -> None:
        os.write(self.proc.fd, data)

    def _read(self, timeout: float) -> None:
        if self.eof or not select.select([self.proc.fd], [], [], max(0.0, timeout))[0]:
            return
        try:
            chunk = os.read(self.proc.fd, 65536)
        except OSError:  # EIO: every slave fd is closed
            chunk = b""
        self.output += chunk
        self.eof = not chunk

    def expect(self, needle: bytes, timeout: float = DEADLINE) -> bytes:
        """Read until ``needle`` appears after what was consumed; return all read up to its end."""
        start = self.pos
        self.expect_re(re.escape(needle), timeout)
        return self.output[start : self.pos]

    def expect_re(self, pattern: bytes, timeout: float = DEADLINE) -> re.Match[bytes]:
        deadline = time.monotonic() + timeout
        while not (match := re.compile(pattern).search(self.output, self.pos)):
            if self.eof or time.monotonic() >= deadline:
                rest = self.output[self.pos :]
                pytest.fail(
                    f"no {pattern!r} (eof={self.eof}); output since the last match:\n{rest!r}"
                )
            self._read(deadline - time.monotonic())
        self.pos = match.end()
        return match

    def exit_status(self, timeout: float = DEADLINE) -> int:
        """Read to the end, reap the process; its exit code, or -signal."""
        deadline = time.monotonic() + timeout
        while not self.eof:
            if time.monotonic() >= deadline:
                pytest.fail(f"no end of output; last output: {self.output[-500:]!r}")
            self._read(deadline - time.monotonic())
        while self.proc.isalive():  # output closed: the exit is a moment away
            if time.monotonic() >= deadline:
                pytest.fail("the process did not exit")
            time.sleep(0.005)
        status = self.proc.exitstatus
        return -self.proc.signalstatus if status is None else status

    def close(self) -> None:
        """Kill whatever is left of the process tree (by pid), reap, close the PTY."""
        pid = self.proc.pid
        proctree.signal_all(0, proctree.tree(pid) | {pid}, signal.SIGKILL)
        deadline = time.monotonic() + DEADLINE
        while self.proc.isalive() and time.monotonic() < deadline:
            time.sleep(0.005)
        self.proc.close(force=True)


@pytest.fixture
def spawn() -> Iterator:
    started: list[Cli] = []

    def start(
        *args: str, argv: list[str] | None = None, dimensions: tuple[int, int] = (24, 80)
    ) -> Cli:
        cli = Cli(argv or [*CLI, *args], dimensions)
        started.append(cli)
        return cli

    yield start
    for cli in started:
        cli.close()


def ready(cli: Cli) -> None:
    cli.expect(b"Demo CLI (acp-kernel)")
    cli.expect(b"\r\n> ")


def test_banner_enables_bracketed_paste(spawn):
    cli = spawn()
    head = cli.expect(b"\r\n> ")
    assert head.startswith(PASTE_ON.encode())
    assert b"\x1b[1;32mDemo CLI (acp-kernel)\x1b[0m\r\n" in head
    assert b"Ctrl-C interrupts a reply; Ctrl-D or /exit quits." in head


def test_typed_prompt_gets_a_streamed_reply(spawn):
    cli = spawn()
    ready(cli)
    cli.send(b"hello\r")
    cli.expect(b"hello\r\n")  # echoed
    cli.expect(b"thinking")  # the spinner
    cli.expect(b"You said: hello\r\n")
    cli.expect(b"(5 characters, 1 line)\r\n")
    cli.expect(b"> ")


def test_bracketed_paste_is_one_multiline_prompt(spawn):
    cli = spawn()
    ready(cli)
    cli.send(b"\x1b[200~line1\nline2\x1b[201~")
    cli.expect(b"line1\r\nline2")  # echoed as a continuation, not submitted
    cli.send(b"\r")
    cli.expect(b"You said: line1\r\nline2\r\n")
    cli.expect(b"(11 characters, 2 lines)")


def test_line_editing(spawn):
    cli = spawn()
    ready(cli)
    cli.send(b"abc\x03")  # Ctrl-C at the prompt drops the line
    cli.expect(b"abc^C\r\n> ")
    cli.send(b"xyz\x15")  # Ctrl-U
    cli.expect(b"\r\x1b[2K> ")
    cli.send(b"he\x1b[Dy\x7f\x08i\r")  # an arrow key ignored, two backspaces
    cli.expect(b"\x08 \x08\x08 \x08i\r\n")
    cli.expect(b"You said: hi\r\n")


def test_ctrl_c_interrupts_a_reply_promptly(spawn):
    cli = spawn()
    ready(cli)
    cli.send(b"/slow 500\r")
    cli.expect(b"line 1 of 500\r\n")
    cli.send(b"\x03")
    shown = cli.expect(b"^C\r\n\x1b[33minterrupted\x1b[0m\r\n> ")
    last = max(int(n) for n in re.findall(rb"line (\d+) of 500", shown) or [1])
    assert last < 50, f"{last} lines after Ctrl-C"
    cli.send(b"after\r")  # and the CLI goes on
    cli.expect(b"You said: after")


def test_ctrl_c_interrupts_the_spinner(spawn):
    cli = spawn()
    ready(cli)
    cli.send(b"hello\r")
    cli.expect(b"thinking")
    cli.send(b"\x03")
    shown = cli.expect(b"interrupted")
    assert b"You said" not in shown


def test_keys_typed_during_a_reply_wait_for_the_prompt(spawn):
    cli = spawn()
    ready(cli)
    cli.send(b"/slow 3\r")
    cli.expect(b"line 1 of 3")
    cli.send(b"queued\r")
    cli.expect(b"slow done\r\n> ")
    cli.expect(b"You said: queued")


def test_exitcode(spawn):
    cli = spawn()
    ready(cli)
    cli.send(b"/exitcode 3\r")
    assert cli.exit_status() == 3
    assert cli.output.endswith(PASTE_OFF.encode())


def test_exit_and_ctrl_d(spawn):
    first, second = spawn(), spawn()
    ready(first)
    ready(second)
    first.send(b"/exit\r")
    second.send(b"\x04")
    assert first.exit_status() == 0
    assert second.exit_status() == 0


def test_size_follows_resizes(spawn):
    cli = spawn()
    ready(cli)
    cli.send(b"/size\r")
    cli.expect(b"size 24x80\r\n")
    cli.proc.setwinsize(30, 100)  # SIGWINCH
    cli.send(b"/size\r")
    cli.expect(b"size 30x100\r\n")


def test_flood_writes_exactly_the_bytes_asked(spawn):
    cli = spawn()
    ready(cli)
    cli.send(b"/flood 81000\r")
    cli.expect(b"/flood 81000\r\n")
    body = cli.expect(b"flood done\r\n> ")
    assert body == (b"x" * 79 + b"\r\n") * 1000 + b"flood done\r\n> "


def test_flood_can_be_interrupted(spawn):
    cli = spawn()
    ready(cli)
    cli.send(b"/flood 100000000\r")
    cli.expect(b"x" * 79)
    cli.send(b"\x03")
    cli.expect(b"^C\r\n\x1b[33minterrupted", timeout=DEADLINE)


def test_usage_errors(spawn):
    cli = spawn()
    ready(cli)
    cli.send(b"/slow many\r")
    cli.expect(b"usage: /slow N\r\n> ")
    cli.send(b"/exitcode 300\r")
    cli.expect(b"usage: /exitcode N\r\n> ")


def test_no_bracketed_paste(spawn):
    cli = spawn("--no-bracketed-paste")
    head = cli.expect(b"\r\n> ")
    assert PASTE_ON.encode() not in head
    cli.send(b"\x1b[200~one\rtwo\x1b[201~\r")  # the markers are dropped; each line submits
    cli.expect(b"You said: one")
    cli.expect(b"You said: two")
    cli.send(b"/exit\r")
    assert cli.exit_status() == 0
    assert PASTE_OFF.encode() not in cli.output


def test_banner_delay(spawn):
    cli = spawn("--banner-delay", "0.3")
    cli.expect(b"Demo CLI (acp-kernel)")
    shown = time.monotonic()
    cli.expect(b"> ")
    assert time.monotonic() - shown > 0.2


#: Runs the CLI as its child on the same tty, then reports whether the tty
#: settings came back exactly (the CLI's own PTY is gone once it exits).
WRAPPER = """\
import subprocess, sys, termios
before = termios.tcgetattr(0)
child = subprocess.Popen([sys.executable, "-m", "acp_kernel.demo.cli"])
print(f"pid={child.pid}.", flush=True)
rc = child.wait()
print(f"rc={rc} restored={termios.tcgetattr(0) == before}.", flush=True)
"""


@pytest.mark.parametrize(
    ("how", "status"),
    [("ctrl-d", 0), ("sigterm", 128 + signal.SIGTERM), ("sighup", 128 + signal.SIGHUP)],
)
def test_tty_is_restored_on_exit(spawn, how, status):
    cli = spawn(argv=[sys.executable, "-c", WRAPPER])
    pid = int(cli.expect_re(rb"pid=(\d+)\.").group(1))
    cli.expect(PASTE_ON.encode())
    cli.expect(b"\r\n> ")
    if how == "ctrl-d":
        cli.send(b"\x04")
    else:
        os.kill(pid, signal.SIGTERM if how == "sigterm" else signal.SIGHUP)
    cli.expect(PASTE_OFF.encode())
    cli.expect(f"rc={status} restored=True.".encode())
    assert b"Traceback" not in cli.output
    assert cli.exit_status() == 0


def test_exits_when_the_terminal_closes(spawn):
    cli = spawn()
    ready(cli)
    cli.proc.fileobj.close()  # the hang-up a closed terminal window gives
    deadline = time.monotonic() + DEADLINE
    while cli.proc.isalive():
        assert time.monotonic() < deadline, "the CLI outlived its terminal"
        time.sleep(0.005)
    # SIGHUP from the kernel, or EIO on read if that comes first: both are clean exits.
    assert cli.proc.exitstatus in (0, 128 + signal.SIGHUP), cli.proc.status


# --- the program on pipes ----------------------------------------------------


def run_piped(text: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        CLI,
        input=text,
        capture_output=True,
        text=True,
        cwd=REPO,
        env=ENV,
        timeout=DEADLINE,
        check=False,
    )


def test_pipe_mode_answers_each_line():
    done = run_piped("hi\n\nsecond line\n")
    assert done.returncode == 0, done.stderr
    assert "You said: hi\n(2 characters, 1 line)\n" in done.stdout
    assert "You said: second line\n" in done.stdout
    assert "\x1b" not in done.stdout and "\r" not in done.stdout


def test_pipe_mode_commands():
    done = run_piped("/size\n/slow 2\n/flood 200\n/exitcode 7\nnever\n")
    assert done.returncode == 7
    assert "size unknown\nline 1 of 2\nline 2 of 2\nslow done\n" in done.stdout
    flood = "x" * 79 + "\n"
    assert flood * 2 + "x" * 40 + "\nflood done\n" in done.stdout
    assert "never" not in done.stdout
