"""The ``notebook`` MCP server for passthrough CLIs: a bridge and a generated config file.

An ACP agent gets the server in ``session/new``; a CLI under a PTY gets it the
way its own users add servers: a JSON file named by a flag (the registry's
``Passthrough.mcp_args``, e.g. claude's ``--mcp-config {config}``). Per
terminal: :func:`offer_terminal` offers a :class:`PassthroughBridge`
(:func:`acp_kernel.notebook_mcp.offer`), writes
``{"mcpServers": {"notebook": {command, args, env}}}`` to a private file
(0600 in a 0700 temp dir) and returns the argv with the flag; the
:class:`NotebookLink` it returns withdraws the offer and deletes the file
when the terminal ends. Whatever goes wrong here opens the terminal without
the server, with a note saying why.

The bridge serves what the front-end serves its ACP sessions (its
:class:`~acp_kernel.client.notebook.NotebookSide`): IPython's user namespace
in a python3 kernel with the magics; in the ACP kernel there is no Python
namespace and it offers ``cells`` only. ``execute`` asks first, by the connection's permission
policy: ``allow-all`` runs, ``deny`` refuses, ``ask`` (and ``allow-reads``:
running code is no read) puts the permission buttons in the cell typing into
the terminal; where nobody can answer (a headless run, a console) it refuses
and says how to allow it. A run shows its code and output in that cell.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import tempfile
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..safe import Markdown, block, bundle, code, text
from ..client.notebook import ALL_TOOLS, NO_ORIGIN, NotebookSide, Origin, known_notebook
from ..client.registry import Passthrough
from ..services.events import PermissionPrompt
from ..view.prompts import PermissionForm
from .. import notebook_mcp  # called as notebook_mcp.offer: the module's, as it is now

#: What the server is called in the generated file (and what the CLI's tools are prefixed with).
SERVER_NAME = "notebook"
#: Output of one run kept for the cell (the tail), in characters.
RUN_SHOWN = 20_000
#: Least seconds between two redraws of a run's output in the cell (the last one always shows).
RUN_REDRAW = 0.1
#: Prompts remembered for ``cells`` where the kernel keeps no history.
PROMPTS_KEPT = 200
#: Policies that never ask; every other one asks for ``execute`` (code is never a read).
ALLOW, DENY = "allow-all", "deny"


@dataclass
class Cell:
    """The cell that last typed into the terminal: where runs show and questions are asked."""

    sink: Any
    #: Someone can answer a question there (a notebook page, not a headless run).
    interactive: bool = False
    #: The page shows widgets (the permission buttons).
    widgets: bool = False
    #: A prompt is being typed or answered there now.
    live: bool = False
    #: Questions waiting there (cancelled when the cell ends: the CLI gave up on them too).
    pending: set = field(default_factory=set)

    def end(self) -> None:
        """The cell's prompt is over: no new questions here, and waiting ones are cancelled."""
        self.live = False
        for prompt in list(self.pending):
            prompt.cancel()


def here(sink: Any, fe: Any = None) -> Cell:
    """The cell running now (call in its context): its sink and whether a person can click there.

    ``fe``: the front-end that tells (the magics' ``IPythonFrontend``: ``frontend()``,
    ``interactive()``), passed in by it; None (the ACP kernel, whose cells run no
    IPython): nobody clicks, as in terminal IPython (no kernel)."""
    if fe is None:
        return Cell(sink)
    try:
        from IPython import get_ipython  # lazy: start-up time

        ip = get_ipython()
    except ImportError:  # pragma: no cover - IPython is a dependency
        ip = None
    if ip is None or getattr(ip, "kernel", None) is None:
        return Cell(sink)
    try:
        frontend = fe.frontend()
        return Cell(sink, interactive=fe.interactive(), widgets=frontend.widgets and frontend.ask == "widgets")
    except Exception:  # noqa: BLE001 - a frontend that cannot tell: nobody to ask
        return Cell(sink)


