"""The kernel side: tokens, the comm target, dispatch of tool calls, and ``execute``
on the kernel's main thread (so an interrupt, SIGINT, stops the agent's code).

A comm message is handled on the kernel's event loop, also while a cell awaits (the
``%%acp`` turn): the handler schedules a task there, which may wait for the user's
permission, then runs the code synchronously on the loop's thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import logging
import secrets
import signal
import sys
import threading
from typing import Any, Iterator, Protocol, runtime_checkable

from pydantic import ValidationError

from .. import compat
from ..client.notebook import INSERT_TITLE, Origin
from . import document, tools
from .wire import (ARGS, COMM_TARGET, PROPOSAL_TIMEOUT, TOOLS, DeleteCellArgs, EditCellArgs, ExecuteArgs,
                   InsertCellArgs, Open, Ready, Refused, Reply, Request, RunCellArgs, Text, VariablesArgs, error_reply)

log = logging.getLogger(__name__)


@runtime_checkable
class RunView(Protocol):
    """Where one ``execute`` shows live in the notebook (the cell running the turn)."""

    def write(self, name: str, text: str) -> None: ...  # name "stdout" | "stderr"
    def done(self, ok: bool, summary: str) -> None: ...  # summary: one line


@runtime_checkable
class NotebookBridge(Protocol):
    """What the owner of a session (an ACP session, a passthrough terminal) lends the
    server: its namespace, its notebook, its permission broker and its view."""

    tools: frozenset[str]

    def namespace(self) -> dict | None: ...
    def notebook_path(self) -> str | None: ...
    def history(self) -> list[str]: ...
    async def authorize(self, code: str, title: str = ..., kind: str = ...) -> tuple[bool, str]: ...
    def started(self, code: str) -> RunView: ...
    def interrupted(self) -> None: ...
    def policy(self) -> str: ...  # the permission policy: ask, allow-reads, allow-all, deny
    def origin(self) -> Origin: ...  # the notebook request of the running turn (the page groups proposals by it)
    def show(self, title: str, text: str) -> None: ...  # a proposal no page shows: as text in the turn
    def next_input(self, text: str) -> str: ...  # a new cell below the turn's when it ends (set_next_input): "" or why not


_bridges: dict[str, NotebookBridge] = {}
#: The open comms of each token; a token is a key from its first connection (the agent
#: started a server) until it is withdrawn.
_comms: dict[str, list[Any]] = {}
_tasks: set[asyncio.Task] = set()  # running tool calls (a task nobody holds may be collected)


def offer(bridge: NotebookBridge) -> dict | None:
    """Register ``bridge`` under a fresh token; the ACP ``McpServerStdio`` entry that
    starts a server for it, or None when this process is not a Jupyter kernel."""
    try:
        from ipykernel.connect import get_connection_file

        connection_file = get_connection_file()
        import comm

        manager = comm.get_comm_manager()
    except Exception:  # noqa: BLE001 - not in a kernel: no app, no connection file
        return None
    if manager is None or not connection_file:
        return None
    if manager.targets.get(COMM_TARGET) is not _on_open:
        manager.register_target(COMM_TARGET, _on_open)
    document.register()  # a python3 kernel that connects through the API, without the magics
    token = secrets.token_hex(24)  # never starts with '-', which argparse would read as an option
    _bridges[token] = bridge
    return {"name": "notebook", "command": sys.executable,
            "args": ["-m", "acp_kernel.notebook_mcp", "--connection-file", str(connection_file),
                     "--token", token],
            "env": []}


def token_of(entry: dict | str) -> str | None:
    """The token in an :func:`offer` entry (or the token itself)."""
    if isinstance(entry, str):
        return entry
    args = list(entry.get("args", []) if isinstance(entry, dict) else [])
    for i, arg in enumerate(args[:-1]):
        if arg == "--token":
            return args[i + 1]
    return None


def withdraw(entry: dict | str | None) -> None:
    """Forget a token and close its comms: every server started for it exits."""
    if entry is None:
        return
    token = token_of(entry)
    if token is None:
        return
    _bridges.pop(token, None)
    for comm in _comms.pop(token, []):
        with contextlib.suppress(Exception):
            comm.close()


def started(entry: dict | str | None) -> bool:
    """Whether a server started from this :func:`offer` entry ever connected (the
    agent really started it: an agent may take the entry and never start it)."""
    token = token_of(entry) if entry is not None else None
    return token is not None and token in _comms


def note_for(tools_offered: list[str]) -> str:
    """The server's instructions: what this kernel offers, and why not more."""
    if "execute" not in tools_offered:
        return ("This kernel runs no Python code for the agent (an ACP agent kernel has no Python "
                "namespace), so only " + ", ".join(tools_offered or ["no tools"])
                + (" are" if len(tools_offered) > 1 else " is") + " offered.")
    return ("execute runs Python in the user's live kernel after the user allows it; the code and "
            "its output appear in the notebook.")


