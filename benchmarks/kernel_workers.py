"""Kernel-level measurements through jupyter_client, each in a fresh process.

``python benchmarks/kernel_workers.py MODE [options]`` prints one JSON object
on its last stdout line (like ``workers.py``). The kernel is a real one,
started from its kernelspec by ``jupyter_client.KernelManager``; the runner
installs the ``acp`` kernelspec into a temporary prefix and points
``JUPYTER_PATH`` at it (as ``tests/kernel/conftest.py`` does).

This process is the frontend. It talks to the kernel over its own zmq sockets
(a shell DEALER and an iopub SUB, no channel threads), so every iopub message
is timed on arrival (``time.time_ns()``, before any parsing) and counted in
the bytes that came off the wire (all frames: topic, delimiter, signature,
header, parent header, metadata, content).

Modes:
  cells     start a kernel, run ``--cell`` cells in order; per cell: execute
            -> execute_reply seconds, iopub messages and bytes by type,
            display timing and rates, and (for stamped chunks) latencies
  startup   kernel start -> first kernel_info reply (acp, python3); the acp
            kernel's first demo turn (``hello``: execute -> first
            display_data); ``%load_ext acp_kernel`` + ``%acp connect demo``
            in a python3 kernel
"""

from __future__ import annotations

import argparse
import html as _html
import json
import os
import re
import sys
import time
from dataclasses import dataclass, field
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

DISPLAY_TYPES = ("display_data", "update_display_data", "execute_result")
#: What can put text on screen: displays, and the turn widget's messages (its blocks' HTML).
SHOWN_TYPES = (*DISPLAY_TYPES, "comm_msg")
STAMP = re.compile(rb"(?<![0-9])[0-9]{19}(?![0-9])")


def _emit(result: dict) -> None:
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()


def _percentiles(values: list[float]) -> dict:
    if not values:
        return {"count": 0}
    values = sorted(values)
    n = len(values)

    def pick(q: float) -> float:
        return values[min(n - 1, int(q * n))]

    return {"count": n, "p50": pick(0.50), "p90": pick(0.90), "p99": pick(0.99), "max": values[-1]}


@dataclass
class IopubMsg:
    t: float  # seconds since the execute_request was sent
    t_ns: int  # time.time_ns() on arrival
    msg_type: str
    nbytes: int  # all frames
    content: bytes | None  # raw JSON, kept for display messages only


@dataclass
class Cell:
    code: str
    seconds: float = 0.0  # execute_request sent -> execute_reply received
    idle_seconds: float = 0.0  # ... -> status idle on iopub
    status: str = "?"
    reply: dict = field(default_factory=dict)
    msgs: list[IopubMsg] = field(default_factory=list)
    others: list[IopubMsg] = field(default_factory=list)  # arrived meanwhile, other parents

    def displays(self) -> list[IopubMsg]:
        return [m for m in self.msgs if m.msg_type in DISPLAY_TYPES]

    def summary(self, stamps: bool = False) -> dict[str, Any]:
        by_type: dict[str, list[int]] = {}
        for m in self.msgs:
            entry = by_type.setdefault(m.msg_type, [0, 0])
            entry[0] += 1
            entry[1] += m.nbytes
        shows = self.displays()
        out: dict[str, Any] = {
            "seconds": self.seconds,
            "idle_seconds": self.idle_seconds,
            "status": self.status,
            "evalue": self.reply.get("evalue"),
            "iopub_msgs": len(self.msgs),
            "iopub_bytes": sum(m.nbytes for m in self.msgs),
            "by_type": by_type,
            "other_msgs": len(self.others),
            "other_bytes": sum(m.nbytes for m in self.others),
            "other_types": sorted({m.msg_type for m in self.others}),
            "display_msgs": len(shows),
            "display_bytes": sum(m.nbytes for m in shows),
            "content_bytes": sum(len(m.content or b"") for m in shows),
        }
        if shows:
            first, last = shows[0].t, shows[-1].t
            out["first_display_s"] = first
            out["last_display_s"] = last
            span = last - first
            # rates only over a stream long enough to have one (>= 0.5 s)
            out["display_rate"] = (len(shows) - 1) / span if span >= 0.5 else None
            updates = sum(1 for m in shows if m.msg_type == "update_display_data")
            out["update_rate"] = updates / span if span >= 0.5 else None
            # the busiest second: the most display messages in any 1 s window
            times = [m.t for m in shows]
            best, j = 0, 0
            for i, t in enumerate(times):
                while times[j] < t - 1.0:
                    j += 1
                best = max(best, i - j + 1)
            out["max_display_per_s"] = best
            out["shown_chars"] = shown_chars(shows)
            # What the bytes carry: the record (the last display: the finished turn's forms),
            # the live fallback before it, the widget's comm traffic (all frames).
            final = json.loads(shows[-1].content or b"{}").get("data") or {}
            out["record_bytes"] = {k: len(v.encode()) for k, v in final.items() if isinstance(v, str)}
            out["live_display_bytes"] = sum(m.nbytes for m in shows[:-1])
            out["widget_bytes"] = sum(m.nbytes for m in self.msgs if m.msg_type.startswith("comm_"))
        if stamps:
            out["latency"] = stamp_latency([m for m in self.msgs if m.msg_type in SHOWN_TYPES])
            shown = [m.t for m in self.msgs if m.msg_type in SHOWN_TYPES]
            out["shown_msgs"] = len(shown)
            span = shown[-1] - shown[0] if shown else 0.0
            out["shown_rate"] = (len(shown) - 1) / span if span >= 0.5 else None
        return out


