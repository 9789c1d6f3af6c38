"""The MCP server process: MCP over stdio (the official SDK) on one side, the kernel on
the other through the connection file's existing sockets and a comm (no new port).

It exits when the kernel closes the comm (the session ended: ``withdraw``), when stdin
closes (the agent went away), when the kernel's heartbeat stops or the kernel restarts.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import logging
import os
import sys
import uuid
from contextlib import suppress
from queue import Empty
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from .._version import VERSION
from ..errors import AcpError
from .docwire import CELL_OUTPUT_LIMIT, CELL_SOURCE_LIMIT, CELLS_BUDGET, PROPOSALS_WAITING, SNAPSHOT_TIMEOUT
from .wire import (ARGS, COMM_TARGET, CONNECT_TIMEOUT, EDIT_TOOLS, EXECUTE_TIMEOUT, MAX_SOURCE, PROPOSAL_TIMEOUT,
                   REQUEST_TIMEOUT, RUN_TOOLS, TOOLS,
                   Image, Open, Ready, Refused, Reply, Request, Text)

log = logging.getLogger("acp_kernel.notebook_mcp")

#: How long without a heartbeat before the kernel counts as dead, in seconds.
HEARTBEAT_GRACE = 10.0

DESCRIPTIONS = {
    "execute": ("Run Python code in the user's live Jupyter kernel, in the notebook's own namespace "
                "(variables, DataFrames, models the user has loaded). The user sees the code and is "
                "asked to allow it; it shows live in the notebook. Returns stdout/stderr, the value "
                "of a final expression (like a notebook cell), the traceback of an error, and images "
                "(display() calls, matplotlib figures the code opened). Top-level await is not "
                "available. Outputs are bounded."),
    "variables": ("List the user's variables in the live kernel: names, types and short previews "
                  "(DataFrames: shape, dtypes, head). With name, one variable in more detail."),
    "cells": ("The notebook's cells as the user sees them now, read from their JupyterLab or Notebook 7 "
              "page: unsaved edits included, each cell's id, type, source, execution count and "
              "outputs, and which cell is active (the user's cursor) and which are selected (so you "
              "can refer to 'the cell I am on' or 'the plot above'). Without such a page (VS Code, "
              "a headless run, no answer in "
              f"{SNAPSHOT_TIMEOUT:g} s) the notebook file as last saved, saying so and how old it "
              "is; when the kernel does not know its file, the sources of the cells run in this "
              f"kernel. Bounded: at most {CELLS_BUDGET:,} characters; a cell's source is cut to "
              f"{CELL_SOURCE_LIMIT:,} and its outputs' text to {CELL_OUTPUT_LIMIT:,} (head and "
              "tail); images and HTML are named with their size, errors give their name and value; "
              "when the cells do not fit, those nearest the active cell are shown in full, the "
              "others as one line each or as a range left out."),
}
_PROPOSAL = ("The user sees it in their JupyterLab or Notebook 7 page as a proposal and accepts or rejects "
             "it (under the allow-all policy it applies at once, marked); the answer says which: applied "
             "(with the cell's id), rejected, a conflict (the user changed that cell meanwhile: read it "
             "again with cells), or withdrawn (your turn ended first). Nothing is written behind the open "
             "notebook's back: without such a page (VS Code, a console, a headless run) an edit or a delete "
             "is only shown to the user, and a new cell, once the user allows it, goes below the cell "
             f"running your turn when the turn ends; the answer says which. Sources up to {MAX_SOURCE:,} "
             f"characters; at most {PROPOSALS_WAITING} proposals wait for the user at once; cell ids come "
             "from the cells tool.")
DESCRIPTIONS.update({
    "insert_cell": "Propose a new cell in the user's open notebook, below a cell (by id) or below the "
                   "user's active cell. " + _PROPOSAL,
    "edit_cell": "Propose a change to one cell of the user's open notebook (by id): its whole new source, or "
                 "one snippet (old, occurring exactly once) replaced by new. The user sees the old and new "
                 "lines. " + _PROPOSAL,
    "delete_cell": "Propose deleting one cell of the user's open notebook (by id). " + _PROPOSAL,
    "run_cell": ("Run one code cell of the user's open notebook (by id), its source as the user's page has it "
                 "now (a proposal you made counts once accepted), in the live kernel: like execute, the user "
                 "sees the code and is asked to allow it, the run shows live in the notebook, and you get "
                 "its output, value, error and images back. Without a JupyterLab or Notebook 7 page the "
                 "source comes from the notebook file as last saved, and the answer says so."),
})


class KernelGone(AcpError):
    """The kernel side ended: withdrawn, restarted or dead (the message says which)."""


class KernelLink:
    """One comm to the kernel, with request/reply matching on ids."""

    def __init__(self, connection_file: str, token: str) -> None:
        from jupyter_client.asynchronous import AsyncKernelClient

        self.token = token
        self.client = AsyncKernelClient()
        self.client.load_connection_file(connection_file)
        self.comm_id: str | None = None  # the accepted comm
        self.asked: list[str] = []  # every comm id we opened (see connect)
        self.ids = itertools.count(1)
        self.pending: dict[int, asyncio.Future[Reply]] = {}
        self.ready: asyncio.Future[Ready] | None = None
        self.gone = asyncio.Event()
        self.why = ""
        self._tasks: list[asyncio.Task] = []

    # -- life cycle -----------------------------------------------------------------

    async def connect(self) -> Ready:
        """Open the comm. A new iopub subscriber may miss what the kernel publishes in
        its first moments (and a kernel that already has subscribers sends no welcome),
        so the open is repeated, further apart each time, until one answer arrives; the
        comms opened in vain are closed. No probe on the control channel: its busy/idle
        status would tell the notebook that a running turn's cell is idle."""
        self.client.start_channels(shell=True, iopub=True, stdin=False, hb=True, control=False)
        loop = asyncio.get_running_loop()
        self.ready = loop.create_future()
        self._tasks.append(asyncio.create_task(self._read_iopub()))
        deadline = loop.time() + CONNECT_TIMEOUT
        delay = 0.25
        while True:
            comm_id = uuid.uuid4().hex
            self.asked.append(comm_id)
            self._send("comm_open", {"comm_id": comm_id, "target_name": COMM_TARGET,
                                     "data": Open(token=self.token).model_dump()})
            remaining = deadline - loop.time()
            try:
                ready = await asyncio.wait_for(asyncio.shield(self.ready), max(0.0, min(delay, remaining)))
                break
            except asyncio.TimeoutError:
                if loop.time() >= deadline:
                    raise KernelGone(f"the kernel did not answer in {CONNECT_TIMEOUT} s: is it busy "
                                     "running a cell that does not await?") from None
                delay = min(delay * 2, 5.0)
        self._tasks.append(asyncio.create_task(self._watch_heartbeat()))
        return ready

    def _send(self, msg_type: str, content: dict) -> None:
        msg = self.client.session.msg(msg_type, content)
        self.client.shell_channel.send(msg)

    def _close_comm(self, comm_id: str) -> None:
        with suppress(Exception):
            self._send("comm_close", {"comm_id": comm_id, "data": {}})

    def close(self) -> None:
        """Tell the kernel (if still there) and stop the channels."""
        if not self.gone.is_set() and self.comm_id is not None:
            self._close_comm(self.comm_id)
        for task in self._tasks:
            task.cancel()
        with suppress(Exception):
            self.client.stop_channels()

    def _end(self, why: str) -> None:
        if self.gone.is_set():
            return
        self.why = why
        self.gone.set()
        if self.ready is not None and not self.ready.done():
            self.ready.set_exception(KernelGone(why))
        for future in self.pending.values():
            if not future.done():
                future.set_exception(KernelGone(why))

    # -- reading --------------------------------------------------------------------

    async def _read_iopub(self) -> None:
        while not self.gone.is_set():
            try:
                msg = await self.client.get_iopub_msg(timeout=1)
            except Empty:
                continue
            except Exception as exc:  # noqa: BLE001 - the socket closed under us
                self._end(f"the kernel connection failed: {type(exc).__name__}")
                return
            self._handle(msg)

    def _handle(self, msg: dict) -> None:
        kind = msg.get("msg_type") or msg.get("header", {}).get("msg_type")
        content = msg.get("content") or {}
        comm_id = content.get("comm_id")
        if kind == "status" and content.get("execution_state") == "starting":
            self._end("the kernel restarted: the session that offered this server has ended")
        elif kind == "comm_close" and comm_id is not None and comm_id == self.comm_id:
            self._end("the notebook withdrew this server (its session ended)")
        elif kind == "comm_msg" and comm_id is not None:
            if comm_id == self.comm_id:
                self._on_reply(content.get("data") or {})
            elif comm_id in self.asked:
                self._on_first(comm_id, content.get("data") or {})

    def _on_first(self, comm_id: str, data: dict) -> None:
        """The first message on one of the comms we opened: accepted or refused."""
        if self.comm_id is not None:  # a late answer to a repeated open
            self._close_comm(comm_id)
            return
        if self.ready is None or self.ready.done():
            return
        if "error" in data:
            self.ready.set_exception(KernelGone(f"the kernel refused: {Refused.model_validate(data).error}"))
            return
        self.comm_id = comm_id
        self.ready.set_result(Ready.model_validate(data))
        for other in self.asked:
            if other != comm_id:
                self._close_comm(other)

    def _on_reply(self, data: dict) -> None:
        try:
            reply = Reply.model_validate(data)
        except ValidationError:
            log.warning("notebook MCP: a malformed reply from the kernel was ignored")
            return
        future = self.pending.get(reply.id)
        if future is not None and not future.done():
            future.set_result(reply)

    async def _watch_heartbeat(self) -> None:
        loop = asyncio.get_running_loop()
        last = loop.time()
        while not self.gone.is_set():
            await asyncio.sleep(1)
            if self.client.hb_channel.is_beating():
                last = loop.time()
            elif loop.time() - last > HEARTBEAT_GRACE:
                self._end(f"the kernel stopped answering its heartbeat for {HEARTBEAT_GRACE:.0f} s")

    # -- calls ----------------------------------------------------------------------

    async def call(self, tool: str, args: dict) -> Reply:
        if self.gone.is_set():
            raise KernelGone(self.why)
        rid = next(self.ids)
        future: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()
        self.pending[rid] = future
        timeout = (EXECUTE_TIMEOUT if tool in RUN_TOOLS else PROPOSAL_TIMEOUT + REQUEST_TIMEOUT if tool in EDIT_TOOLS
                   else REQUEST_TIMEOUT)
        try:
            self._send("comm_msg", {"comm_id": self.comm_id,
                                    "data": Request.model_validate({"id": rid, "tool": tool, "args": args}).model_dump()})
            return await asyncio.wait_for(asyncio.shield(future), timeout)
        except asyncio.TimeoutError:
            raise KernelGone(f"the kernel did not answer in {timeout} s: is it busy running a cell "
                             "that does not await?") from None
        finally:
            self.pending.pop(rid, None)


