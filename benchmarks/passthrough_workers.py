"""Passthrough terminal measurements: PTY -> widget throughput, keystroke round trips.

``python benchmarks/passthrough_workers.py MODE [options]`` prints one JSON
object on its last stdout line (like ``workers.py``).

Modes:
  floor-flood  the demo CLI (``python -m acp_kernel.demo.cli``) under a PTY
               (``ptyprocess.PtyProcess.spawn``), ``/flood BYTES`` typed, the
               master read by a tight ``os.read`` loop and discarded, until
               ``flood done``
  floor-echo   a program (default ``cat``) under a PTY: one key written to the
               master at a time, timed until its echo is read back; back to
               back, then paced (one key every ``--gap-ms``)
  kernel       a real ``acp`` kernel through jupyter_client, this process its
               frontend (own zmq sockets, as ``kernel_workers.py``):
               ``%passthrough demo``, a view says hello (and gets its replay),
               then ``--rounds`` cells ``/flood BYTES``, each after a
               ``floor-flood`` run in a fresh process; bytes are counted as
               the terminal widget's ``data`` comm messages (text) arrive on
               iopub. Then ``%passthrough --command cat``, a view says hello,
               and single keys go out as ``{"type": "input"}`` comm messages
               on the shell channel, one at a time, each timed until a
               ``data`` message carrying it comes back (back to back, then
               paced), beside a ``floor-echo`` run in a fresh process.
  frames       the cost of terminal data as text in the message (what the widget
               sends, so a kernel gateway's relay can carry it) against a binary
               buffer: serialise and parse per MB, bytes on the wire; no kernel
  comm-echo    the Jupyter messaging alone: a python3 (ipykernel) kernel with a
               comm that sends each message's text straight back; keys timed
               the same way (back to back, then paced). No PTY.

Every process started here is stopped by pid on the way out, errors included:
the PTY children of the floors (``PtyProcess.terminate(force=True)``), the
kernel (``shutdown_kernel``) and, should the kernel leave them, the terminals'
programs (their pids come from ``%passthrough list``; SIGKILL if alive).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import signal
import string
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from acp_kernel.protocol.proctree import alive as _alive  # noqa: E402
from benchmarks.kernel_workers import _emit, _percentiles  # noqa: E402

WIDGET_ID = "acp_kernel.TerminalWidget"
DONE = b"flood done"
FLOOD_MARK = b"xxxxxxxx"
#: Keys typed into ``cat``: consecutive keys differ, so each echo is known. The
#: line discipline's canonical buffer holds 4,095 characters and no Enter is sent.
ALPHABET = string.ascii_letters + string.digits
MAX_KEYS = 4000
VIEW = "bench"
ACK_EVERY = 256 * 1024  # as static/terminal.js


def proc_cpu(pid: int | None, thread: int | None = None) -> float | None:
    """utime + stime of a process (all its threads), or of one of its threads, in seconds;
    None if it is gone."""
    if not pid:
        return None
    try:
        with open(f"/proc/{pid}/task/{thread}/stat" if thread else f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proc_reads(pid: int | None) -> int | None:
    """read(2)-family system calls a process has made (``syscr`` in /proc/PID/io)."""
    if not pid:
        return None
    try:
        with open(f"/proc/{pid}/io") as f:
            for line in f:
                if line.startswith("syscr:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def self_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


class Deadline(Exception):
    pass


def _on_alarm(signum: int, frame: Any) -> None:
    raise Deadline("no answer in time")


def _demo_argv() -> list[str]:
    return [sys.executable, "-m", "acp_kernel.demo.cli"]


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["TERM"] = "xterm-256color"  # what terminado gives its terminals
    return env


# -- floors: one process, a PTY, blocking reads -------------------------------------------


def _read_until(fd: int, needle: bytes) -> bytes:
    buf = b""
    while needle not in buf:
        buf += os.read(fd, 65536)
    return buf


def floor_flood(args: argparse.Namespace) -> dict:
    from ptyprocess import PtyProcess

    n = args.bytes
    signal.signal(signal.SIGALRM, _on_alarm)
    signal.alarm(int(args.timeout))
    proc = PtyProcess.spawn(_demo_argv(), env=_child_env(), dimensions=(24, 80))
    try:
        fd, read = proc.fd, os.read
        _read_until(fd, b"> ")
        cpu0, cli0 = self_cpu(), proc_cpu(proc.pid)
        os.write(fd, f"/flood {n}\r".encode())
        t_submit = time.perf_counter()
        total = reads = 0
        first_t = None
        first_bytes = 0
        tail = b""
        while True:
            chunk = read(fd, 1 << 20)
            t = time.perf_counter()
            reads += 1
            total += len(chunk)
            if first_t is None and FLOOD_MARK in chunk:
                first_t, first_bytes = t, total
            if DONE in chunk or DONE in tail + chunk[:16]:
                break
            tail = chunk[-16:]
        t_done = time.perf_counter()
        cpu1, cli1 = self_cpu(), proc_cpu(proc.pid)
        signal.alarm(0)
        return {"bytes": n, "seconds": t_done - t_submit, "window_seconds": t_done - (first_t or t_submit),
                "window_bytes": total - first_bytes, "total_bytes": total, "reads": reads,
                "reader_cpu": cpu1 - cpu0, "cli_cpu": None if cli0 is None or cli1 is None else cli1 - cli0}
    finally:
        signal.alarm(0)
        proc.terminate(force=True)
        proc.close(force=True)


def _echo_loop(fd: int, count: int, gap: float, start: int) -> list[float]:
    """Milliseconds from writing each key to reading its echo."""
    out = []
    read, write, now = os.read, os.write, time.perf_counter
    next_at = now()
    for i in range(count):
        key = ALPHABET[(start + i) % len(ALPHABET)].encode()
        if gap:
            while (left := next_at - now()) > 0:
                time.sleep(left)
            next_at += gap
        t0 = now()
        write(fd, key)
        buf = b""
        while key not in buf:
            buf = read(fd, 1024)
        out.append((now() - t0) * 1000)
    return out


def floor_echo(args: argparse.Namespace) -> dict:
    from ptyprocess import PtyProcess

    if 2 * args.keys > MAX_KEYS:
        raise SystemExit(f"at most {MAX_KEYS // 2} keys")
    signal.signal(signal.SIGALRM, _on_alarm)
    signal.alarm(int(args.timeout))
    proc = PtyProcess.spawn(args.command.split(), env=_child_env(), dimensions=(24, 80))
    try:
        fd = proc.fd
        back = _echo_loop(fd, args.keys, 0.0, 0)
        paced = _echo_loop(fd, args.keys, args.gap_ms / 1000, args.keys)
        return {"back_to_back": _percentiles(back), "paced": _percentiles(paced), "gap_ms": args.gap_ms,
                "command": args.command}
    finally:
        signal.alarm(0)
        proc.terminate(force=True)
        proc.close(force=True)


# -- the kernel, and this process as the terminal widget's frontend --------------------------


@dataclass
class Term:
    """One terminal widget, as the frontend sees it."""

    comm_id: str
    title: str
    state: dict = field(default_factory=dict)
    replayed: bool = False
    messages: int = 0
    nbytes: int = 0
    drawn: int = 0  # live bytes since the replay; acknowledged as drawn (flow control), as terminal.js does
    acked: int = 0
    watch: Callable[[bytes, float], None] | None = None


class Front:
    """The iopub/shell reader: widget comm_open and comm_msg, replies, display text."""

    def __init__(self, k: Any) -> None:
        self.k = k
        self.zmq = k.zmq
        self.session = k.session
        self.terms: dict[str, Term] = {}
        self.opened: list[Term] = []
        self.replies: dict[str, tuple[dict, float]] = {}
        self.texts: dict[str, list[str]] = {}  # execute msg_id -> markdown/plain text shown
        self.busy: dict[str, float] = {}  # parent msg_id -> arrival of its status: busy
        self.iopub_msgs = 0
        self.iopub_bytes = 0

    # -- reading ----------------------------------------------------------------------

    def pump(self, timeout: float) -> None:
        zmq = self.zmq
        events = dict(self.k.poller.poll(max(0.0, timeout) * 1000))
        if self.k.iopub in events:
            while True:
                try:
                    frames = self.k.iopub.recv_multipart(zmq.NOBLOCK)
                except zmq.Again:
                    break
                self._iopub(frames, time.perf_counter())
        if self.k.shell in events:
            while True:
                try:
                    frames = self.k.shell.recv_multipart(zmq.NOBLOCK)
                except zmq.Again:
                    break
                t = time.perf_counter()
                _, ml = self.session.feed_identities(frames)
                parent = json.loads(ml[2])
                self.replies[parent.get("msg_id", "")] = (json.loads(ml[4]), t)

    def until(self, predicate: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.perf_counter() + timeout
        while not predicate():
            left = deadline - time.perf_counter()
            if left <= 0:
                raise TimeoutError(f"{what}: nothing after {timeout:.0f} s")
            self.pump(min(left, 1.0))

    def _iopub(self, frames: list[bytes], t: float) -> None:
        self.iopub_msgs += 1
        self.iopub_bytes += sum(len(f) for f in frames)
        _, ml = self.session.feed_identities(frames)
        kind = json.loads(ml[1])["msg_type"]
        if kind == "comm_msg":
            content = json.loads(ml[4])
            term = self.terms.get(content.get("comm_id"))
            if term is None:
                return
            data = content.get("data") or {}
            if data.get("method") == "custom":
                body = data.get("content") or {}
                if body.get("type") == "data":
                    # terminal data is text in the message (text frames, for a kernel gateway)
                    buf = ml[5] if len(ml) > 5 else body.get("text", "").encode("utf-8")
                    term.messages += 1
                    term.nbytes += len(buf)
                    term.drawn += len(buf)
                    if term.replayed and term.drawn - term.acked >= ACK_EVERY:
                        term.acked = term.drawn  # this frontend "draws" at once
                        self.custom(term, {"type": "ack", "view": VIEW, "drawn": term.acked})
                    if term.watch is not None:
                        term.watch(buf, t)
                elif body.get("type") == "replay" and body.get("view") == VIEW:
                    term.replayed = True
                    term.drawn = term.acked = 0  # acknowledgements count live bytes after the replay
            elif data.get("method") == "update":
                term.state.update(data.get("state") or {})
        elif kind == "comm_open":
            content = json.loads(ml[4])
            state = (content.get("data") or {}).get("state") or {}
            if state.get("_anywidget_id") == WIDGET_ID:
                term = Term(content["comm_id"], state.get("title", ""), dict(state))
                self.terms[term.comm_id] = term
                self.opened.append(term)
        elif kind == "status":
            if b'"busy"' in ml[4]:
                self.busy[json.loads(ml[2]).get("msg_id", "")] = t
        elif kind in ("display_data", "stream"):
            parent = json.loads(ml[2]).get("msg_id", "")
            content = json.loads(ml[4])
            data = content.get("data") or {}
            text = content.get("text") or data.get("text/markdown") or data.get("text/plain") or ""
            self.texts.setdefault(parent, []).append(text)

    # -- writing ------------------------------------------------------------------------

    def execute(self, code: str) -> str:
        msg = self.session.msg("execute_request", {
            "code": code, "silent": False, "store_history": True, "user_expressions": {},
            # JupyterLab says True; False would make the kernel also print each reply as a stream
            "allow_stdin": True, "stop_on_error": True,
        })
        self.session.send(self.k.shell, msg)
        return msg["header"]["msg_id"]

    def run(self, code: str, timeout: float = 60) -> tuple[dict, str]:
        """A cell to its reply: (reply content, the text it showed)."""
        mid = self.execute(code)
        self.until(lambda: mid in self.replies, timeout, f"cell {code!r}")
        reply = self.replies[mid][0]
        text = "\n".join(self.texts.get(mid, []))
        if reply.get("status") != "ok":
            raise RuntimeError(f"cell {code!r} failed: {reply.get('ename')}: {reply.get('evalue')}; {text[-300:]}")
        return reply, text

    def custom(self, term: Term, content: dict) -> str:
        msg = self.session.msg("comm_msg", {"comm_id": term.comm_id,
                                            "data": {"method": "custom", "content": content}})
        self.session.send(self.k.shell, msg)
        return msg["header"]["msg_id"]

    def open_terminal(self, code: str, pids: list[int]) -> Term:
        """``%passthrough ...``: the new widget, greeted by a view that waits for its replay."""
        before = len(self.opened)
        self.run(code)
        if len(self.opened) == before:
            raise RuntimeError(f"{code!r} opened no terminal widget")
        term = self.opened[-1]
        _, listing = self.run("%passthrough list")
        pids.extend(int(p) for p in re.findall(r"\| running \| (\d+) \|", listing) if int(p) not in pids)
        self.custom(term, {"type": "hello", "view": VIEW, "rows": term.state.get("rows", 24), "cols": 80})
        self.until(lambda: term.replayed, 30, "the replay for the view")
        return term


def kernel_flood(front: Front, term: Term, n: int, timeout: float, kernel_pid: int | None,
                 cli_pid: int | None) -> dict:
    """One ``/flood n`` cell; bytes as the ``data`` comm messages arrive. CPU seconds of the
    kernel, the CLI and this frontend from the execute_request to ``flood done``."""
    st: dict[str, Any] = {"msgs": 0, "bytes": 0, "first_t": None, "first_msgs": 0, "first_bytes": 0,
                          "done_t": None, "tail": b"", "biggest": 0}

    def watch(buf: bytes, t: float) -> None:
        if st["done_t"] is not None:
            return
        st["msgs"] += 1
        st["bytes"] += len(buf)
        st["biggest"] = max(st["biggest"], len(buf))
        if st["first_t"] is None and FLOOD_MARK in buf:
            st["first_t"], st["first_msgs"], st["first_bytes"] = t, st["msgs"], st["bytes"]
        if DONE in buf or DONE in st["tail"] + buf[:16]:
            st["done_t"] = t
        st["tail"] = buf[-16:]

    term.watch = watch
    try:
        cpu0 = (proc_cpu(kernel_pid), proc_cpu(cli_pid), self_cpu(), proc_cpu(kernel_pid, kernel_pid))
        reads0 = proc_reads(kernel_pid)
        t0 = time.perf_counter()
        mid = front.execute(f"/flood {n}")
        front.until(lambda: st["done_t"] is not None, timeout, "flood done in the widget's data messages")
        cpu1 = (proc_cpu(kernel_pid), proc_cpu(cli_pid), self_cpu(), proc_cpu(kernel_pid, kernel_pid))
        reads1 = proc_reads(kernel_pid)
        front.until(lambda: mid in front.replies, 30, "the flood cell's reply")
    finally:
        term.watch = None
    reply, t_reply = front.replies[mid]
    if reply.get("status") != "ok":
        raise RuntimeError(f"/flood failed: {reply.get('evalue')}")
    window = st["done_t"] - st["first_t"]
    return {
        "bytes": n,
        "execute_to_done": st["done_t"] - t0,
        "execute_to_reply": t_reply - t0,
        "window_seconds": window,
        # bytes after the first flood message, over first -> last arrival (the floor's definition)
        "window_bytes": st["bytes"] - st["first_bytes"],
        "flood_msgs": st["msgs"] - st["first_msgs"] + 1,
        "total_msgs": st["msgs"],
        "total_bytes": st["bytes"],
        "biggest_msg": st["biggest"],
        "kernel_cpu": None if None in (cpu0[0], cpu1[0]) else cpu1[0] - cpu0[0],
        "cli_cpu": None if None in (cpu0[1], cpu1[1]) else cpu1[1] - cpu0[1],
        "frontend_cpu": cpu1[2] - cpu0[2],
        # the main thread runs the event loop: PTY reads, terminado, the widget's on_pty_read and flush
        "kernel_main_cpu": None if None in (cpu0[3], cpu1[3]) else cpu1[3] - cpu0[3],
        "kernel_reads": None if reads0 is None or reads1 is None else reads1 - reads0,
    }


def kernel_keys(front: Front, term: Term, count: int, gap: float, start: int, to_busy: list[float],
                busy_to_echo: list[float], timeout: float = 10) -> list[float]:
    """Milliseconds from sending each key (an ``input`` comm message) to the arrival of a ``data``
    message carrying its echo; ``to_busy`` / ``busy_to_echo`` split that at the arrival of the
    kernel's ``status: busy`` for the comm message (ipykernel publishes it as it starts handling it)."""
    out: list[float] = []
    got: list[float] = []
    next_at = time.perf_counter()
    for i in range(count):
        key = ALPHABET[(start + i) % len(ALPHABET)]
        kb = key.encode()
        if gap:
            while (left := next_at - time.perf_counter()) > 0:
                front.pump(left)  # keep reading while we wait for the next key's turn
            next_at += gap
        got.clear()
        term.watch = lambda buf, t, kb=kb: got.append(t) if not got and kb in buf else None
        t0 = time.perf_counter()
        mid = front.custom(term, {"type": "input", "data": key})
        front.until(lambda: bool(got), timeout, f"the echo of key {i}")
        out.append((got[0] - t0) * 1000)
        busy = front.busy.pop(mid, None)
        if busy is not None:
            to_busy.append((busy - t0) * 1000)
            busy_to_echo.append((got[0] - busy) * 1000)
    term.watch = None
    return out