def shown_chars(shows: list[IopubMsg]) -> int:
    """Characters of text in the output area at the end, as a notebook front-end
    rebuilds it (each display replaced by the last update to its id) and shows it:
    the HTML's text when there is HTML (a finished turn's markdown and text keep only
    its start and end), else the markdown or the plain text."""
    outs: list[str] = []
    where: dict[str, list[int]] = {}
    for m in shows:
        c = json.loads(m.content or b"{}")
        data = c.get("data") or {}
        html = data.get("text/html")
        text = (_html.unescape(re.sub(r"<[^>]*>", "", html)) if isinstance(html, str)
                else data.get("text/markdown") or data.get("text/plain") or "")
        did = (c.get("transient") or {}).get("display_id")
        if m.msg_type == "update_display_data":
            for i in where.get(did or "", ()):
                outs[i] = text
        else:
            if did:
                where.setdefault(did, []).append(len(outs))
            outs.append(text)
    return sum(len(t) for t in outs)


def stamp_latency(shows: list[IopubMsg], gap: float = 0.005) -> dict[str, Any]:
    """Latencies of stamped chunks (``time.time_ns()`` written by the agent
    into each chunk's text), from what the display and widget messages carry, in ms:

    - first: the first display message -> the earliest stamp it shows;
    - refresh: per refresh (the messages one flush sends back to back: the
      finished blocks, then the new tail; arrivals less than ``gap`` apart),
      arrival of its last message minus the newest chunk it shows (how stale
      the freshest text on screen is);
    - chunk: per chunk, arrival of the first message showing it minus its
      stamp (includes the coalescing wait, up to ~100 ms by design).
    """
    seen_max = 0
    first = None
    per_refresh: list[float] = []
    per_chunk: list[float] = []
    group_start = None
    group_newest = 0
    group_last_ns = 0

    def close_group() -> None:
        if group_newest:
            per_refresh.append((group_last_ns - group_newest) / 1e6)

    for m in shows:
        if group_start is None or m.t - group_start > gap:
            close_group()
            group_start, group_newest = m.t, 0
        group_last_ns = m.t_ns
        if m.msg_type == "comm_msg":  # the turn widget's blocks: the stamps are in their HTML
            raw = m.content or b""
        else:
            try:
                raw = (lambda d: d.get("text/markdown") or d.get("text/plain", ""))(
                    json.loads(m.content or b"{}").get("data", {})).encode()
            except ValueError:
                continue
        new = [int(s) for s in STAMP.findall(raw) if int(s) > seen_max]
        if not new:
            continue
        if first is None:
            first = (m.t_ns - min(new)) / 1e6
        per_chunk.extend((m.t_ns - s) / 1e6 for s in new)
        seen_max = max(new)
        group_newest = seen_max
    close_group()
    return {"first_ms": first, "refresh": _percentiles(per_refresh), "chunk": _percentiles(per_chunk)}