# -- the comm target ------------------------------------------------------------------


def _on_open(comm: Any, msg: dict) -> None:
    data = (msg.get("content") or {}).get("data") or {}
    try:
        token = Open.model_validate(data).token
    except ValidationError:
        token = ""
    bridge = _bridges.get(token)
    if bridge is None:
        comm.send(Refused(error="unknown token").model_dump())
        comm.close()
        return
    _comms.setdefault(token, []).append(comm)
    offered = [t for t in TOOLS if t in bridge.tools]
    comm.on_msg(lambda m: _on_msg(token, comm, m))
    comm.on_close(lambda m: _forget(token, comm))
    comm.send(Ready(tools=offered, note=note_for(offered)).model_dump())


def _forget(token: str, comm: Any) -> None:
    comms = _comms.get(token, [])
    if comm in comms:
        comms.remove(comm)


def _open(token: str, comm: Any) -> bool:
    return comm in _comms.get(token, [])


def _reply(token: str, comm: Any, reply: Reply) -> None:
    if _open(token, comm):
        comm.send(reply.model_dump())


def _on_msg(token: str, comm: Any, msg: dict) -> None:
    data = (msg.get("content") or {}).get("data") or {}
    try:
        request = Request.model_validate(data)
    except ValidationError as exc:
        rid = data["id"] if isinstance(data, dict) and isinstance(data.get("id"), int) else -1
        _reply(token, comm, error_reply(rid, f"bad request: {exc.errors(include_url=False)}"))
        return
    bridge = _bridges.get(token)
    if bridge is None:
        _reply(token, comm, error_reply(request.id, "the session that offered this server has ended"))
        return
    if request.tool not in bridge.tools:
        _reply(token, comm, error_reply(request.id, f"the tool {request.tool} is not offered here"))
        return
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        _reply(token, comm, error_reply(request.id, "the kernel has no running event loop"))
        return
    task = loop.create_task(_serve(token, comm, bridge, request))
    _tasks.add(task)
    task.add_done_callback(_tasks.discard)


async def _serve(token: str, comm: Any, bridge: NotebookBridge, request: Request) -> None:
    try:
        args = ARGS[request.tool].model_validate(request.args)
        if isinstance(args, ExecuteArgs):
            reply = await execute(bridge, request.id, args.code)
        elif isinstance(args, VariablesArgs):
            reply = variables(bridge, request.id, args)
        elif isinstance(args, (InsertCellArgs, EditCellArgs, DeleteCellArgs)):
            reply = await propose(bridge, request.id, args)
        elif isinstance(args, RunCellArgs):
            reply = await run_cell(bridge, request.id, args.cell_id)
        else:
            reply = await cells(bridge, request.id)
    except ValidationError as exc:
        reply = error_reply(request.id, f"bad arguments for {request.tool}: {exc.errors(include_url=False)}")
    except Exception as exc:  # noqa: BLE001 - the agent gets the reason, the kernel lives on
        log.exception("notebook MCP: %s failed", request.tool)
        reply = error_reply(request.id, f"the notebook server failed: {type(exc).__name__}: {exc}")
    _reply(token, comm, reply)


# -- the tools ------------------------------------------------------------------------


def variables(bridge: NotebookBridge, rid: int, args: VariablesArgs) -> Reply:
    ns = bridge.namespace()
    if ns is None:
        return error_reply(rid, "this kernel has no Python namespace")
    if args.name is None:
        return Reply(id=rid, content=[Text(text=tools.list_variables(ns, _shell_hidden()))])
    found, text = tools.describe(ns, args.name, _shell_hidden())
    return Reply(id=rid, isError=not found, content=[Text(text=text)])


def _shell_hidden() -> dict:
    """What IPython put in the user's namespace itself (``user_ns_hidden``), if IPython runs here."""
    try:
        from IPython import get_ipython

        return dict(getattr(get_ipython(), "user_ns_hidden", None) or {})
    except ImportError:  # pragma: no cover - IPython is a dependency
        return {}