class PassthroughBridge:
    """A :class:`acp_kernel.notebook_mcp.NotebookBridge` for one passthrough terminal.

    ``side`` is what the front-end serves (:class:`~acp_kernel.client.notebook.NotebookSide`,
    the same as its ACP sessions get): the tools, the namespace, the cells run so far.
    None: no namespace, ``cells`` only, from the prompts typed here."""

    def __init__(self, name: str, policy: Callable[[], str], *, side: NotebookSide | None = None,
                 on_interrupt: Callable[[], Any] | None = None) -> None:
        self.name = name
        self.policy = policy
        self._on_interrupt = on_interrupt
        self.side = side if side is not None else NotebookSide(frozenset({"cells"}))
        self.tools: frozenset[str] = self.side.tools & ALL_TOOLS
        self.cell: Cell | None = None
        #: Prompts typed into the terminal (the newest): the history where the front-end has none.
        self.prompts: deque[str] = deque(maxlen=PROMPTS_KEPT)

    def namespace(self) -> dict | None:
        return self.side.namespace()

    def notebook_path(self) -> str | None:
        """The notebook this kernel runs, as the ACP sessions' bridge finds it."""
        return known_notebook(self.namespace())

    def origin(self) -> Origin:
        """None: a terminal's work outlives the cell that typed into it, so its proposals
        are not a turn's (each is answered on its own)."""
        return NO_ORIGIN

    def history(self) -> list[str]:
        """The front-end's cells as typed; else the prompts typed here."""
        return [str(s) for s in self.side.history() if str(s).strip()] or list(self.prompts)

    def show(self, title: str, text_: str) -> None:
        """A proposal that cannot be shown as one (no page of ours): its text in the cell."""
        self._say(Markdown("*{}:*\n\n").format(text(title)) + block(text_))

    def next_input(self, text_: str) -> str:
        """None: the cell that typed into the terminal has ended by the time the CLI works."""
        return "a terminal's cell cannot take a new cell below it"

    async def authorize(self, code_: str, title: str = "", kind: str = "execute") -> tuple[bool, str]:
        policy = self.policy()
        if policy == ALLOW:
            return True, ""
        if policy == DENY:
            self._say(Markdown("*The notebook MCP server refused to run code from {} (permissions: deny).*").format(
                code(self.name)))
            return False, "refused by policy deny"
        cell = self.cell
        if cell is None or not cell.live or not cell.interactive or not cell.widgets:
            where = ("no cell is typing into the terminal now" if cell is None or not cell.live
                     else "nobody can answer a question in this run (headless)" if not cell.interactive
                     else "this frontend shows no permission buttons")
            how = 'set "permissions": "allow-all" in the acp-kernel config file to let it run code without asking'
            self._say(Markdown("*The notebook MCP server refused to run code from {}: {}; {}.*").format(
                code(self.name), text(where), text(how)))
            return False, f"refused: {where} to allow it (permissions: {policy}); the user can {how}"
        return await _ask(cell, self.name, code_)

    def started(self, code_: str) -> "CellRun":
        return CellRun(self.cell.sink if self.cell is not None else None, self.name, code_)

    def interrupted(self) -> None:
        """The user interrupted a run: the CLI's turn stops too (its cancel keys)."""
        if self._on_interrupt is not None:
            self._on_interrupt()

    def _say(self, md: Markdown) -> None:
        if self.cell is not None:
            _show(self.cell.sink, bundle(md))


def _show(sink: Any, data: dict, display_id: str | None = None, *, update: bool = False) -> None:
    if sink is None:
        return
    try:
        if update:
            sink.update(data, display_id=display_id or "")
        else:
            sink.display(data, display_id=display_id)
    except Exception:  # noqa: BLE001 - a cell that cannot show it must not fail the run
        pass


async def _ask(cell: Cell, name: str, code_: str) -> tuple[bool, str]:
    """The permission buttons (:class:`acp_kernel.view.prompts.PermissionForm`) in the cell; the answer."""
    loop = asyncio.get_running_loop()
    prompt = PermissionPrompt(
        session_id=f"notebook-mcp:{name}", request=None, kind="execute", future=loop.create_future(), loop=loop,
        options=[{"optionId": "allow", "name": "Allow once", "kind": "allow_once"},  # our words: the kind's
                 {"optionId": "reject", "name": "Reject", "kind": "reject_once"}],
        title=f"{name} wants to run code in this kernel (notebook MCP server)", command=code_)
    form = PermissionForm(prompt, widgets=True, detail=code_)
    _show(cell.sink, form.bundle(), form.display_id)
    outcome = None
    cell.pending.add(prompt)
    try:
        outcome = await prompt.future
    finally:
        cell.pending.discard(prompt)
        form.resolved(outcome)
        _show(cell.sink, form.bundle(), form.display_id, update=True)
    if outcome == "allow":
        return True, ""
    return False, ("refused by the user" if outcome == "reject"
                   else "the question was cancelled (the cell that asked it ended): the code did not run")