class Kernel:
    """One kernel and this process as its frontend (shell DEALER + iopub SUB)."""

    def __init__(self, name: str, cwd: str | None = None, *, as_page: bool = False) -> None:
        import zmq
        from jupyter_client.manager import KernelManager

        self.zmq = zmq
        self.km = KernelManager(kernel_name=name)
        self.t0 = time.perf_counter()
        self.km.start_kernel(env=dict(os.environ), cwd=cwd or os.getcwd())
        self.session = self.km.session
        #: Answer a turn widget's comm_open as a page that draws it does: ``{"type": "seen"}``.
        self.as_page = as_page
        self.iopub = self.km.connect_iopub()
        self.shell = self.km.connect_shell()
        self.poller = zmq.Poller()
        self.poller.register(self.iopub, zmq.POLLIN)
        self.poller.register(self.shell, zmq.POLLIN)

    def _parse(self, frames: list[bytes]) -> tuple[dict, dict, bytes]:
        _, msg_list = self.session.feed_identities(frames)
        return json.loads(msg_list[1]), json.loads(msg_list[2]), msg_list[4]

    def ready(self, timeout: float = 60) -> float:
        """Seconds from start_kernel to the first kernel_info reply."""
        msg = self.session.msg("kernel_info_request", {})
        self.session.send(self.shell, msg)
        deadline = time.perf_counter() + timeout
        while True:
            left = deadline - time.perf_counter()
            if left <= 0:
                raise TimeoutError("no kernel_info reply")
            events = dict(self.poller.poll(left * 1000))
            if self.iopub in events:
                self._drain_iopub(None, 0.0, None)
            if self.shell in events:
                frames = self.shell.recv_multipart()
                t = time.perf_counter()
                _header, parent, _ = self._parse(frames)
                if parent.get("msg_id") == msg["header"]["msg_id"]:
                    return t - self.t0

    def _drain_iopub(self, cell: Cell | None, t0: float, mid: str | None) -> bool:
        """Read every waiting iopub message; True if the cell's idle came."""
        zmq = self.zmq
        idle = False
        while True:
            try:
                frames = self.iopub.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return idle
            t_ns, t = time.time_ns(), time.perf_counter()
            if cell is None:
                continue
            header, parent, content = self._parse(frames)
            kind = header["msg_type"]
            if parent.get("msg_id") != mid:
                # not parented to this cell (e.g. widget comm traffic): the frontend still gets it
                cell.others.append(IopubMsg(t - t0, t_ns, kind, sum(len(f) for f in frames), None))
                continue
            cell.msgs.append(IopubMsg(t - t0, t_ns, kind, sum(len(f) for f in frames),
                                      bytes(content) if kind in SHOWN_TYPES else None))
            if kind == "comm_open" and self.as_page:
                self._seen(json.loads(content))
            if kind == "status" and json.loads(content).get("execution_state") == "idle":
                cell.idle_seconds = t - t0
                idle = True

    def _seen(self, opened: dict) -> None:
        """A turn widget opened (its state names its turn): say it is shown, as its view does."""
        if "turn" in ((opened.get("data") or {}).get("state") or {}):
            self.session.send(self.shell, self.session.msg("comm_msg", {
                "comm_id": opened["comm_id"], "data": {"method": "custom", "content": {"type": "seen"}}}))

    def execute(self, code: str, timeout: float = 600) -> Cell:
        msg = self.session.msg("execute_request", {
            "code": code, "silent": False, "store_history": True, "user_expressions": {},
            "allow_stdin": False, "stop_on_error": True,
        })
        mid = msg["header"]["msg_id"]
        cell = Cell(code)
        t0 = time.perf_counter()
        self.session.send(self.shell, msg)
        replied = idle = False
        deadline = t0 + timeout
        replied_at = 0.0
        # The reply ends the cell; the idle status normally follows it, but a
        # SUB socket can miss early messages (ZMQ's slow joiner): do not wait
        # forever for an idle that was published before we subscribed.
        while not (replied and (idle or time.perf_counter() - replied_at > 2.0)):
            left = deadline - time.perf_counter()
            if left <= 0:
                raise TimeoutError(f"cell {code[:40]!r} timed out after {timeout} s")
            events = dict(self.poller.poll(min(left, 0.5 if replied else 5.0) * 1000))
            if self.iopub in events:
                idle = self._drain_iopub(cell, t0, mid) or idle
            if self.shell in events:
                frames = self.shell.recv_multipart()
                t = time.perf_counter()
                _header, parent, content = self._parse(frames)
                if parent.get("msg_id") == mid:
                    cell.seconds = t - t0
                    cell.reply = json.loads(content)
                    cell.status = cell.reply.get("status", "?")
                    replied = True
                    replied_at = time.perf_counter()
        return cell

    def close(self) -> None:
        try:
            self.km.shutdown_kernel(now=False)
        finally:
            for sock in (self.iopub, self.shell):
                sock.close(linger=0)
            self.km.cleanup_resources()


