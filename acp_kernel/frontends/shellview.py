"""How a ``%%shell`` cell's output reaches the page without flooding it.

A notebook re-renders a stream output on every append: a megabyte of output
in many messages freezes JupyterLab for seconds. So the cell shows a window
(:class:`~acp_kernel.services.output_window.OutputWindow`): the first lines,
streamed as they come but coalesced (one ``stream`` message per
:data:`FLUSH_SECONDS` at most); then, where the frontend applies updates, a
one-line status (lines so far, the last line) updated at most every
:data:`STATUS_SECONDS`; at the end that status becomes the cut notice (lines
and bytes left out, the file with the whole output) and the last lines
follow it. A frontend that only appends (a console) gets the notice in the
stream instead.

The whole output of a cut cell is saved in a temp file (:class:`Spool`, at
most ``--save-limit`` bytes; written from the moment the window cuts, so a
short output makes no file; the last :data:`KEEP_FILES` files of the process
are kept, all removed at exit) and its path shown: the ACP kernel runs no
Python, so that is how a user gets the rest; the magics also return it
(``ShellResult.full_output()``).
"""

from __future__ import annotations

import asyncio
import atexit
import os
import shutil
import tempfile
from collections.abc import Callable
from typing import Any, Protocol

from ..safe import bundle, plain, visible_controls
from ..services.output_buffer import incomplete_tail
from ..services.output_window import Cut, OutputWindow

#: At most one stream message per this many seconds while the head streams.
FLUSH_SECONDS = 0.1
#: At most one status update per this many seconds once the output is cut.
STATUS_SECONDS = 0.5
#: Bytes of a cut output saved to its file by default.
SAVE_LIMIT = 64 * 1024 * 1024
#: Saved outputs kept per process (older files are removed).
KEEP_FILES = 20


class Sink(Protocol):
    def display(self, data: dict, metadata: dict | None = None, display_id: str | None = None) -> None: ...

    def update(self, data: dict, metadata: dict | None = None, display_id: str = "") -> None: ...


# -- the saved output ------------------------------------------------------------------------

_dir: str | None = None
_count = 0


def _spool_dir() -> str:
    global _dir
    if _dir is None or not os.path.isdir(_dir):
        _dir = tempfile.mkdtemp(prefix="acp-shell-")
        atexit.register(shutil.rmtree, _dir, True)
    return _dir


