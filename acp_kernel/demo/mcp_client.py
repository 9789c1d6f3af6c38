"""The demo agent's MCP client: start a stdio server from an ACP ``mcpServers`` entry and call its tools.

The demo agent is a script, but the ``notebook`` word makes it a real MCP client of the
server the client offers in ``session/new`` (issue 16), so the tour shows the notebook
tools without a model. The official ``mcp`` SDK does the protocol; this module adds
what the agent needs around it:

- ``stdio_entries()``: the stdio entries of an ``mcpServers`` list, validated with the
  ACP schema (``acp.schema.McpServerStdio``); other transports and bad entries are
  skipped with a line on stderr. Imports ``acp.schema`` only when a list is non-empty.
- ``McpClient``: one server process and one MCP session. The SDK's context managers
  hold anyio task groups that must be entered and left in the same task, so a private
  owner task opens them, waits for ``aclose()``, and closes them (the SDK closes the
  server's stdin, then terminates its process group). Calls come from other tasks.
- ``ToolResult``: what a call returned, as plain data (texts, images, isError).

Cancelling the task awaiting ``call()`` cancels the MCP request (the SDK sends
``notifications/cancelled``) and re-raises ``CancelledError``.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
import os
import sys
from dataclasses import dataclass, field
from typing import Any

from ..errors import AcpError

log = logging.getLogger("acp_kernel.demo.mcp_client")

#: Seconds to start a server and finish the MCP handshake (its imports can be slow).
START_TIMEOUT = 60.0
#: Seconds to wait for the SDK's shutdown (stdin close, 2 s grace, SIGTERM, SIGKILL).
CLOSE_TIMEOUT = 8.0
#: A text block longer than this is cut (with a note): the agent only reports it.
MAX_TEXT = 100_000
#: Image types passed on as ACP image blocks (no SVG: it is a document, not pixels).
IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
MAX_IMAGE_BASE64 = 8 * 1024 * 1024


class McpClientError(AcpError):
    """The server could not be started, or a call failed at the protocol level."""


@dataclass(frozen=True)
class ServerEntry:
    """An ACP ``McpServerStdio`` entry, as plain data."""

    name: str
    command: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()


def stdio_entries(raw: Any) -> list[ServerEntry]:
    """The valid stdio entries of an ``mcpServers`` value (anything else is logged and skipped)."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        log.warning("mcpServers is not a list (%s): ignored", type(raw).__name__)
        return []
    if not raw:
        return []
    from ..protocol.schema import McpServerStdio  # lazy: start-up time (about 0.45 s of CPU: only when servers are offered)
    from pydantic import ValidationError

    out: list[ServerEntry] = []
    for i, item in enumerate(raw):
        kind = item.get("type") if isinstance(item, dict) else None
        if kind not in (None, "stdio"):
            log.warning("mcpServers[%d]: transport %r is not supported (stdio only): ignored", i, kind)
            continue
        try:
            entry = McpServerStdio.model_validate(item)
        except ValidationError as exc:
            log.warning("mcpServers[%d]: not a valid stdio entry, ignored: %s", i, _one_line(str(exc)))
            continue
        out.append(
            ServerEntry(
                name=entry.name,
                command=entry.command,
                args=tuple(entry.args),
                env=tuple((e.name, e.value) for e in entry.env),
            )
        )
    return out