def _sub_worker(mode: str, *extra: str, timeout: float) -> dict:
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), mode, *extra], capture_output=True,
                          text=True, timeout=timeout, env=_child_env(), check=False)
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"{mode} exited {proc.returncode}: {tail}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def kernel(args: argparse.Namespace) -> dict:
    from benchmarks.kernel_workers import Kernel

    if 2 * args.keys > MAX_KEYS:
        raise SystemExit(f"at most {MAX_KEYS // 2} keys")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run the finally below
    pids: list[int] = []
    k = Kernel("acp")
    result: dict[str, Any] = {"bytes": args.bytes, "keys": args.keys, "gap_ms": args.gap_ms}
    try:
        result["ready_seconds"] = k.ready()
        front = Front(k)
        kernel_pid = getattr(k.km.provisioner, "pid", None)
        demo = front.open_terminal("%passthrough demo", pids)
        result["demo_title"] = demo.title
        cli_pid = pids[0] if pids else None
        floods, floors = [], []
        for rnd in range(args.rounds):
            print(f"round {rnd + 1}/{args.rounds}: floor", file=sys.stderr)
            floors.append(_sub_worker("floor-flood", "--bytes", str(args.bytes), timeout=args.timeout))
            print(f"round {rnd + 1}/{args.rounds}: kernel", file=sys.stderr)
            floods.append(kernel_flood(front, demo, args.bytes, args.timeout, kernel_pid, cli_pid))
        result["floor_flood"], result["kernel_flood"] = floors, floods
        cat = front.open_terminal(f"%passthrough --command {args.echo_command}", pids)
        result["echo_title"] = cat.title
        print("keys: floor", file=sys.stderr)
        result["floor_echo"] = _sub_worker("floor-echo", "--keys", str(args.keys), "--gap-ms", str(args.gap_ms),
                                           "--command", args.echo_command, timeout=args.timeout)
        print("keys: kernel", file=sys.stderr)
        gap = args.gap_ms / 1000
        result["kernel_echo"] = {}
        for label, g, start in (("back_to_back", 0.0, 0), ("paced", gap, args.keys)):
            to_busy: list[float] = []
            busy_to_echo: list[float] = []
            rtt = kernel_keys(front, cat, args.keys, g, start, to_busy, busy_to_echo)
            result["kernel_echo"][label] = _percentiles(rtt)
            result["kernel_echo"][label + "_to_busy"] = _percentiles(to_busy)
            result["kernel_echo"][label + "_busy_to_echo"] = _percentiles(busy_to_echo)
        result["pids"] = pids
        return result
    finally:
        try:
            k.close()
        finally:
            for pid in pids:
                if _alive(pid):
                    print(f"terminal pid {pid} outlived the kernel: SIGKILL", file=sys.stderr)
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass


