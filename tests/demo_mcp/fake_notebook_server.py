"""A stand-in `notebook` MCP server for the demo agent's tests (the real one is acp_kernel.notebook_mcp).

Speaks MCP over stdio with the official SDK (``MCPServer``, formerly FastMCP) and offers
the real server's tool names with canned, input-dependent answers, so the demo agent's
MCP client is tested without a kernel:

- ``execute(code)``: ``"ran: <code>"`` plus a fake result; the code ``refuse`` answers
  isError ("refused by the user"); ``sleep`` waits an hour (to test cancel); ``die`` exits
  mid-call; ``hostile``
  answers with raw HTML, a code span across a line break and a path with a newline;
  ``plot`` adds a PNG image and an image whose data is not base64.
- ``variables(name=None)``: a fixed table, or one variable's detail; it also reports how
  many calls were cancelled so far (so a test can see the cancel reached the server).
- ``cells()``: two cells.

Environment (the ACP ``env`` entries): ``FAKE_NOTEBOOK_EVENTS``, a Unix socket path: the
server connects there and reports, one line each, ``started <pid>``, ``sleeping``,
``cancelled`` and, when it ends on stdin EOF (a clean MCP shutdown), ``bye``, so a test
waits on events instead of polling. ``FAKE_NOTEBOOK_TOOLS``: a comma separated subset of
the tools to offer.
"""

from __future__ import annotations

import base64
import os
import socket
import sys

import anyio
import mcp_types as types
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

HOSTILE = (
    "<img src=x onerror=alert(1)>\n"
    "a `code span\nacross a line break`\n"
    "/tmp/evil\nname.ipynb"
)
# A 1x1 transparent PNG.
PNG = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d49444154789c6300010000050001"
        "0d0a2db40000000049454e44ae426082"
    )
).decode()

state = {"cancelled": 0, "calls": 0}
_events: socket.socket | None = None


def report(line: str) -> None:
    if _events is not None:
        try:
            _events.sendall(line.encode() + b"\n")
        except OSError:
            pass  # the test stopped listening

server = MCPServer("notebook", instructions="A stand-in notebook server for tests.")
offered = set(filter(None, os.environ.get("FAKE_NOTEBOOK_TOOLS", "execute,variables,cells").split(",")))


def maybe_tool(fn):
    return server.tool(description=(fn.__doc__ or "").strip())(fn) if fn.__name__ in offered else fn


@maybe_tool
async def execute(code: str) -> list[types.TextContent | types.ImageContent]:
    """Run Python code in the user's kernel (canned answers)."""
    state["calls"] += 1
    code = code.strip()
    if code == "refuse":
        raise ToolError("refused by the user: not allowed to run this code")
    if code == "sleep":
        report("sleeping")
        try:
            await anyio.sleep(3600)
        except anyio.get_cancelled_exc_class():
            state["cancelled"] += 1
            report("cancelled")
            raise
    if code == "die":
        report("dying")
        os._exit(3)  # the server goes away mid-call (a kernel that stopped, a withdrawn offer)
    if code == "hostile":
        return [types.TextContent(type="text", text=HOSTILE)]
    out: list[types.TextContent | types.ImageContent] = [
        types.TextContent(type="text", text=f"ran: {code}\nresult: {len(code)} characters")
    ]
    if code == "plot":
        out.append(types.ImageContent(type="image", data=PNG, mime_type="image/png"))
        out.append(types.ImageContent(type="image", data="not base64 !!", mime_type="image/png"))
        out.append(types.ImageContent(type="image", data=PNG, mime_type="image/svg+xml"))
    return out


@maybe_tool
async def variables(name: str | None = None) -> str:
    """Names, types and previews of the user's variables (canned)."""
    state["calls"] += 1
    if name:
        return f"{name}: int = 1 (detail)\ncancelled so far: {state['cancelled']}"
    return f"x: int = 1\ndf: DataFrame (3, 2)\ncancelled so far: {state['cancelled']}"


@maybe_tool
async def cells() -> str:
    """The notebook's cells (canned)."""
    state["calls"] += 1
    return "[1] x = 1\n[2] df.plot()"


def main() -> None:
    global _events
    path = os.environ.get("FAKE_NOTEBOOK_EVENTS")
    if path:
        _events = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        _events.connect(path)
    report(f"started {os.getpid()}")
    print("fake notebook server started", file=sys.stderr)
    server.run("stdio")
    report("bye")


if __name__ == "__main__":
    main()
