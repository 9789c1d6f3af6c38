"""Scopes: every process an agent or a terminal starts ends with it.

A :class:`Scope` is a set of processes that ends together: a client's
session (the agent and its terminals), the agent alone, one terminal. Three
ways find its members, because a process can slip out of each but not all:

- **the tree**: descendants of the leaders, plus their process groups. The
  kernel and the CLI make themselves child *subreapers* on Linux
  (:func:`adopt_orphans`, ``PR_SET_CHILD_SUBREAPER``), so an orphan below
  them (the grandchild of a double fork) is re-parented to them, not to init;
  ``setsid`` does not take a process out of the tree either;
- **the marker**: each leader's environment carries ``ACP_KERNEL_SCOPE=<id>``
  (a random id per scope, nested ``parent.child``), inherited by everything
  below; ``/proc/*/environ`` of our uid's processes is read when a scope ends,
  which finds a daemon that double-forked before we looked;
- **a cgroup v2** where ours is writable (:mod:`acp_kernel.protocol.cgroup`):
  nothing leaves it but by a write to another cgroup, and ``cgroup.kill``
  ends it at once.

Ending a scope: SIGTERM to every member, a bounded wait on their pidfds, then
``cgroup.kill`` and SIGKILL to whatever is left or was forked meanwhile. Only
processes found by one of the three ways are signalled, never by name.

Being a subreaper means adopted orphans become *our* zombies: the
:class:`_Reaper` thread reaps those, and only those, never a child that
asyncio's child watcher or a ``Popen`` waits for. A zombie child is adopted
for sure when its session is neither ours nor its own (a process we fork
inherits our session or starts its own: any other one came from below), or
when it is a marked process seen alive as our child that is no leader we
started (leaders are registered before anything can reap them, and nothing
is reaped while a scope is starting one).
"""

from __future__ import annotations

import atexit
import functools
import itertools
import os
import signal
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager

from . import cgroup, proctree

#: SIGTERM, then this long for the members to exit, then SIGKILL.
TERM_GRACE = 1.5
#: How long to wait for SIGKILLed members to be gone (a process in
#: uninterruptible sleep may take a moment).
KILL_WAIT = 2.0
#: The reaper's look at our children while scopes are alive, and otherwise (seconds).
REAP_TICK = 1.0
IDLE_TICK = 5.0

_ids = itertools.count(1)
_root: tuple[int, str] | None = None


def root_marker() -> str:
    """This process's marker prefix: its pid and a random part (a pid may be reused)."""
    global _root
    if _root is None or _root[0] != os.getpid():
        _root = (os.getpid(), f"{os.getpid()}-{os.urandom(4).hex()}")
    return _root[1]


class _Reaper:
    """Reaps the zombies of adopted orphans (see the module docstring)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.leaders: dict[int, int] = {}  # pid -> start time: their owner reaps them
        self.sessions: set[int] = set()  # leader pids (= their session ids) of live scopes
        self.adopted: dict[int, int] = {}  # pid -> start time of marked children seen alive
        self.spawning = 0
        self.wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._pid = 0

    def ensure(self) -> None:
        if self._thread is not None and self._pid == os.getpid() and self._thread.is_alive():
            return
        self._pid = os.getpid()
        self._thread = threading.Thread(target=self._run, name="acp-reaper", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            self.wake.wait(REAP_TICK if _live else IDLE_TICK)  # orphans of others (passthrough) too
            self.wake.clear()
            try:
                self.reap()
            except Exception:  # noqa: BLE001 - never let the reaper die
                pass

    def reap(self) -> None:
        """Reap our adopted zombies; note marked orphans seen alive. Only in a
        process that made itself a subreaper (:func:`adopt_orphans`): anywhere
        else orphans are not ours to reap."""
        if not proctree.is_subreaper():
            return
        root = root_marker()
        my_sid = os.getsid(0)
        with self.lock:
            if self.spawning:
                self.wake.set()  # look again once the start is done
                return
            for pid in proctree.own_children():
                p = proctree.stat(pid)
                if p is None or self.leaders.get(pid) == p.start:
                    continue
                if p.state in (b"Z", b"X"):
                    # A child we forked has our session or its own: any other came from below.
                    foreign = p.sid not in (my_sid, pid)
                    in_session = (p.sid in self.sessions or p.pgrp in self.sessions) and pid not in (p.sid, p.pgrp)
                    if foreign or in_session or self.adopted.get(pid) == p.start:
                        try:
                            os.waitpid(pid, os.WNOHANG)
                        except ChildProcessError:
                            pass
                        self.adopted.pop(pid, None)
                elif pid not in self.adopted and proctree.within(proctree.marker_of(pid), root):
                    self.adopted[pid] = p.start
            for pid, start in list(self.adopted.items()):
                p = proctree.stat(pid)
                if p is None or p.start != start:
                    del self.adopted[pid]


_reaper = _Reaper()
_live: weakref.WeakSet[Scope] = weakref.WeakSet()


def adopt_orphans() -> bool:
    """Make this process a child subreaper and start the reaper thread.

    For a process that owns its whole life (the kernel, the CLI): it changes
    what happens to *every* orphan below it, so a library user's program is
    not made one behind its back (the marker and the cgroup find escaped
    daemons there). False where Linux's prctl is not available."""
    if not proctree.become_subreaper():
        return False
    _reaper.ensure()
    return True


