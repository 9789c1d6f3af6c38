"""Process groups and trees: start children in their own session, end them whole.

Agents and terminals start in a new session (so the kernel's SIGINT never
reaches them and their group can be signalled at once). Some of their
children start sessions of their own; on Linux we also read ``/proc`` to find
those, so "kill" means the whole tree, not just the group. Elsewhere the
process group is what we can reach.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Iterable
from typing import NamedTuple

_LINUX = sys.platform.startswith("linux")


class Proc(NamedTuple):
    pid: int
    ppid: int
    pgrp: int
    state: bytes
    sid: int = 0
    #: Start time in clock ticks since boot: with the pid, names one process for good.
    start: int = 0


def _parse(pid: int, stat: bytes) -> Proc | None:
    # The command name may hold spaces and parentheses: split after the last ')'.
    rest = stat[stat.rfind(b")") + 2 :].split()
    if len(rest) < 20:
        return None
    return Proc(pid, int(rest[1]), int(rest[2]), rest[0], int(rest[3]), int(rest[19]))


def stat(pid: int) -> Proc | None:
    """One process as ``/proc`` shows it, zombies included; None when gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return _parse(pid, f.read())
    except (OSError, ValueError):
        return None


def snapshot() -> list[Proc]:
    """Every live (non-zombie) process, from ``/proc`` (empty off Linux)."""
    if not _LINUX:
        return []
    out: list[Proc] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        p = stat(int(entry))
        if p is not None and p.state not in (b"Z", b"X"):
            out.append(p)
    return out


def tree(pid: int, procs: list[Proc] | None = None) -> set[int]:
    """Live descendants of ``pid`` plus live members of its process group."""
    procs = snapshot() if procs is None else procs
    children: dict[int, list[int]] = {}
    found: set[int] = set()
    for p in procs:
        children.setdefault(p.ppid, []).append(p.pid)
        if p.pgrp == pid:
            found.add(p.pid)
    stack = [pid, *found]
    while stack:
        for child in children.get(stack.pop(), ()):
            if child not in found:
                found.add(child)
                stack.append(child)
    found.discard(pid)
    return found


def alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    if _LINUX:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            return False
        return stat[stat.rfind(b")") + 2 :][:1] not in (b"Z", b"X")
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def signal_all(pgid: int, pids: Iterable[int], sig: int) -> None:
    """Send ``sig`` to a process group and to each listed pid; ignore the gone."""
    if pgid > 0:
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            pass
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


async def terminate_tree(pid: int, *, known: Iterable[int] = (), term_grace: float = 1.5) -> None:
    """SIGTERM the group and tree of ``pid``, wait for them, SIGKILL what is left.

    ``known`` adds pids seen earlier (children re-parented to init once their
    parent died are no longer findable as descendants).
    """
    members = tree(pid) | set(known)
    if alive(pid):
        members.add(pid)
    signal_all(pid, members, signal.SIGTERM)
    left = await wait_gone(members, term_grace)
    left |= tree(pid)  # forked meanwhile
    if left:
        signal_all(pid, left, signal.SIGKILL)


def kill_tree_now(pid: int, known: Iterable[int] = ()) -> None:
    """Synchronous last resort (atexit, a dying kernel): SIGKILL group and tree."""
    signal_all(pid, tree(pid) | set(known) | {pid}, signal.SIGKILL)


# -- finding what is ours after it left the tree ---------------------------------------------

#: The environment variable that tags every process a scope starts (see
#: :mod:`acp_kernel.protocol.scope`). A daemon that ``setsid``s and double-forks
#: keeps its environment, so it is found by this tag where the tree lost it.
MARKER_VAR = "ACP_KERNEL_SCOPE"
_MARKER_KEY = MARKER_VAR.encode() + b"="


