"""End to end, no agent: a real python3 kernel with a test bridge, and the SDK's MCP
client starting the server from the entry the kernel offered."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, AsyncIterator

import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

from acp_kernel.notebook_mcp.docwire import (CELL_SOURCE_LIMIT, CELLS_BUDGET, DOCUMENT_TARGET, SNAPSHOT_TIMEOUT, SOURCE_CHARS,
                                              TOTAL_CHARS)
from acp_kernel.notebook_mcp.wire import MAX_IMAGES, MAX_TEXT
from acp_kernel.protocol import proctree


def params(entry: dict) -> StdioServerParameters:
    return StdioServerParameters(command=entry["command"], args=entry["args"],
                                 env={k: v for k, v in os.environ.items() if k in ("PYTHONPATH",)})


@contextlib.asynccontextmanager
async def mcp_session(entry: dict) -> AsyncIterator[ClientSession]:
    """The SDK's client on the server the entry starts; the server's stderr is printed
    (pytest shows it when a test fails)."""
    with tempfile.TemporaryFile("w+") as errlog:
        try:
            async with stdio_client(params(entry), errlog=errlog) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    yield session
        finally:
            errlog.seek(0)
            print("server stderr:", errlog.read())


def server_pids(token: str) -> set[int]:
    """Our descendant processes running the server for ``token``."""
    found = set()
    for pid in proctree.tree(os.getpid()):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if token.encode() in cmdline and proctree.alive(pid):
            found.add(pid)
    return found


async def wait_gone(pids: set[int], timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while any(proctree.alive(p) for p in pids):
        if time.monotonic() > deadline:
            raise AssertionError(f"the server {pids} did not exit in time")
        await asyncio.sleep(0.05)


def text(result) -> str:
    return "\n".join(c.text for c in result.content if c.type == "text")


async def test_tools_listed_with_schemas_and_cells_from_the_file(kernel, tmp_path):
    import nbformat

    notebook = tmp_path / "analysis.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("df = load()")]), str(notebook))
    entry = await kernel.offer(notebook=str(notebook))
    assert entry["name"] == "notebook" and entry["command"] == sys.executable and entry["env"] == []
    async with mcp_session(entry) as session:
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert list(tools) == ["execute", "variables", "cells"]
        assert tools["execute"].input_schema["required"] == ["code"]
        assert "name" in tools["variables"].input_schema["properties"]
        assert "unsaved edits included" in tools["cells"].description  # and its budgets
        assert all(f"{n:,}" in tools["cells"].description for n in (CELLS_BUDGET, CELL_SOURCE_LIMIT))
        assert "live" in session.instructions or "kernel" in session.instructions
        cells = await session.call_tool("cells", {})
        assert "1 cell," in text(cells) and "df = load()" in text(cells) and str(notebook) in text(cells)
        # no page with the front-end extension here: the file, saying so and how old it is
        assert text(cells).startswith("The notebook as last saved (unsaved edits are not included: no "
                                      "notebook page with acp-kernel's JupyterLab / Notebook 7 extension is "
                                      "connected to this kernel). The file was saved ")


async def test_execute_then_variables_then_execute_again(kernel):
    entry = await kernel.offer()
    async with mcp_session(entry) as session:
        first = await session.call_tool("execute", {"code": "x = 41 + 1\nprint('hello')\nx"})
        assert not first.is_error, text(first)
        assert "hello" in text(first) and "42" in text(first)
        listed = await session.call_tool("variables", {})
        assert "x: int = 42" in text(listed)
        one = await session.call_tool("variables", {"name": "x"})
        assert "x: int" in text(one) and "42" in text(one)
        second = await session.call_tool("execute", {"code": "x * 2"})
        assert "84" in text(second)
    # the print went to the view, not into a cell
    writes = [e for e in kernel.recorded() if e["kind"] == "write"]
    assert writes and writes[0] == {"kind": "write", "name": "stdout", "text": "hello"}
    assert [e["summary"] for e in kernel.recorded() if e["kind"] == "done"] == ["42", "84"]
    # the agent's variable is the user's: the next cell sees it
    assert (await kernel.run("print(x)")).strip() == "42"


#: A valid 1x1 PNG, displayed by the agent's code.
PNG_CODE = ("import base64\nfrom IPython.display import Image, display\n"
            "png = base64.b64decode('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGD4DwABBAEAwS2OUAAAAABJRU5ErkJggg==')\n"
            "display(Image(data=png, format='png'))\ndisplay('a displayed string')\n"
            "import sys; print('to stderr', file=sys.stderr)\n")


async def test_errors_images_and_bad_calls(kernel):
    entry = await kernel.offer()
    async with mcp_session(entry) as session:
        failed = await session.call_tool("execute", {"code": "def f():\n    return 1 / 0\nf()"})
        assert failed.is_error
        assert "ZeroDivisionError" in text(failed) and "return 1 / 0" in text(failed)
        assert "notebook_mcp" not in text(failed)  # our frames are not in the traceback

        shown = await session.call_tool("execute", {"code": PNG_CODE})
        assert not shown.is_error, text(shown)
        images = [c for c in shown.content if c.type == "image"]
        assert len(images) == 1 and images[0].mime_type == "image/png"
        assert images[0].data.startswith("iVBORw0KGgo")
        assert "a displayed string" in text(shown) and "to stderr" in text(shown)

        # display() in a loop: the first images and a count come back, nothing else is kept.
        many = await session.call_tool("execute", {"code": PNG_CODE + "for i in range(500):\n"
                                                   "    display(Image(data=png, format='png')); display(f'<b>{i}</b>')\n"})
        assert len([c for c in many.content if c.type == "image"]) == MAX_IMAGES, text(many)
        assert f"[{501 - MAX_IMAGES} × image past the first {MAX_IMAGES} left out]" in text(many)
        assert "<b>499</b>" in text(many) and len(text(many)) <= MAX_TEXT + 200

        big = await session.call_tool("execute", {"code": "print('y' * 100_000)"})
        assert "characters cut" in text(big) and len(text(big)) < 25_000

        missing = await session.call_tool("variables", {"name": "nope"})
        assert missing.is_error and "No user variable" in text(missing)

        bad = await session.call_tool("execute", {"source": "1"})
        assert bad.is_error and "code" in text(bad)
        with pytest.raises(MCPError, match="unknown tool"):
            await session.call_tool("delete_everything", {})
    # nothing the agent displayed leaked into a cell: the kernel's next cell shows only its own
    assert (await kernel.run("print('clean')")).strip() == "clean"


async def test_deny_is_respected(kernel):
    entry = await kernel.offer(allow=False)
    async with mcp_session(entry) as session:
        result = await session.call_tool("execute", {"code": "denied_name = 1"})
        assert result.is_error and "the user chose Reject (test bridge)" in text(result)
        listed = await session.call_tool("variables", {})
        assert "denied_name" not in text(listed)
    kinds = [e["kind"] for e in kernel.recorded()]
    assert kinds == ["authorize"]  # asked, never started
    assert (await kernel.run("print('denied_name' in globals())")).strip() == "False"


async def test_interrupt_stops_execute_and_the_kernel_lives_on(kernel):
    entry = await kernel.offer()
    async with mcp_session(entry) as session:
        call = asyncio.create_task(session.call_tool(
            "execute", {"code": "import time\nstarted_sleeping = True\ntime.sleep(60)\nnever = 1"}))
        await kernel.wait_recorded("started")
        # "started" is recorded just before the code runs: interrupt until the call ends
        # (a SIGINT that lands before the sleep still lands inside the run)
        await kernel.km.interrupt_kernel()
        result = await asyncio.wait_for(call, 30)
        assert result.is_error and "interrupted by the user" in text(result)
        assert kernel.recorded()[-1] == {"kind": "interrupted"}
        assert {"kind": "done", "ok": False, "summary": "interrupted"} in kernel.recorded()
        again = await session.call_tool("execute", {"code": "'never' in globals(), 6 * 7"})
        assert "(False, 42)" in text(again)
    assert (await kernel.run("print(started_sleeping)")).strip() == "True"


async def test_answered_while_a_cell_awaits(kernel):
    entry = await kernel.offer()
    await kernel.run("import asyncio\ngate = asyncio.Event()")
    cell = kernel.send("await asyncio.wait_for(gate.wait(), 60)\nprint('gate opened')")
    async with mcp_session(entry) as session:
        listed = await session.call_tool("variables", {})
        assert "gate: asyncio.locks.Event" in text(listed)
        # the %%acp case: an interrupt during an execute stops the code, not the awaiting cell
        sleeping = asyncio.create_task(session.call_tool("execute", {"code": "import time\ntime.sleep(60)"}))
        await kernel.wait_recorded("started")
        await kernel.km.interrupt_kernel()
        assert "interrupted by the user" in text(await asyncio.wait_for(sleeping, 30))
        opened = await session.call_tool("execute", {"code": "gate.set()"})
        assert not opened.is_error, text(opened)
    content, out = await kernel.finish(cell)
    assert content["status"] == "ok" and out.strip() == "gate opened"


async def test_withdraw_ends_the_server(kernel):
    entry = await kernel.offer()
    token = entry["args"][-1]
    async with mcp_session(entry) as session:
        assert (await session.list_tools()).tools
        pids = server_pids(token)
        assert len(pids) == 1
        await kernel.run(f"kernel_bridge.stop({token!r})")
        await wait_gone(pids)


async def test_closing_stdin_ends_the_server(kernel):
    entry = await kernel.offer()
    proc = await asyncio.create_subprocess_exec(
        entry["command"], *entry["args"], stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        # an initialize request answered: the server is connected and serving
        proc.stdin.write(b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":'
                         b'"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}\n')
        await proc.stdin.drain()
        line = await asyncio.wait_for(proc.stdout.readline(), 30)
        assert b'"serverInfo"' in line and b'"notebook"' in line
        proc.stdin.close()
        assert await asyncio.wait_for(proc.wait(), 20) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_unknown_token_is_refused(kernel):
    entry = await kernel.offer()
    args = list(entry["args"])
    args[-1] = "not-a-token"
    proc = await asyncio.create_subprocess_exec(
        entry["command"], *args, stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        _, err = await asyncio.wait_for(proc.communicate(), 30)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode != 0
    assert b"unknown token" in err


async def test_only_the_bridge_tools_are_offered(kernel):
    entry = await kernel.offer(tools=("cells",))
    async with mcp_session(entry) as session:
        assert [t.name for t in (await session.list_tools()).tools] == ["cells"]
        assert "only cells is offered" in session.instructions
        cells = await session.call_tool("cells", {})
        assert "does not know its notebook file" in text(cells) and "from history" in text(cells)
        with pytest.raises(MCPError, match="unknown tool"):
            await session.call_tool("execute", {"code": "1"})


async def test_the_cli_subcommand_is_the_same_server(kernel):
    entry = await kernel.offer(tools=("variables",))
    connection, token = entry["args"][-3], entry["args"][-1]
    cli = dict(entry, args=["-m", "acp_kernel", "mcp", "--connection-file", connection, "--token", token])
    async with mcp_session(cli) as session:
        assert [t.name for t in (await session.list_tools()).tools] == ["variables"]
        assert not (await session.call_tool("variables", {})).is_error


async def test_the_server_ends_when_the_kernel_dies(kernel):
    import signal

    entry = await kernel.offer()
    proc = await asyncio.create_subprocess_exec(
        entry["command"], *entry["args"], stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        proc.stdin.write(b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":'
                         b'"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}\n')
        await proc.stdin.drain()
        assert b'"serverInfo"' in await asyncio.wait_for(proc.stdout.readline(), 30)
        await kernel.km.signal_kernel(signal.SIGKILL)
        # the heartbeat stops: the server leaves on its own, its stdin still open
        assert await asyncio.wait_for(proc.wait(), 60) == 0
        assert b"heartbeat" in await proc.stderr.read()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_connecting_while_a_cell_blocks_keeps_one_comm(kernel, tmp_path):
    """A cell that does not await holds the kernel while the server connects: its
    repeated opens queue up, one is kept and the others are closed."""
    entry = await kernel.offer()
    token = entry["args"][-1]
    flag = tmp_path / "go"
    cell = kernel.send(f"import os, time\nfor _ in range(600):\n    if os.path.exists({str(flag)!r}): break\n"
                       "    time.sleep(0.05)")
    open_comms = ("from acp_kernel.notebook_mcp import host\n"
                  f"print(len(host._comms.get({token!r}, [])))")

    async def comms_become(n: str) -> None:
        deadline = time.monotonic() + 20
        while (count := (await kernel.run(open_comms)).strip()) != n:
            assert time.monotonic() < deadline, f"{count} comms open, not {n}"
            await asyncio.sleep(0.1)

    answered, release = asyncio.Event(), asyncio.Event()

    async def use() -> str:
        async with mcp_session(entry) as session:
            result = text(await session.call_tool("execute", {"code": "40 + 2"}))
            answered.set()
            await release.wait()
            return result

    session_task = asyncio.create_task(use())
    await wait_until(lambda: server_pids(token))
    await asyncio.sleep(4)  # let the server start and repeat its open (any number >= 1 will do)
    flag.write_text("")
    assert (await kernel.finish(cell))[0]["status"] == "ok"
    answer = asyncio.create_task(answered.wait())
    await asyncio.wait([answer, session_task], timeout=60, return_when=asyncio.FIRST_COMPLETED)
    if session_task.done():  # it failed before answering: show why
        session_task.result()
    assert answer.done(), "no answer in time"
    await comms_become("1")  # the repeated opens were closed
    release.set()
    assert "42" in await asyncio.wait_for(session_task, 60)
    await comms_become("0")  # the session ended: the server closed its comm


async def wait_until(predicate, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)


async def test_a_real_dataframe_and_a_matplotlib_figure(kernel):
    """pandas and matplotlib as a data notebook has them (the inline backend):
    a DataFrame's shape, dtypes and head; a figure the code drew comes back as
    a PNG and does not pop up in a later cell."""
    pytest.importorskip("pandas")
    pytest.importorskip("matplotlib")
    await kernel.run("%matplotlib inline\nimport pandas as pd\n"
                     "df = pd.DataFrame({'city': ['Oslo', '<b>Rome</b>'], 'temp': [3.5, 14.0]})")
    entry = await kernel.offer()
    async with mcp_session(entry) as session:
        listed = text(await session.call_tool("variables", {}))
        assert "1 user variable " in listed and "df: pandas.DataFrame" in listed and "(2, 2)" in listed, listed
        assert "open:" not in listed  # ipykernel's own open() is not the user's
        one = text(await session.call_tool("variables", {"name": "df"}))
        assert "city" in one and "temp" in one and "float64" in one and "Oslo" in one, one
        drawn = await session.call_tool("execute", {"code": "import matplotlib.pyplot as plt\n"
                                                             "plt.plot(df.temp)\nplt.title('temps')"})
        assert not drawn.is_error, text(drawn)
        images = [c for c in drawn.content if c.type == "image"]
        assert len(images) == 1 and images[0].mime_type == "image/png", text(drawn)
        assert images[0].data.startswith("iVBORw0KGgo")
        # Many figures: the first ones are drawn, the rest counted and closed undrawn.
        lots = await session.call_tool("execute", {"code": "for i in range(12):\n    plt.figure(); plt.plot([i, 0])"})
        assert len([c for c in lots.content if c.type == "image"]) == MAX_IMAGES, text(lots)
        assert f"[{12 - MAX_IMAGES} × image past the first {MAX_IMAGES} left out]" in text(lots)
    assert (await kernel.run("import matplotlib.pyplot as plt; print(plt.get_fignums())")).strip() == "[]"


# -- the live notebook: this test plays the notebook page (the front-end extension's side
# of the document comm) through a second client of the same kernel

@contextlib.asynccontextmanager
async def page_client(kernel) -> AsyncIterator[Any]:
    from jupyter_client.session import Session

    # A session of its own: one id for two clients would route the kernel's replies to either.
    page = kernel.km.client(session=Session(key=kernel.km.session.key))
    page.start_channels()
    try:
        await page.wait_for_ready(timeout=60)
        yield page
    finally:
        page.stop_channels()


async def document_comms(page) -> list[dict]:
    reply = await page.comm_info(target_name=DOCUMENT_TARGET, reply=True, timeout=30)
    return list(reply["content"]["comms"].values())


async def comm_message(page, comm_id: str, timeout: float = 30) -> tuple[str, dict]:
    """The next comm_msg or comm_close the kernel sends on ``comm_id``."""
    deadline = time.monotonic() + timeout
    while True:
        msg = await page.get_iopub_msg(timeout=max(0.1, deadline - time.monotonic()))
        content = msg["content"]
        if msg["msg_type"] in ("comm_msg", "comm_close") and content.get("comm_id") == comm_id:
            return msg["msg_type"], content.get("data") or {}


def page_send(page, msg_type: str, content: dict) -> None:
    page.shell_channel.send(page.session.msg(msg_type, content))


async def open_document(page, path: str, protocol: int = 1) -> tuple[str, str, dict]:
    comm_id = uuid.uuid4().hex
    page_send(page, "comm_open", {"comm_id": comm_id, "target_name": DOCUMENT_TARGET,
                                  "data": {"type": "hello", "protocol": protocol, "path": path, "app": "test"}})
    kind, data = await comm_message(page, comm_id)
    return comm_id, kind, data


async def test_cells_reads_the_live_notebook_from_the_page(kernel, tmp_path):
    import nbformat

    notebook = tmp_path / "analysis.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("df = load()")]), str(notebook))
    async with page_client(kernel) as page:
        assert await document_comms(page) == []  # a plain python3 kernel: the page opens nothing
        entry = await kernel.offer(notebook=str(notebook))
        assert await document_comms(page) == [{"target_name": DOCUMENT_TARGET}]  # the anchor
        _, kind, refused = await open_document(page, "analysis.ipynb", protocol=99)
        assert kind == "comm_msg" and refused["type"] == "refused"
        comm_id, kind, welcome = await open_document(page, "analysis.ipynb")
        assert (kind, welcome) == ("comm_msg", {"type": "welcome", "protocol": 1})
        async with mcp_session(entry) as session:
            call = asyncio.create_task(session.call_tool("cells", {}))
            kind, request = await comm_message(page, comm_id)
            assert request["type"] == "snapshot_request" and request["caps"]["total_chars"] == TOTAL_CHARS
            page_send(page, "comm_msg", {"comm_id": comm_id, "data": {
                "type": "snapshot", "id": request["id"], "path": "analysis.ipynb", "dirty": True, "active": 1,
                "cells": [{"id": "a1", "cell_type": "code", "source": {"head": "df = load()"}, "execution_count": 1},
                          {"id": "b2", "cell_type": "code", "source": {"head": "df.plot()  # typed, unsaved"}}]}})
            live = text(await asyncio.wait_for(call, 30))
            assert live.startswith("The notebook as it is now in the user's page (live, unsaved edits included")
            assert "df.plot()  # typed, unsaved" in live
            assert ('## Cell 2: code, id "b2" (active: the user\'s cursor is here)' in live)
            # a page that answers nothing: the saved file after the timeout, saying why
            call = asyncio.create_task(session.call_tool("cells", {}))
            kind, request = await comm_message(page, comm_id)
            started = time.monotonic()
            saved = text(await asyncio.wait_for(call, 30))
            assert time.monotonic() - started < 20
            assert saved.startswith("The notebook as last saved (unsaved edits are not included: the notebook "
                                    f"page did not answer within {SNAPSHOT_TIMEOUT:g} s). The file was saved ")
            # a page that sends more than the bounds: refused, and said so
            call = asyncio.create_task(session.call_tool("cells", {}))
            kind, request = await comm_message(page, comm_id)
            page_send(page, "comm_msg", {"comm_id": comm_id, "data": {
                "type": "snapshot", "id": request["id"],
                "cells": [{"cell_type": "code", "source": {"head": "x" * 10 * SOURCE_CHARS}}]}})
            refused = text(await asyncio.wait_for(call, 30))
            assert "the notebook page's snapshot was refused (1 problems; first at cells.0.source.head" in refused
            # a page that could not read its notebook says so, and that is passed on
            call = asyncio.create_task(session.call_tool("cells", {}))
            kind, request = await comm_message(page, comm_id)
            page_send(page, "comm_msg", {"comm_id": comm_id, "data": {
                "type": "error", "id": request["id"], "error": "TypeError: no model"}})
            failed = text(await asyncio.wait_for(call, 30))
            assert "the notebook page could not read the notebook (TypeError: no model)" in failed