class Spool:
    """The output as it comes, into a temp file of at most ``limit`` bytes."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.path: str | None = None
        self.written = 0
        self.truncated = False
        self._f: Any = None

    def write(self, text: str) -> None:
        if self.limit <= 0 or self.truncated:
            return
        data = text.encode("utf-8", "replace")
        room = self.limit - self.written
        if len(data) > room:
            data = data[:room]
            data = data[: len(data) - incomplete_tail(data)]
            self.truncated = True
        if self._f is None:
            global _count
            _count += 1
            self.path = os.path.join(_spool_dir(), f"output-{os.getpid()}-{_count}.txt")
            # 0600 (in mkdtemp's 0700 folder): the output may hold whatever the command printed
            self._f = os.fdopen(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb")
        self._f.write(data)
        self.written += len(data)

    def close(self, keep: bool) -> str | None:
        """Close; the path if kept (older saved files beyond :data:`KEEP_FILES` go)."""
        if self._f is not None:
            self._f.close()
            self._f = None
        if self.path is None:
            return None
        if not keep:
            _unlink(self.path)
            return None
        _prune(os.path.dirname(self.path))
        return self.path


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _prune(folder: str) -> None:
    try:
        files = sorted((os.path.join(folder, n) for n in os.listdir(folder)), key=os.path.getmtime)
    except OSError:
        return
    for old in files[:-KEEP_FILES]:
        _unlink(old)


# -- words -----------------------------------------------------------------------------------


def _size(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


def notice(cut: Cut, saved: str | None, spool: Spool | None = None) -> str:
    """The one line between head and tail: what was left out, where it all is."""
    lines = f"{cut.omitted_lines:,} line{'s' if cut.omitted_lines != 1 else ''}"
    what = f"[… {lines} ({_size(cut.omitted_bytes)}) not shown"
    if cut.mid_line:
        what += ", a line cut at the edge"
    if saved:
        first = f"the first {_size(spool.written)} of it" if spool is not None and spool.truncated else "all of it"
        what += f"; {first} in {visible_controls(saved, keep_newlines=False)}"
    elif spool is not None and spool.limit <= 0:
        what += "; not saved (--save-limit 0)"
    tail_lines = cut.tail.count("\n") + (1 if cut.tail and not cut.tail.endswith("\n") else 0)
    what += f"; the last {tail_lines:,} follow …]" if cut.tail else " …]"
    return what


def status_line(window: OutputWindow) -> str:
    """The live line once the head is full."""
    lines = window.total_newlines - window.head_newlines
    text = f"[… {lines:,} more lines ({_size(window.total_bytes - window.head_used)}) so far; the last lines show at the end"
    last = window.last_line(120)
    return text + (f" · {last}]" if last else "]")


# -- the live view ---------------------------------------------------------------------------


class LiveWindow:
    """Feeds the window from the terminal's output and writes what it releases,
    coalesced; owns the status display and the spool. Runs on the event loop."""

    def __init__(self, opts: Any, write: Callable[[str], None], display: Sink | None) -> None:
        self.window = OutputWindow(opts.head, opts.tail)
        self.spool = Spool(opts.save_limit)
        self.write = write
        self.display = display
        self._out: list[str] = []
        self._timer: asyncio.TimerHandle | None = None
        self._fed = False  # output arrived since the last tick
        self._status_id: str | None = None
        self._early: list[str] = []  # the output until the window cuts

    def _save_early(self) -> None:
        for text in self._early:
            self.spool.write(text)
        self._early.clear()

    def feed(self, text: str) -> None:
        was = self.window.cutting
        if was:
            self.spool.write(text)
        else:
            self._early.append(text)  # bounded: the head budget, plus one unfinished line that fits it
        shown = self.window.feed(text)
        if shown:
            self._out.append(shown)
        self._fed = True
        if self.window.cutting and not was:
            self._save_early()  # a file only for outputs that are cut
            self._flush()  # the head, before the status below it
            self._status()
        if self._timer is None:
            delay = STATUS_SECONDS if self.window.cutting else FLUSH_SECONDS
            self._timer = asyncio.get_running_loop().call_later(delay, self._tick)

    def _tick(self) -> None:
        self._timer = None
        if self.window.cutting:
            self._status()
            return
        if not self._fed:  # quiet: show an unfinished line (a prompt, a progress bar)
            self._out.append(self.window.flush())
        self._fed = False
        self._flush()
        if self.window._pending:
            self._timer = asyncio.get_running_loop().call_later(FLUSH_SECONDS, self._tick)

    def _flush(self) -> None:
        text = "".join(self._out)
        self._out.clear()
        if text:
            self.write(text)

    def _status(self, text: str | None = None) -> None:
        if self.display is None:
            return
        data = bundle(plain_text=plain(status_line(self.window) if text is None else text))
        if self._status_id is None:
            import uuid

            self._status_id = f"acp-shell-{uuid.uuid4().hex}"
            self.display.display(data, display_id=self._status_id)
        else:
            self.display.update(data, display_id=self._status_id)

    def stop(self) -> None:
        """No more ticks (the process ended, or the cell was interrupted)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def finish(self, keep_file: bool = False) -> tuple[Cut, str | None]:
        """Show the rest: head, notice, tail. Returns the cut and the saved file."""
        self.stop()
        rest, cut = self.window.finish()
        if rest:
            self._out.append(rest)
        self._flush()
        if keep_file:  # the result's --limit cut what the page showed whole
            self._save_early()
        saved = self.spool.close(keep=cut.cut or keep_file)
        if cut.cut:
            line = notice(cut, saved, self.spool)
            if self._status_id is not None:
                self._status(line)
            else:
                reset = "\x1b[0m" if cut.head_escapes else ""
                self.write(reset + ("\n" if cut.head_open else "") + line + "\n")
        elif self._status_id is not None:
            self._status("")  # nothing left out after all: the status goes blank
        if cut.tail:
            self.write(cut.tail)
        return cut, saved