def _content(reply: Reply) -> list[types.ContentBlock]:
    out: list[types.ContentBlock] = []
    for item in reply.content:
        if isinstance(item, Image):
            out.append(types.ImageContent(type="image", data=item.data, mime_type=item.mimeType))
        elif isinstance(item, Text):
            out.append(types.TextContent(type="text", text=item.text))
    return out


def tool_list(offered: list[str]) -> list[types.Tool]:
    return [types.Tool(name=name, description=DESCRIPTIONS[name],
                       input_schema=ARGS[name].model_json_schema())
            for name in TOOLS if name in offered]


def build_server(link: KernelLink, ready: Ready) -> Server:
    offered = [t for t in ready.tools if t in TOOLS]
    listed = tool_list(offered)
    instructions = ("Tools on the user's live Jupyter notebook (its running kernel). " + ready.note)

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listed)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name not in offered:
            raise MCPError(types.INVALID_PARAMS, f"unknown tool: {params.name!r} (offered: {', '.join(offered)})")
        try:
            args = ARGS[params.name].model_validate(params.arguments or {})
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}"
                                 for e in exc.errors(include_url=False))
            return types.CallToolResult(is_error=True, content=[types.TextContent(
                type="text", text=f"bad arguments for {params.name}: {problems}")])
        try:
            reply = await link.call(params.name, args.model_dump(exclude_none=True))
        except KernelGone as exc:
            return types.CallToolResult(is_error=True, content=[types.TextContent(type="text", text=str(exc))])
        return types.CallToolResult(is_error=reply.isError, content=_content(reply))

    return Server("notebook", version=VERSION, instructions=instructions,
                  on_list_tools=list_tools, on_call_tool=call_tool)