ECHO_TARGET = """
def _bench_echo(comm, msg):
    @comm.on_msg
    def _echo(m):
        comm.send({"type": "data"}, buffers=[m["content"]["data"]["data"].encode()])
get_ipython().kernel.comm_manager.register_target("bench_echo", _bench_echo)
"""


def comm_echo(args: argparse.Namespace) -> dict:
    """The Jupyter messaging floor for a keystroke: a python3 (ipykernel) kernel whose comm
    sends each message's text straight back as a binary buffer; no PTY, no terminal."""
    from benchmarks.kernel_workers import Kernel

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    k = Kernel("python3")
    try:
        k.ready()
        cell = k.execute(ECHO_TARGET, timeout=60)
        if cell.status != "ok":
            raise RuntimeError(f"registering the echo comm failed: {cell.reply.get('evalue')}")
        s, zmq = k.session, k.zmq
        comm_id = "bench-echo-" + os.urandom(8).hex()
        s.send(k.shell, s.msg("comm_open", {"comm_id": comm_id, "target_name": "bench_echo", "data": {}}))

        def wait_echo(key: bytes, timeout: float = 10) -> float:
            deadline = time.perf_counter() + timeout
            while (left := deadline - time.perf_counter()) > 0:
                events = dict(k.poller.poll(left * 1000))
                if k.shell in events:
                    k.shell.recv_multipart()
                if k.iopub in events:
                    while True:
                        try:
                            frames = k.iopub.recv_multipart(zmq.NOBLOCK)
                        except zmq.Again:
                            break
                        t = time.perf_counter()
                        _, ml = s.feed_identities(frames)
                        if len(ml) > 5 and ml[5] == key and json.loads(ml[1])["msg_type"] == "comm_msg":
                            return t
            raise TimeoutError("no echo from the comm")

        result: dict[str, Any] = {"keys": args.keys, "gap_ms": args.gap_ms}
        for label, gap in (("back_to_back", 0.0), ("paced", args.gap_ms / 1000)):
            out = []
            next_at = time.perf_counter()
            for i in range(args.keys):
                if gap:
                    while (left := next_at - time.perf_counter()) > 0:
                        time.sleep(left)
                    next_at += gap
                key = f"{label[0]}{i}"
                t0 = time.perf_counter()
                s.send(k.shell, s.msg("comm_msg", {"comm_id": comm_id, "data": {"data": key}}))
                out.append((wait_echo(key.encode()) - t0) * 1000)
            result[label] = _percentiles(out)
        return result
    finally:
        k.close()


