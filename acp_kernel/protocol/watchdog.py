"""Nothing the kernel started outlives it, not even after ``kill -9``.

A kernel killed with SIGKILL (or by the OOM killer) runs no ``atexit`` hook
and no ``finally``: the agent, its children and every terminal would live on,
re-parented to init. ``prctl(PR_SET_PDEATHSIG)`` does not fit: it needs a
``preexec_fn`` (unsafe in a process with threads, as a kernel is), fires when
the *thread* that forked exits rather than the process, and reaches only the
direct child, not the tree below it.

So the kernel starts one tiny **watchdog** process (stdlib only, about 10 MB)
and keeps the write end of a pipe to its stdin. The kernel tells it which
process groups to guard (``+PID`` after starting an agent or a terminal in a
new session, ``-PID`` after ending one). When the pipe reads EOF, the kernel
is gone, however it died: the watchdog stops every guarded group (SIGSTOP,
so nobody exits or forks while it looks), collects their trees from
``/proc`` (descendants that started sessions of their own included), SIGKILLs
them all and exits. Between events it re-reads the trees every
``SCAN_INTERVAL`` seconds, so a grandchild that was re-parented away earlier
is still known; pids are remembered with their start time, so a reused pid is
never signalled. The watchdog runs in its own session: a signal to the
kernel's process group (Jupyter's kill) does not take it down first.

Platforms: on Linux all of the above. On macOS and the BSDs the pipe and the
process groups work the same, but there is no ``/proc``: guarded groups are
killed, children that left their group are not found, and a group is
forgotten only when the kernel unwatches it (after ending it). On Windows
:func:`enable` does nothing (a Job object with
``JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE`` would be the tool there).

Only the kernel enables it (:func:`enable`); library users (tests, scripts)
get no extra process, and :func:`watch`/:func:`unwatch` are no-ops for them.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import threading

SCAN_INTERVAL = 1.0

_lock = threading.Lock()
_proc: subprocess.Popen | None = None


# -- the kernel's side ----------------------------------------------------------------


def enable() -> int | None:
    """Start the watchdog for this process (idempotent); returns its pid."""
    global _proc
    if sys.platform == "win32":
        return None
    with _lock:
        if _proc is not None and _proc.poll() is None:
            return _proc.pid
        # the folder holding the acp_kernel package (this file is acp_kernel/protocol/watchdog.py)
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        code = f"import sys; sys.path.insert(0, {root!r}); from acp_kernel.protocol.watchdog import main; main()"
        _proc = subprocess.Popen(
            # -I -S: isolated and without site: a fast start, nothing of the user's imported.
            [sys.executable, "-I", "-S", "-c", code],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
        )
        return _proc.pid


def pid() -> int | None:
    proc = _proc
    return proc.pid if proc is not None and proc.poll() is None else None


def _send(line: str) -> None:
    proc = _proc
    if proc is None or proc.stdin is None:
        return
    with _lock:
        try:
            proc.stdin.write(line.encode())
            proc.stdin.flush()
        except (OSError, ValueError):
            pass  # the watchdog is gone; nothing better to do from here


def watch(pid: int | None) -> None:
    """Guard the process group (and tree) led by ``pid`` until :func:`unwatch`."""
    if pid:
        _send(f"+{pid}\n")


def unwatch(pid: int | None) -> None:
    if pid:
        _send(f"-{pid}\n")


def disable() -> None:
    """Stop the watchdog; whatever it still guards is killed (as at kernel exit)."""
    global _proc
    with _lock:
        proc, _proc = _proc, None
    if proc is not None and proc.stdin is not None:
        try:
            proc.stdin.close()
        except OSError:
            pass
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# -- the watchdog's side (stdlib only, no acp_kernel import) ------------------------------


def _stat(pid: int) -> tuple[int, int, int] | None:
    """(ppid, pgrp, start time) of a live, non-zombie process, else None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    rest = data[data.rfind(b")") + 2:].split()
    if len(rest) < 20 or rest[0] in (b"Z", b"X"):
        return None
    return int(rest[1]), int(rest[2]), int(rest[19])


def _table() -> dict[int, tuple[int, int, int]]:
    out: dict[int, tuple[int, int, int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return out
    for entry in entries:
        if entry.isdigit():
            st = _stat(int(entry))
            if st is not None:
                out[int(entry)] = st
    return out


class _Guard:
    """Guarded groups, by leader pid: the leader's start time and every member
    or descendant seen so far, as {pid: start time}."""

    def __init__(self) -> None:
        self.leaders: dict[int, int | None] = {}
        self.known: dict[int, dict[int, int]] = {}

    def add(self, pid: int) -> None:
        st = _stat(pid)
        self.leaders[pid] = st[2] if st else None
        self.known[pid] = {pid: st[2]} if st else {}

    def remove(self, pid: int) -> None:
        self.leaders.pop(pid, None)
        self.known.pop(pid, None)

    def _owned(self, leader: int) -> bool:
        """False when the leader's pid now names another process (reused)."""
        st = _stat(leader)
        return st is None or st[2] == self.leaders.get(leader)

    def scan(self) -> set[int]:
        """Refresh what each group holds from the process table, forget what
        is gone (and groups with nothing left); return every live pid known."""
        table = _table()
        if not table:  # no /proc: only the groups themselves can be reached
            return set()
        children: dict[int, list[int]] = {}
        for p, (ppid, _, _) in table.items():
            children.setdefault(ppid, []).append(p)
        live: set[int] = set()
        for leader in list(self.leaders):
            start = self.leaders[leader]
            if leader in table and start is not None and table[leader][2] != start:
                self.remove(leader)  # the pid was reused: not ours any more
                continue
            found: set[int] = set()
            stack = [p for p, (_, pgrp, _) in table.items() if pgrp == leader]
            if leader in table:
                stack.append(leader)
            while stack:
                p = stack.pop()
                if p not in found:
                    found.add(p)
                    stack.extend(children.get(p, ()))
            known = self.known[leader]
            for p in found:
                known.setdefault(p, table[p][2])
            known = {p: st for p, st in known.items() if p in table and table[p][2] == st}
            if not known:
                self.remove(leader)  # nothing of this group is left
                continue
            self.known[leader] = known
            live |= set(known)
        return live

    def kill_all(self) -> None:
        groups = [g for g in self.leaders if self._owned(g)]
        for leader in groups:  # freeze first: nobody exits, forks or re-parents meanwhile
            _signal_group(leader, signal.SIGSTOP)
        members = self.scan()
        for leader in groups:
            _signal_group(leader, signal.SIGKILL)
        for p in members:
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except OSError:
        pass


def main() -> None:
    """Read ``+PID``/``-PID`` lines from stdin; at EOF kill every guarded tree."""
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_IGN)
    guard = _Guard()
    buf = b""
    while True:
        timeout = SCAN_INTERVAL if guard.leaders else None
        ready, _, _ = select.select([0], [], [], timeout)
        if not ready:
            guard.scan()
            continue
        try:
            data = os.read(0, 4096)
        except InterruptedError:
            continue
        except OSError:
            data = b""
        if not data:
            break
        buf += data
        *lines, buf = buf.split(b"\n")
        for line in lines:
            try:
                op, target = line[:1], int(line[1:])
            except ValueError:
                continue
            if target <= 1:
                continue
            if op == b"+":
                guard.add(target)
            elif op == b"-":
                guard.remove(target)
        if guard.leaders:
            guard.scan()
    guard.kill_all()


if __name__ == "__main__":
    main()