async def cells(bridge: NotebookBridge, rid: int) -> Reply:
    """The live notebook from the page showing it (the front-end extension's document
    comm), else the file as last saved, else the cells run here; each says which."""
    path = bridge.notebook_path()
    live, why = await document.snapshot(path)
    if live is not None:
        text = tools.cells_from_snapshot(live)
    elif path:
        text = tools.cells_from_notebook(path, why)
    else:
        text = tools.cells_from_history(bridge.history(), "python" if bridge.namespace() is not None else "", why)
    return Reply(id=rid, content=[Text(text=text)])


async def propose(bridge: NotebookBridge, rid: int, args: InsertCellArgs | EditCellArgs | DeleteCellArgs) -> Reply:
    """The agent's change to the notebook, as a proposal in the page (applied at once
    under ``allow-all``, refused under ``deny``); what became of it."""
    proposal = tools.proposal_of(args)
    if isinstance(proposal, str):
        return error_reply(rid, proposal)
    policy = bridge.policy()
    if policy == "deny":
        return error_reply(rid, "refused by the permission policy (deny): the notebook was not changed")
    proposal["apply"] = policy == "allow-all"
    origin = bridge.origin()
    proposal["turn"], proposal["turn_cell"] = origin.request, origin.cell
    decided, why = await document.propose(bridge.notebook_path(), proposal, PROPOSAL_TIMEOUT)
    if decided is None and why == document.NO_PAGE:
        return await _without_page(bridge, rid, proposal)
    if decided is None:
        return error_reply(rid, f"not proposed: {why}; the notebook was not changed")
    return Reply(id=rid, isError=decided.outcome != "applied",
                 content=[Text(text=tools.decided_text(proposal["kind"], decided, proposal.get("cell_id", "")))])


async def _without_page(bridge: NotebookBridge, rid: int, proposal: dict) -> Reply:
    """No page of ours shows this notebook (VS Code, JupyterLab without the extension, a
    console): a new cell can still go below the turn's cell when the turn ends (Jupyter's
    ``set_next_input``) once the user allows it; an edit or a delete is shown in the turn as
    text, never applied. Nothing is dropped silently."""
    kind, source = proposal["kind"], proposal.get("source") or ""
    nothing = f"not proposed: {document.NO_PAGE}; the notebook was not changed"
    if kind != "insert":
        bridge.show(*tools.proposal_shown(proposal))
        return error_reply(rid, nothing + " (the change is shown in the turn as text, for the user to make)")
    allowed, why = await bridge.authorize(source, title=INSERT_TITLE, kind="edit")
    if allowed:
        why = bridge.next_input(source)
        if not why:
            return Reply(id=rid, content=[Text(text=tools.BELOW_TEXT)])
    if "user refused" not in why:  # the user saw it in the question they refused
        bridge.show(*tools.proposal_shown(proposal))
    return error_reply(rid, f"not inserted: {why}; the cell is shown in the turn as text")


async def run_cell(bridge: NotebookBridge, rid: int, cell_id: str) -> Reply:
    """Run one code cell's source as the page has it now (else as last saved): asked and
    shown as :func:`execute` is, the answer saying which source ran."""
    if bridge.namespace() is None:
        return error_reply(rid, "run_cell is not available: this kernel has no Python namespace")
    path = bridge.notebook_path()
    live, why = await document.cell(path, cell_id)
    name = json.dumps(cell_id)
    if live is not None:
        cell_type, source, said = live.cell_type, live.source, f"Cell {name} as the user's page has it now"
    elif document.pages() or not path:
        return error_reply(rid, f"not run: {why}" + ("" if document.pages() else
                                                      ", and this kernel does not know its notebook file"))
    else:
        saved = tools.saved_cell(path, cell_id)
        if isinstance(saved, str):
            return error_reply(rid, f"not run: {why}; {saved}")
        (cell_type, source), said = saved, f"Cell {name} as last saved ({why}; unsaved edits are not included)"
    if cell_type != "code":
        return error_reply(rid, f"not run: cell {name} is a {cell_type} cell, not code")
    reply = await execute(bridge, rid, source)
    reply.content.insert(0, Text(text=f"{said}:"))
    return reply


INTERRUPTED = ("interrupted by the user: the code stopped (names it assigned before the interrupt "
               "are kept); the turn is being stopped too")