def _one_line(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "…"


@dataclass
class ToolResult:
    """A ``tools/call`` result: text blocks, valid images, notes about what was left out."""

    is_error: bool
    texts: list[str] = field(default_factory=list)
    #: (mimeType, base64 data), checked: a known raster type and valid base64
    images: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "\n".join(self.texts)


def _valid_image(mime: str, data: str) -> str | None:
    """None when the image can be passed on, else why not."""
    if mime not in IMAGE_TYPES:
        return f"an image of type {mime!r} was left out (only {', '.join(sorted(IMAGE_TYPES))} are shown)"
    if len(data) > MAX_IMAGE_BASE64:
        return f"an image of {len(data)} base64 characters was left out (limit {MAX_IMAGE_BASE64})"
    try:
        base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return "an image whose data is not valid base64 was left out"
    return None


def convert_result(result: Any) -> ToolResult:
    """An SDK ``CallToolResult`` as a ``ToolResult`` (unknown block types become notes)."""
    out = ToolResult(is_error=bool(getattr(result, "is_error", False)))
    for block in getattr(result, "content", None) or []:
        kind = getattr(block, "type", None)
        if kind == "text":
            text = str(block.text)
            if len(text) > MAX_TEXT:
                text = text[:MAX_TEXT] + f"\n[cut: {len(block.text) - MAX_TEXT} more characters]"
            out.texts.append(text)
        elif kind == "image":
            mime, data = str(block.mime_type), str(block.data)
            why = _valid_image(mime, data)
            if why is None:
                out.images.append((mime, data))
            else:
                out.notes.append(why)
        else:
            out.notes.append(f"a {kind!r} block was left out (not shown by the demo agent)")
    return out


class McpClient:
    """One stdio MCP server and its session; ``open()`` once, ``call()`` many times, ``aclose()``."""

    def __init__(self, entry: ServerEntry, cwd: str | None = None, *, client_name: str = "acp-kernel-demo",
                 client_version: str = "0") -> None:
        self.entry = entry
        self.cwd = cwd if cwd and os.path.isdir(cwd) else None
        self.client_name = client_name
        self.client_version = client_version
        self.tools: list[str] = []
        self.instructions: str | None = None
        self._session: Any = None
        self._owner: asyncio.Task[None] | None = None
        self._ready: asyncio.Future[None] | None = None
        self._stop = asyncio.Event()
        self._closed = False
        #: the connection closed under us (the server exited): a new client is needed
        self._broken = False

    @property
    def usable(self) -> bool:
        """Not closed and not failed: ``open()`` may (still) succeed."""
        return not (self._closed or self._broken) and (self._owner is None or not self._owner.done())

    @property
    def is_open(self) -> bool:
        return self._session is not None and self._owner is not None and not self._owner.done()

    async def open(self, timeout: float = START_TIMEOUT) -> None:
        """Start the server, initialize, list its tools. Raises McpClientError."""
        if self._closed:
            raise McpClientError("this MCP client is closed")
        if self._owner is None:
            loop = asyncio.get_running_loop()
            self._ready = loop.create_future()
            self._ready.add_done_callback(lambda f: f.cancelled() or f.exception())  # retrieved: no GC warning
            self._owner = loop.create_task(self._own(), name=f"mcp-{self.entry.name}")
        assert self._ready is not None
        try:
            await asyncio.wait_for(asyncio.shield(self._ready), timeout)
        except asyncio.TimeoutError:
            await self.aclose()
            raise McpClientError(f"the MCP server {self.entry.name!r} did not answer within {timeout:g} s") from None

    async def _own(self) -> None:
        """The owner task: the SDK's context managers live and die here."""
        from mcp.client.session import ClientSession
        from mcp.client.stdio import StdioServerParameters, stdio_client
        from mcp_types import Implementation

        assert self._ready is not None
        params = StdioServerParameters(
            command=self.entry.command, args=list(self.entry.args), env=dict(self.entry.env) or None, cwd=self.cwd
        )
        try:
            async with stdio_client(params, errlog=sys.stderr) as (read, write):
                async with ClientSession(
                    read, write, client_info=Implementation(name=self.client_name, version=self.client_version)
                ) as session:
                    init = await session.initialize()
                    self.instructions = init.instructions
                    listed = await session.list_tools()
                    self.tools = [t.name for t in listed.tools]
                    self._session = session
                    log.info("MCP server %r ready: tools %s", self.entry.name, self.tools)
                    if not self._ready.done():
                        self._ready.set_result(None)
                    await self._stop.wait()
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # noqa: BLE001 - reported to open(), which raises a clear error
            log.warning("MCP server %r failed: %s", self.entry.name, _one_line(repr(exc)))
            if not self._ready.done():
                why = _describe(exc)
                if "Connection closed" in why:
                    why = "it closed the connection during the MCP handshake (its stderr is in the agent's log)"
                self._ready.set_exception(McpClientError(f"could not start the MCP server {self.entry.name!r}: {why}"))
        finally:
            self._session = None
            if not self._ready.done():
                self._ready.set_exception(McpClientError(f"the MCP server {self.entry.name!r} closed before it was ready"))

    async def call(self, tool: str, arguments: dict[str, Any], timeout: float) -> ToolResult:
        """Call ``tool``; raises McpClientError on a protocol error, a timeout or a closed server."""
        from mcp.shared.exceptions import MCPError
        from mcp_types import CONNECTION_CLOSED

        session = self._session
        if session is None or not self.is_open:
            raise McpClientError(f"the MCP server {self.entry.name!r} is not running")
        try:
            result = await session.call_tool(tool, arguments, read_timeout_seconds=timeout)
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED:
                self._broken = True  # the server is gone: let the owner task finish
                self._stop.set()
                raise McpClientError(f"{tool}: the MCP server {self.entry.name!r} closed the connection") from None
            raise McpClientError(f"{tool}: {exc}") from None
        except (OSError, RuntimeError, ValueError) as exc:  # the SDK's documented failures, and a bad result
            raise McpClientError(f"{tool}: {_describe(exc)}") from None
        return convert_result(result)

    async def aclose(self, timeout: float = CLOSE_TIMEOUT) -> None:
        """Stop the server (idempotent, bounded); afterwards no process of it is left."""
        self._closed = True
        self._stop.set()
        owner = self._owner
        if owner is None or owner.done():
            return
        if self._session is None:
            owner.cancel()  # still starting: nothing to wait for (the SDK still stops the process)
        done, _ = await asyncio.wait({owner}, timeout=timeout)
        if not done:
            log.warning("MCP server %r did not close within %g s: cancelling its task", self.entry.name, timeout)
            owner.cancel()
            await asyncio.wait({owner}, timeout=timeout)


def _describe(exc: BaseException) -> str:
    """One line for an exception, unwrapping the exception groups anyio raises."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc) or type(exc).__name__
    return _one_line(f"{type(exc).__name__}: {text}" if type(exc).__name__ not in text else text)