class Scope:
    """Processes that end together. Start leaders with :meth:`env` and inside
    :meth:`spawning`, then :meth:`started`; end them all with :meth:`end`."""

    def __init__(self, name: str = "scope", parent: Scope | None = None) -> None:
        self.parent = parent
        self.name = f"{name}{next(_ids)}-{os.urandom(3).hex()}"
        self.marker: str = f"{parent.marker if parent else root_marker()}.{self.name}"
        self.leaders: dict[int, int] = {}  # pid -> start time
        self._seen: dict[int, int] = {}
        self._cgroup: str | None | bool = False  # False: not made yet
        self._sessions: set[int] = set()
        #: Nothing started before the scope is in it (two ticks of slack for rounding).
        self._born = max(0, proctree.ticks_now() - 2)

    def child(self, name: str) -> Scope:
        return Scope(name, self)

    # -- starting --------------------------------------------------------------------

    def env(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """``base`` (default: our environment) with this scope's marker set."""
        env = dict(os.environ if base is None else base)
        env[proctree.MARKER_VAR] = self.marker
        return env

    @property
    def _made(self) -> str | None:
        """The cgroup if one was made (this never makes one; ``_cgroup`` is False until :attr:`cgroup` tries)."""
        return self._cgroup if isinstance(self._cgroup, str) and self._cgroup else None

    @property
    def cgroup(self) -> str | None:
        if self._cgroup is False:
            parent = self.parent.cgroup if self.parent is not None else None
            if self.parent is not None and parent is None:
                self._cgroup = None
            else:
                name = self.name if self.parent is not None else f"{os.getpid()}-{self.name}"
                self._cgroup = cgroup.create(parent, f"acp-{name}")
                if self._cgroup is not None:  # an empty one goes when the scope does (or at exit)
                    weakref.finalize(self, cgroup.remove, self._cgroup)
        return self._cgroup  # type: ignore[return-value]

    @contextmanager
    def spawning(self) -> Iterator[Callable[[], None] | None]:
        """Around the start of a leader: the reaper waits until it is :meth:`started`.

        Yields the child's setup for ``preexec_fn`` (None without a cgroup): the child
        moves itself into the cgroup before it execs, so nothing it forks can start
        outside. Moving it from here once the spawn has returned loses that race when
        the loop is busy (a daemon forked in the child's first milliseconds escaped)."""
        fd = cgroup.open_procs(self.cgroup)
        with _reaper.lock:
            _reaper.spawning += 1
        try:
            yield None if fd is None else functools.partial(cgroup.join, fd)
        finally:
            if fd is not None:
                os.close(fd)
            with _reaper.lock:
                _reaper.spawning -= 1

    def started(self, pid: int) -> None:
        """Register a leader this process started (and waits for): moved into
        the cgroup, never reaped by us."""
        p = proctree.stat(pid)
        start = p.start if p is not None else 0
        self.leaders[pid] = start
        with _reaper.lock:
            _reaper.leaders[pid] = start
            _reaper.sessions.add(pid)
        self._sessions.add(pid)
        _live.add(self)
        cgroup.move(self.cgroup, pid)

    def reaped(self, pid: int) -> None:
        """The leader's owner has waited for it (asyncio's ``process_exited``)."""
        with _reaper.lock:
            if _reaper.leaders.get(pid) == self.leaders.get(pid):
                _reaper.leaders.pop(pid, None)
        _reaper.wake.set()  # its orphans are ours now
        if self._cgroup and cgroup.remove(self._cgroup):  # type: ignore[arg-type]
            self._cgroup = False  # it left nothing behind; made again if needed

    # -- finding -----------------------------------------------------------------------

    def members(self) -> set[int]:
        """Every live process of the scope (its sub-scopes included), not us."""
        procs = proctree.snapshot()
        table = {p.pid: p for p in procs}
        found = proctree.marked(self.marker, procs, self._born) | cgroup.procs(self._made)
        for scope in self._family():
            for pid, start in scope.leaders.items():
                p = table.get(pid)
                if p is None:  # gone: its group may live on (the number stays taken while it does)
                    found |= {q.pid for q in procs if q.pgrp == pid}
                elif p.start == start:  # a reused pid is not ours: skipped
                    found.add(pid)
                    found |= proctree.tree(pid, procs)
            found |= {pid for pid, start in scope._seen.items() if pid in table and table[pid].start == start}
        found &= table.keys()
        found.discard(os.getpid())
        found.discard(1)
        for pid in found:
            self._seen[pid] = table[pid].start
        return found

    def remember(self) -> None:
        """Note the members now, so they are ended even if later nothing else finds them."""
        self.members()

    def _family(self) -> list[Scope]:
        out = [self]
        for scope in list(_live):
            s = scope.parent
            while s is not None:
                if s is self:
                    out.append(scope)
                    break
                s = s.parent
        return out

    # -- ending ------------------------------------------------------------------------

    def _signal(self, pids: Iterable[int], sig: int) -> None:
        for scope in self._family():
            for leader, start in scope.leaders.items():
                p = proctree.stat(leader)
                if p is None or p.start == start:  # the group of a leader that is gone is still ours
                    proctree.signal_all(leader, (), sig)
        proctree.signal_all(0, pids, sig)

    async def end(self, grace: float = TERM_GRACE) -> set[int]:
        """SIGTERM every member, wait up to ``grace`` s, then SIGKILL (and
        ``cgroup.kill``) the rest; returns what is still alive after that (empty
        unless a process ignores SIGKILL for a while)."""
        members = self.members()
        left: set[int] = set()
        if members:  # (none: nothing can fork either)
            self._signal(members, signal.SIGTERM)
            await proctree.wait_gone(members, grace)
            cgroup.kill(self._made)
            left = self.members()
            if left:
                self._signal(left, signal.SIGKILL)
                left = await proctree.wait_gone(left, KILL_WAIT)
        self._finish()
        return left

    def kill_now(self) -> None:
        """Synchronous SIGKILL of every member (atexit, a dying kernel)."""
        cgroup.kill(self._made)
        members = self.members()
        self._signal(members, signal.SIGKILL)
        self._finish()

    def _finish(self) -> None:
        _reaper.reap()
        if not any(proctree.alive(p) for p in self._seen):
            self._seen.clear()
            if self._cgroup and cgroup.remove(self._cgroup):  # type: ignore[arg-type]
                self._cgroup = False  # made again if the scope starts something more
        gone = {p for p in self.leaders if not proctree.alive(p)}
        with _reaper.lock:
            _reaper.sessions -= gone & self._sessions
        self._sessions -= gone
        if not self._sessions:
            _live.discard(self)


@atexit.register
def _kill_all_now() -> None:
    """Nothing a scope started outlives this process (a normal exit)."""
    for scope in list(_live):
        try:
            scope.kill_now()
        except Exception:  # noqa: BLE001 - best effort at exit
            pass