async def execute(bridge: NotebookBridge, rid: int, code: str) -> Reply:
    """Ask, then run ``code`` synchronously on this (the main) thread."""
    ns = bridge.namespace()
    if ns is None:
        return error_reply(rid, "execute is not available: this kernel has no Python namespace")
    allowed, why = await bridge.authorize(code)
    if not allowed:
        return error_reply(rid, "not run: " + (why or "the user did not allow it"))
    captured = tools.Captured()
    view: RunView | None = None
    displays = compat.DisplayState.now()
    try:
        with _sigint_raises():
            try:
                view = bridge.started(code)
                with _streams(view, captured), _displays(captured), _figures(captured):
                    outcome = tools.run(code, ns)
            except KeyboardInterrupt:
                outcome = None
    finally:  # SIGINT no longer raises here: whatever an interrupt cut short, undone
        displays.restore()
    if outcome is None:
        if view is not None:
            with contextlib.suppress(Exception):
                view.done(False, "interrupted")
        bridge.interrupted()
        return Reply(id=rid, isError=True,
                     content=tools.execute_content(tools.Outcome(ok=False, error=INTERRUPTED), captured))
    assert view is not None  # set before the run began, which ended (outcome is not None)
    if not outcome.ok and outcome.error:  # the traceback, where the user watches the run
        with contextlib.suppress(Exception):
            view.write("stderr", tools.cut(outcome.error, 4_000).rstrip("\n") + "\n")
    view.done(outcome.ok, outcome.summary())
    return Reply(id=rid, isError=not outcome.ok, content=tools.execute_content(outcome, captured))


@contextlib.contextmanager
def _sigint_raises() -> Iterator[None]:
    """SIGINT raises KeyboardInterrupt here (an idle kernel ignores it; a cell awaiting
    has ipykernel's cancel-the-future handler), restored after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


class _Tee(io.TextIOBase):
    """A sys.stdout/stderr stand-in: live to the view, bounded to the reply."""

    encoding = "utf-8"  # libraries that look before they print

    def __init__(self, name: str, view: RunView, sink: tools.Stream) -> None:
        self.name, self.view, self.sink = name, view, sink

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        text = str(text)
        self.sink.add(text)
        with contextlib.suppress(Exception):
            self.view.write(self.name, text)
        return len(text)

    def flush(self) -> None:
        pass


@contextlib.contextmanager
def _streams(view: RunView, captured: tools.Captured) -> Iterator[None]:
    with contextlib.redirect_stdout(_Tee("stdout", view, captured.stdout)), \
            contextlib.redirect_stderr(_Tee("stderr", view, captured.stderr)):
        yield


IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")


class _DisplaySink:
    """Where display() calls and sys.displayhook results go during a run: straight
    into the bounded :class:`tools.Captured` (IPython's own capture keeps them all)."""

    def __init__(self, captured: tools.Captured) -> None:
        self.captured = captured

    def append(self, output: dict) -> None:
        data = output.get("data") or {}
        images = [(m, data[m]) for m in IMAGE_TYPES if m in data]
        if images:
            self.captured.add_image(*images[0])
        elif "text/plain" in data:
            self.captured.add_display(str(data["text/plain"]))


def _displays(captured: tools.Captured) -> contextlib.AbstractContextManager[None]:
    """display() calls go to the reply, not into the cell."""
    return compat.displays_to(_DisplaySink(captured).append)


@contextlib.contextmanager
def _figures(captured: tools.Captured) -> Iterator[None]:
    """Matplotlib figures the code opened come back as PNG images and are closed, so
    they do not appear later in the turn's cell."""
    plt = sys.modules.get("matplotlib.pyplot")
    before = set(plt.get_fignums()) if plt is not None else set()
    try:
        yield
    finally:
        plt = sys.modules.get("matplotlib.pyplot")
        if plt is not None:
            for number in sorted(set(plt.get_fignums()) - before):
                figure = plt.figure(number)
                buffer = io.BytesIO()
                try:
                    if captured.room_for_image():  # a figure that would be left out is not drawn
                        figure.savefig(buffer, format="png", bbox_inches="tight")
                    captured.add_image("image/png", buffer.getvalue())
                except Exception as exc:  # noqa: BLE001 - a figure the code broke
                    captured.note(f"[figure {number} could not be drawn: {type(exc).__name__}]")
                finally:
                    plt.close(figure)