class CellRun:
    """A run of ``execute`` in the cell: the code, its output (the tail), then how it ended."""

    def __init__(self, sink: Any, name: str, code_: str) -> None:
        import uuid

        self.sink = sink
        self.name = name
        self.code = code_
        self.output: list[str] = []
        self.size = 0
        self.cut = False
        self.state = "running"
        self.display_id = f"acp-mcp-run-{uuid.uuid4().hex[:12]}"
        self._drawn = 0.0
        _show(sink, self.bundle(), self.display_id)

    def write(self, name: str, text_: str) -> None:
        self.output.append(text_)
        self.size += len(text_)
        if self.size > 2 * RUN_SHOWN:
            tail = "".join(self.output)[-RUN_SHOWN:]
            self.output, self.size, self.cut = [tail], len(tail), True
        now = time.monotonic()
        if now - self._drawn >= RUN_REDRAW:
            self._drawn = now
            _show(self.sink, self.bundle(), self.display_id, update=True)

    def done(self, ok: bool, summary: str) -> None:
        shown = "" if summary == "done" else summary  # "done": a run with no value
        self.state = ("done" if ok else "failed") + (f": {shown}" if shown else "")
        _show(self.sink, self.bundle(), self.display_id, update=True)

    def markdown(self) -> Markdown:
        md = Markdown("**{} runs code in this kernel** (notebook MCP server) · {}\n\n").format(
            code(self.name), text(self.state)) + block(self.code, "python")
        out = "".join(self.output)[-RUN_SHOWN:]
        if out:
            md += Markdown("\n\n") + (Markdown("*(output cut: the last {} characters)*\n\n").format(
                str(RUN_SHOWN)) if self.cut else Markdown("")) + block(out)
        return md

    def bundle(self) -> dict[str, Any]:
        return bundle(self.markdown())


# -- the config file and the terminal's share -----------------------------------


@dataclass
class NotebookLink:
    """One terminal's offer of the server: withdrawn, and its file deleted, by :meth:`close`."""

    bridge: PassthroughBridge
    entry: dict[str, Any]
    path: str
    closed: bool = field(default=False)

    def close(self) -> None:
        """Idempotent; safe from a done-callback or atexit."""
        if self.closed:
            return
        self.closed = True
        try:
            notebook_mcp.withdraw(self.entry)
        except Exception:  # noqa: BLE001 - the file goes anyway
            pass
        shutil.rmtree(os.path.dirname(self.path), ignore_errors=True)


def config_json(entry: dict[str, Any]) -> dict[str, Any]:
    """An ACP ``McpServerStdio`` as the ``mcpServers`` file CLIs read (env as an object)."""
    env = entry.get("env") or []
    if isinstance(env, list):
        env = {str(e["name"]): str(e["value"]) for e in env if isinstance(e, dict) and "name" in e}
    return {"mcpServers": {SERVER_NAME: {"command": entry["command"], "args": list(entry.get("args") or []),
                                         "env": dict(env)}}}


def write_config(entry: dict[str, Any]) -> str:
    """The file, readable by its owner only, in a temp dir of its own; its path."""
    folder = tempfile.mkdtemp(prefix="acp-kernel-mcp-")
    path = os.path.join(folder, "notebook-mcp.json")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(config_json(entry), f, indent=2)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return path


def mcp_argv(settings: Passthrough, path: str) -> tuple[str, ...]:
    return tuple(word.replace("{config}", path) for word in settings.mcp_args)


@dataclass
class Offered:
    """What :func:`offer_terminal` gives: the settings to start with, the link (None: no server) and a note."""

    settings: Passthrough
    link: NotebookLink | None = None
    note: Markdown | None = None


def offer_terminal(name: str, settings: Passthrough, *, enabled: bool, policy: Callable[[], str],
                   side: NotebookSide | None = None, on_interrupt: Callable[[], Any] | None = None) -> Offered:
    """Offer the server to a CLI about to start, when it can take a config file
    (``mcp_args``), the config allows it and this process is a Jupyter kernel."""
    if not enabled or not settings.mcp_args:
        return Offered(settings)
    off = Markdown("*The notebook MCP server is off for {}: {}.*")
    try:
        bridge = PassthroughBridge(name, policy, side=side, on_interrupt=on_interrupt)
        entry = notebook_mcp.offer(bridge)
    except Exception as exc:  # noqa: BLE001 - the terminal opens anyway
        return Offered(settings, note=off.format(code(name), text(f"it could not be offered ({exc})")))
    if entry is None:
        return Offered(settings)  # not a Jupyter kernel: nothing to reach
    try:
        path = write_config(entry)
    except (OSError, KeyError, TypeError, ValueError) as exc:
        notebook_mcp.withdraw(entry)
        return Offered(settings, note=off.format(code(name), text(f"its config file could not be written ({exc})")))
    import dataclasses

    started = dataclasses.replace(settings, command=(*settings.command, *mcp_argv(settings, path)))
    return Offered(started, NotebookLink(bridge, entry, path))