async def serve(connection_file: str, token: str) -> int:
    link = KernelLink(connection_file, token)
    try:
        ready = await link.connect()
    except KernelGone as exc:
        print(f"notebook MCP server: {exc}", file=sys.stderr)
        link.close()
        return 3
    server = build_server(link, ready)
    try:
        async with anyio.create_task_group() as group:

            async def stop_when_gone() -> None:
                await link.gone.wait()
                print(f"notebook MCP server: {link.why}; exiting", file=sys.stderr)
                link.close()
                sys.stderr.flush()
                # The SDK reads stdin in a worker thread that no cancellation can stop while
                # the agent keeps the pipe open: leave now (nothing is left to flush).
                os._exit(0)

            group.start_soon(stop_when_gone)
            async with stdio_server() as (read_stream, write_stream):
                await server.run(read_stream, write_stream, server.create_initialization_options())
            group.cancel_scope.cancel()  # stdin closed: the agent went away
    finally:
        link.close()
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="acp-kernel mcp",
                                description="The notebook MCP server (started by an agent from the "
                                "entry the notebook offered; speaks MCP on stdio).")
    p.add_argument("--connection-file", required=True, help="the kernel's connection file")
    p.add_argument("--token", required=True, help="the token the kernel issued for this session")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if not os.path.isfile(args.connection_file):
        print(f"notebook MCP server: no connection file at {args.connection_file!r} "
              "(has the kernel stopped?)", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    try:
        return anyio.run(serve, args.connection_file, args.token)
    except KeyboardInterrupt:
        return 130
