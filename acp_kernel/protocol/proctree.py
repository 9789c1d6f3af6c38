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


def snapshot() -> list[Proc]:
    """Every live (non-zombie) process, from ``/proc`` (empty off Linux)."""
    if not _LINUX:
        return []
    out: list[Proc] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # The command name may hold spaces and parentheses: split after the last ')'.
        rest = stat[stat.rfind(b")") + 2 :].split()
        if len(rest) > 2 and rest[0] not in (b"Z", b"X"):
            out.append(Proc(int(entry), int(rest[1]), int(rest[2]), rest[0]))
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
    loop = asyncio.get_running_loop()
    deadline = loop.time() + term_grace
    delay = 0.002
    while True:
        members = {p for p in members if alive(p)} | tree(pid)
        if not members:
            return
        if loop.time() >= deadline:
            break
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.05)
    signal_all(pid, members, signal.SIGKILL)


def kill_tree_now(pid: int, known: Iterable[int] = ()) -> None:
    """Synchronous last resort (atexit, a dying kernel): SIGKILL group and tree."""
    signal_all(pid, tree(pid) | set(known) | {pid}, signal.SIGKILL)
