"""A cgroup v2 per scope, where this process may make one: the surest way to end a tree.

A process cannot leave its cgroup by forking, ``setsid`` or double-forking
(only a write to another cgroup's ``cgroup.procs`` moves it), and writing
``1`` to ``cgroup.kill`` (Linux 5.14+) SIGKILLs every member at once, new forks
included. So where the unified hierarchy is mounted and our own cgroup is
writable (root, or a delegated subtree), each scope gets a directory below
ours and its leader is moved in right after it starts. Anywhere else every
function here answers None / does nothing, and the marker and the tree do the
work (:mod:`acp_kernel.protocol.scope`).

The move happens after the leader started: a child it forked in the first
microseconds stays outside (the marker still finds it).
"""

from __future__ import annotations

import os
import signal
import sys

_base: str | None | bool = False  # False: not looked up yet


def _unified_mount() -> str | None:
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                left, _, right = line.partition(" - ")
                if right.split(" ", 1)[0] == "cgroup2":
                    return left.split(" ")[4]
    except OSError:
        pass
    return None


def _own_path() -> str | None:
    try:
        with open("/proc/self/cgroup", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("0::"):
                    return line[3:].strip()
    except OSError:
        pass
    return None


def base() -> str | None:
    """Our own cgroup's directory when scopes can be made below it, else None."""
    global _base
    if _base is False:
        _base = None
        if sys.platform.startswith("linux"):
            mount, own = _unified_mount(), _own_path()
            if mount and own is not None:
                path = os.path.join(mount, own.lstrip("/"))
                if os.path.exists(os.path.join(path, "cgroup.procs")) and os.access(path, os.W_OK):
                    _base = path
                    _sweep(path)
    return _base  # type: ignore[return-value]


def _sweep(path: str) -> None:
    """Remove the empty cgroups of processes that are gone (a kernel killed
    with SIGKILL cannot remove its own): named ``acp-<pid>-...``."""
    try:
        names = os.listdir(path)
    except OSError:
        return
    for name in names:
        parts = name.split("-")
        if len(parts) < 3 or parts[0] != "acp" or not parts[1].isdigit():
            continue
        pid = int(parts[1])
        if pid == os.getpid() or os.path.exists(f"/proc/{pid}"):
            continue
        remove(os.path.join(path, name))


def create(parent: str | None, name: str) -> str | None:
    """Make cgroup ``name`` below ``parent`` (our own when None); None if we cannot."""
    top = parent or base()
    if top is None:
        return None
    path = os.path.join(top, name)
    try:
        os.mkdir(path, 0o755)
    except FileExistsError:
        pass
    except OSError:
        return None
    return path


def move(path: str | None, pid: int) -> bool:
    """Move ``pid`` into the cgroup; False when the kernel refused (it stays
    findable by marker and tree)."""
    if path is None:
        return False
    try:
        with open(os.path.join(path, "cgroup.procs"), "w") as f:
            f.write(str(pid))
        return True
    except OSError:
        return False


def open_procs(path: str | None) -> int | None:
    """The cgroup's ``cgroup.procs`` open for writing (close-on-exec), for :func:`join`
    in a child; None without one."""
    if path is None:
        return None
    try:
        return os.open(os.path.join(path, "cgroup.procs"), os.O_WRONLY | os.O_CLOEXEC)
    except OSError:
        return None


def join(fd: int) -> None:
    """In a child between fork and exec (``preexec_fn``): move itself into the cgroup
    whose ``cgroup.procs`` is open as ``fd`` ("0" names the writer). One system call, no
    lock taken; a refusal leaves it where it is (the parent's :func:`move` and the marker
    still apply)."""
    try:
        os.write(fd, b"0")
    except OSError:
        pass


def procs(path: str | None) -> set[int]:
    """Every pid in the cgroup and its sub-cgroups."""
    out: set[int] = set()
    if path is None:
        return out
    for folder, _, _ in os.walk(path):
        try:
            with open(os.path.join(folder, "cgroup.procs"), "rb") as f:
                out.update(int(w) for w in f.read().split())
        except (OSError, ValueError):
            continue
    return out


def kill(path: str | None) -> None:
    """SIGKILL everything in the cgroup (``cgroup.kill``; by pid where that file is missing)."""
    if path is None:
        return
    try:
        with open(os.path.join(path, "cgroup.kill"), "w") as f:
            f.write("1")
        return
    except OSError:
        pass
    for pid in procs(path):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def remove(path: str | None) -> bool:
    """Remove the (empty) cgroup and its sub-cgroups, deepest first; False if one is still busy."""
    if path is None:
        return True
    ok = True
    for folder, _, _ in sorted(os.walk(path), key=lambda w: -len(w[0])):
        try:
            os.rmdir(folder)
        except FileNotFoundError:
            pass
        except OSError:
            ok = False
    return ok