def marker_of(pid: int) -> str | None:
    """The scope marker in ``pid``'s environment (as it was at exec), if any."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            data = f.read()
    except OSError:  # gone, a zombie, or not ours to read
        return None
    for item in data.split(b"\0"):
        if item.startswith(_MARKER_KEY):
            return item[len(_MARKER_KEY):].decode("utf-8", "replace")
    return None


def within(marker: str | None, scope: str) -> bool:
    """True when ``marker`` is ``scope`` or one of its sub-scopes (``scope.x``)."""
    return marker is not None and (marker == scope or marker.startswith(scope + "."))


def ticks_now() -> int:
    """Now, in the unit of :attr:`Proc.start` (clock ticks since boot)."""
    try:
        with open("/proc/uptime", "rb") as f:
            return int(float(f.read().split()[0]) * os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return 0


def marked(scope: str, procs: list[Proc] | None = None, since: int = 0) -> set[int]:
    """Live processes whose marker lies within ``scope``: our uid's only (root
    reads every environ, others can only read their own), started at
    ``since`` (clock ticks since boot) or later: the rest cannot be members."""
    procs = snapshot() if procs is None else procs
    uid = os.getuid()
    out: set[int] = set()
    for p in procs:
        if p.start < since:
            continue
        if uid != 0:
            try:
                if os.stat(f"/proc/{p.pid}").st_uid != uid:
                    continue
            except OSError:
                continue
        if within(marker_of(p.pid), scope):
            out.add(p.pid)
    return out


def own_children() -> list[int]:
    """This process's direct children, zombies included (adopted ones too)."""
    me = os.getpid()
    try:
        tids = os.listdir(f"/proc/{me}/task")
    except OSError:
        return []
    out: list[int] = []
    try:
        for tid in tids:
            with open(f"/proc/{me}/task/{tid}/children", "rb") as f:
                out.extend(int(w) for w in f.read().split())
        return out
    except OSError:  # a kernel without CONFIG_PROC_CHILDREN: read the whole table
        pass
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            p = stat(int(entry))
            if p is not None and p.ppid == me:
                found.append(p.pid)
    return found


_subreaper: bool | None = None
_subreaper_pid = 0


def become_subreaper() -> bool:
    """Make this process a child subreaper (Linux ``PR_SET_CHILD_SUBREAPER``):
    an orphan below us (a double-forked daemon) is re-parented to us instead of
    to init, so it stays findable as our descendant. Idempotent; False elsewhere."""
    global _subreaper, _subreaper_pid
    if _subreaper is None or _subreaper_pid != os.getpid():
        _subreaper, _subreaper_pid = False, os.getpid()
        if _LINUX:
            try:
                import ctypes

                libc = ctypes.CDLL(None, use_errno=True)
                _subreaper = libc.prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
            except (OSError, AttributeError):
                pass
    return _subreaper


def is_subreaper() -> bool:
    """True once :func:`become_subreaper` succeeded in this process (a fork
    child does not inherit the setting)."""
    return bool(_subreaper) and _subreaper_pid == os.getpid()


async def wait_gone(pids: Iterable[int], timeout: float) -> set[int]:
    """Wait up to ``timeout`` seconds for every pid to exit; return those still
    alive. Uses pidfds (woken by the exit itself) where Linux has them, else
    polls with a backoff."""
    left = {p for p in pids if alive(p)}
    if not left:
        return left
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    fds: dict[int, int] = {}

    def exited(pid: int) -> None:
        fd = fds.pop(pid, None)
        if fd is not None:
            loop.remove_reader(fd)
            os.close(fd)
        left.discard(pid)
        if not left and not done.done():
            done.set_result(None)

    pidfd_open = getattr(os, "pidfd_open", None)
    polled: set[int] = set()
    for pid in list(left):
        try:
            fd = pidfd_open(pid) if pidfd_open is not None else None
        except OSError:
            fd = None
        if fd is None:
            polled.add(pid)
            continue
        fds[pid] = fd
        loop.add_reader(fd, exited, pid)
    try:
        deadline = loop.time() + timeout
        delay = 0.002
        while left:
            now = loop.time()
            if now >= deadline:
                break
            for pid in [p for p in left if not alive(p)]:  # gone before its pidfd opened
                exited(pid)
            if not left:
                break
            wait = deadline - now if not polled else min(delay, deadline - now)
            try:
                await asyncio.wait_for(asyncio.shield(done), wait)
            except asyncio.TimeoutError:
                delay = min(delay * 2, 0.05)
    finally:
        for pid in list(fds):
            fd = fds.pop(pid)
            loop.remove_reader(fd)
            os.close(fd)
    return {p for p in left if alive(p)}