def _terminal_sample(size: int) -> str:
    """Terminal output like a CLI's: SGR colours, cursor moves, box drawing, some accents."""
    line = ("\x1b[1;32m✓\x1b[0m step {i:6d} \x1b[2K\x1b[38;5;244m│ résumé of the work so far\x1b[0m "
            "\x1b[3A\x1b[10Cdone ─────────\r\n")
    out, i = [], 0
    while sum(map(len, out)) < size:
        out.append(line.format(i=i))
        i += 1
    return "".join(out)[:size]


def frames(args: argparse.Namespace) -> dict:
    """What sending terminal output as text costs against a binary buffer: one
    Jupyter message per chunk serialised (``jupyter_client.Session``) and parsed
    back (JSON and the buffer), per MB of terminal output; no kernel."""
    from jupyter_client.session import Session

    session = Session(key=b"bench")
    sample = _terminal_sample(4 << 20)
    result: dict[str, Any] = {"sample_chars": len(sample), "sample_utf8_bytes": len(sample.encode())}
    for chunk in (4096, 256 * 1024):
        parts = [sample[i:i + chunk] for i in range(0, len(sample), chunk)]
        for label in ("text", "binary"):
            wire = 0
            t0 = time.perf_counter()
            for _ in range(3):
                for part in parts:
                    if label == "text":
                        msg = session.msg("comm_msg", {"comm_id": "x", "data": {"method": "custom", "content": {
                            "type": "data", "text": part, "n": len(part)}}})
                        frames_ = session.serialize(msg)
                    else:
                        msg = session.msg("comm_msg", {"comm_id": "x", "data": {"method": "custom", "content": {
                            "type": "data"}}})
                        msg["buffers"] = [part.encode("utf-8")]
                        frames_ = session.serialize(msg) + msg["buffers"]
                    back = json.loads(frames_[-1 if label == "text" else -2])
                    data = back["data"]["content"].get("text") if label == "text" else frames_[-1].decode("utf-8")
                    assert len(data) == len(part)
                    wire += sum(len(f) for f in frames_)
            seconds = (time.perf_counter() - t0) / 3
            mb = len(sample.encode()) / 1e6
            result[f"{label}_{chunk}"] = {"ms_per_mb": round(seconds * 1000 / mb, 2),
                                          "wire_per_byte": round(wire / 3 / len(sample.encode()), 3)}
    return result


MODES = {"floor-flood": floor_flood, "floor-echo": floor_echo, "kernel": kernel, "comm-echo": comm_echo,
         "frames": frames}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="passthrough terminal measurements, one process each")
    p.add_argument("mode", choices=sorted(MODES))
    p.add_argument("--bytes", type=int, default=64 << 20, help="bytes /flood prints (default 64 MiB)")
    p.add_argument("--rounds", type=int, default=3, help="kernel: flood rounds, each beside a floor run")
    p.add_argument("--keys", type=int, default=300, help="keys per keystroke run (back to back, and paced)")
    p.add_argument("--gap-ms", type=float, default=30.0, help="paced keys: one every this many ms")
    p.add_argument("--command", default="cat", help="floor-echo: the program that echoes")
    p.add_argument("--echo-command", default="cat", help="kernel: the program the keys are typed into")
    p.add_argument("--timeout", type=float, default=120, help="seconds for one flood or one floor run")
    args = p.parse_args(argv)
    _emit(MODES[args.mode](args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
