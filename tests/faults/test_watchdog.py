"""The process watchdog alone (the kernel-level ``kill -9`` test is in
test_kernel_faults.py): guarded trees die when its pipe closes, others live."""

from __future__ import annotations

import subprocess
import sys
import time

from acp_kernel.protocol import proctree, watchdog

from .conftest import gone


def spawn_tree() -> tuple[subprocess.Popen, set[int]]:
    """A new session with a child in the group and one that left it (setsid)."""
    proc = subprocess.Popen(
        ["sh", "-c", "sleep 600 & setsid sleep 600 & echo ready; wait"],
        stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, start_new_session=True,
    )
    assert proc.stdout.readline() == b"ready\n"
    deadline = time.monotonic() + 5
    while len(proctree.tree(proc.pid)) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    members = proctree.tree(proc.pid) | {proc.pid}
    assert len(members) == 3, members
    return proc, members


async def test_guarded_trees_die_with_the_pipe_unguarded_ones_live():
    dog = watchdog.enable()
    try:
        assert dog and proctree.alive(dog)
        assert watchdog.enable() == dog  # idempotent
        guarded, guarded_pids = spawn_tree()
        released, released_pids = spawn_tree()
        watchdog.watch(guarded.pid)
        watchdog.watch(released.pid)
        watchdog.unwatch(released.pid)
        time.sleep(watchdog.SCAN_INTERVAL + 0.3)  # one periodic scan: the setsid child is remembered
    finally:
        watchdog.disable()  # what a dying kernel does: its end of the pipe closes
    try:
        await gone(guarded_pids | {dog}, timeout=5)
        assert all(proctree.alive(p) for p in released_pids)
    finally:
        proctree.kill_tree_now(released.pid, released_pids)
        for p in (guarded, released):
            p.wait(5)
            p.stdout.close()
        await gone(released_pids)


async def test_watch_without_enable_is_a_no_op():
    assert watchdog.pid() is None
    watchdog.watch(12345)
    watchdog.unwatch(12345)


async def test_the_watchdog_ignores_garbage_and_pid_one():
    proc = subprocess.Popen([sys.executable, "-I", "-S", "-c",
                             "import sys; sys.path.insert(0, %r); from acp_kernel.protocol.watchdog import main; main()"
                             % str(__import__("pathlib").Path(watchdog.__file__).parents[2])],
                            stdin=subprocess.PIPE, start_new_session=True)
    proc.stdin.write(b"hello\n+1\n+0\n-x\n+\n\xff\xfe\n+999999999\n")
    proc.stdin.close()
    assert proc.wait(5) == 0