# -- modes -------------------------------------------------------------------------


def cells(args: argparse.Namespace) -> dict:
    k = Kernel(args.kernel, as_page=args.as_page)
    try:
        ready = k.ready()
        out = []
        for code in args.cell:
            cell = k.execute(code, timeout=args.timeout)
            if cell.status != "ok":
                raise RuntimeError(f"cell {code[:60]!r} failed: {cell.reply.get('ename')}: {cell.reply.get('evalue')}")
            out.append(cell.summary(stamps="stamp" in code.split()))
        return {"ready_seconds": ready, "cells": out}
    finally:
        k.close()


def startup(args: argparse.Namespace) -> dict:
    result: dict[str, Any] = {}
    k = Kernel("acp")
    try:
        result["acp_ready"] = k.ready()
        cell = k.execute(args.prompt, timeout=60)
        if cell.status != "ok":
            raise RuntimeError(f"{args.prompt!r} failed: {cell.reply}")
        s = cell.summary()
        result["acp_first_display"] = s.get("first_display_s")
        result["acp_reply"] = cell.seconds
        result["acp_start_to_first_display"] = result["acp_ready"] + (s.get("first_display_s") or 0.0)
    finally:
        k.close()
    k = Kernel("python3")
    try:
        result["py_ready"] = k.ready()
        load = k.execute("%load_ext acp_kernel", timeout=60)
        connect = k.execute("%acp connect demo", timeout=60)
        for c in (load, connect):
            if c.status != "ok":
                raise RuntimeError(f"{c.code!r} failed: {c.reply.get('evalue')}")
        result["py_load_ext"] = load.seconds
        result["py_connect"] = connect.seconds
        turn = k.execute(f"%%acp\n{args.prompt}", timeout=60)
        result["py_first_display"] = turn.summary().get("first_display_s")
        result["py_reply"] = turn.seconds
    finally:
        k.close()
    return result


MODES = {"cells": cells, "startup": startup}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="one kernel-level measurement in a fresh process")
    p.add_argument("mode", choices=sorted(MODES))
    p.add_argument("--kernel", default="acp", help="kernelspec name (cells)")
    p.add_argument("--cell", action="append", default=[], help="a cell to run, in order (repeatable)")
    p.add_argument("--timeout", type=float, default=600, help="seconds per cell")
    p.add_argument("--prompt", default="hello", help="startup: the demo prompt")
    p.add_argument("--as-page", action="store_true",
                   help="cells: answer each turn widget as a page that shows it does ({type: seen})")
    args = p.parse_args(argv)
    _emit(MODES[args.mode](args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
