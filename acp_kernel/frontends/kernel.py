"""The ACP kernel: each cell a prompt, the turn rendered live, interrupt cancels.

A wrapper kernel on ipykernel's ``Kernel`` with an async ``do_execute``
(ipykernel >= 7.4 handles widget comms while it awaits, so permission buttons
work mid-turn); a thin adapter over :class:`~acp_kernel.client.controller.Controller`
(the agent, its sessions, the command table's verbs). The agent starts on the
first cell, in its own session, so the kernel's SIGINT never reaches it;
SIGINT here cancels the turn instead. Nothing escapes ``do_execute``: an
exception there would leave the frontend waiting for a reply forever.
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import os
import signal
import traceback
from collections.abc import Callable
from typing import Any

from ipykernel.kernelbase import Kernel

from . import cells, kernel_io
from .. import compat, termsafe
from ..client import params, store
from ..passthrough import ptycell
from ..protocol import watchdog
from ..protocol.scope import adopt_orphans
from ..protocol.warm import schema_in_background
from ..client.commands import POLICIES, UsageError
from ..client.controller import Controller, Killed, Unavailable
from ..errors import AcpError, PassthroughError, RpcError
from .kernel_io import KernelFrontend, KernelSink
from .process import tune_own_process
from .parts import PARTS
from ..notebook_mcp import register_document
from ..safe import Markdown, bundle, plain
from ..client.session import __version__, resource_link, text_block
from ..view.frontend import WidgetClients
from .shellcell import ShellCellError, shell_cell
from ..services.terminals import TerminalError
from .complete import complete, inspect

#: A whole cell that means "leave", as a console user types it.
EXIT_WORDS = frozenset({"exit", "quit", "exit()", "quit()"})
#: Cells kept for the notebook MCP server's ``cells`` (the newest).
CELL_HISTORY = 200


#: The error a cell shows: at most this many lines of its message, each at most this long.
ERROR_LINES, ERROR_LINE = 20, 500


def error_content(ename: str, evalue: str, note: str = "") -> dict[str, Any]:
    """An ``error`` message's content. ``evalue`` is the message's first line (what
    nbclient, nbconvert and papermill show as the reason); the traceback, which
    front-ends show as text, has the rest of it (bounded) and ``note``. Each line is
    made as text/plain is: controls neutralised, and no link JupyterLab's text
    renderer (which draws tracebacks too) would make of a ``javascript:...``."""
    lines = [str(plain(termsafe.clean(line, oneline=True)[:ERROR_LINE])) for line in (evalue or "").splitlines()]
    first, rest = (lines[0] if lines else ""), lines[1:ERROR_LINES]
    if len(lines) > ERROR_LINES:
        rest.append(f"... ({len(lines) - ERROR_LINES} more lines)")
    return {"ename": ename, "evalue": first,
            "traceback": [f"{ename}: {first}", *rest, *([f"({note})"] if note else [])]}


#: Seconds without a frontend's ``kernel_info`` before the schema import starts (see
#: :func:`_when_quiet`).
HELLO_QUIET = 1.0


def _when_quiet(fn: Callable[[], Any], seconds: float) -> Callable[[Any], None]:
    """A shell-message watcher that calls ``fn`` once, ``seconds`` after the last message it
    saw. A frontend's hello may be several ``kernel_info`` requests (jupyter_client's
    ``wait_for_ready`` asks again until IOPub answers, then drains IOPub until 0.2 s pass
    quiet): work that holds the GIL meanwhile (the schema import) can delay a hello's last
    ``idle`` status past that drain, and jupyter_console then reads it as its first cell's
    and stops polling stdin, so a question asked there is never shown (measured: 4 of 14
    loaded runs of the console's permission test hung with the import at the first reply,
    none of 18 after the quiet)."""
    handle: asyncio.TimerHandle | None = None
    done = False

    def fire() -> None:
        nonlocal done
        if not done:
            done = True
            fn()

    def watcher(_msg: Any) -> None:
        nonlocal handle
        if done:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            fire()
            return
        if handle is not None:
            handle.cancel()
        handle = loop.call_later(seconds, fire)

    return watcher


class AcpKernel(Kernel):
    implementation = "acp_kernel"
    implementation_version = __version__
    banner = "ACP Agent: each cell is a prompt for a coding agent. %help lists the kernel's commands."
    language_info = {
        "name": "markdown",
        "mimetype": "text/markdown",
        "file_extension": ".md",
        "pygments_lexer": "markdown",
        "codemirror_mode": "markdown",
    }
    help_links = [{"text": "Agent Client Protocol", "url": "https://agentclientprotocol.com"}]
    #: Set by :func:`acp_kernel.compat.install_comms` (ipykernel's Kernel has none of its own).
    comm_manager: Any

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        compat.install_comms(self)
        self.widget_clients = WidgetClients()
        compat.register_widget_control(self.comm_manager)  # a reloaded page gets widget state via the control comm
        # After install_comms, which replaces the comm_open handler: who announced a widget manager.
        compat.watch_shell_messages(self, ("comm_open", "comm_info_request"), self.widget_clients.note)
        # A frontend's kernel_info is its hello: the kernel is ready and idle until the first cell,
        # so the schema import starts once the hello is over (HELLO_QUIET), and the first agent
        # rarely waits for it. (A lambda: the name is looked up when it runs, as a test replaces it.)
        compat.watch_shell_messages(self, ("kernel_info_request",),
                                    _when_quiet(lambda: schema_in_background(), HELLO_QUIET))
        register_document()  # the notebook page's extension opens its document comm (live `cells`)
        for line in compat.untested():
            self.log.warning(line)
        self._sink: KernelSink | None = None
        #: A new cell for below the running one, sent with its reply (``set_next_input``).
        self._next_input: str | None = None
        self._allow_stdin = False
        self._handling = self._interrupted = False  # an interrupt between "busy" and the cell counts
        self.ptys = ptycell.Terminals()
        policy = os.environ.get("ACP_KERNEL_PERMISSIONS")
        frontend = KernelFrontend(self)
        self.controller = Controller(
            frontend, parts=PARTS, permissions=policy if policy in POLICIES else None,
            key=store.notebook_key(self._kernel_id()), ptys=self.ptys, own_process=True)
        c = self.controller
        c.spec = c.config.agents.get(os.environ.get("ACP_KERNEL_AGENT", ""), None) or c.spec
        c.default_name = c.spec.name
        c.restore()
        self.ptys.config = c.config
        self.ptys.permissions = lambda: self.controller.settings.permissions
        self.ptys.side = frontend.notebook_side
        self._loop: asyncio.AbstractEventLoop | None = None
        self._cell: asyncio.Task | None = None  # the running cell: an interrupt elsewhere cancels it
        #: Sources of the cells run here (the notebook MCP server's ``cells`` when the file is unknown).
        self.cell_history: collections.deque[str] = collections.deque(maxlen=CELL_HISTORY)
        atexit.register(self._kill_now)

    @property
    def kernel_info(self) -> dict[str, Any]:
        """No debugger: this kernel runs no Python to debug (ipykernel
        advertises one whenever debugpy is importable)."""
        info = dict(super().kernel_info)
        info["supported_features"] = [f for f in info.get("supported_features", []) if f != "debugger"]
        info["debugger"] = False
        return info

    # -- process-level plumbing ----------------------------------------------

    def _kernel_id(self) -> str | None:
        """Jupyter's kernel id (from ``kernel-<id>.json``), else the connection
        file itself: both survive a restart, which is what the key is for."""
        conn = getattr(getattr(self, "parent", None), "connection_file", "") or ""
        name = os.path.basename(conn)
        if name.startswith("kernel-") and name.endswith(".json"):
            return name[len("kernel-"):-len(".json")]
        return os.path.abspath(conn) if conn else None

    def start(self) -> None:
        super().start()
        signal.signal(signal.SIGINT, self._on_sigint)
        try:  # agents and terminals die with the kernel, even by SIGKILL (see watchdog)
            watchdog.enable()
        except OSError as exc:
            self.log.warning("could not start the process watchdog: %s", exc)
        adopt_orphans()  # orphans below us (double-forked daemons) are re-parented here, found and reaped

    def pre_handler_hook(self) -> None:  # keeps our SIGINT handler during handlers
        self._handling, self._interrupted = True, False

    def post_handler_hook(self) -> None:
        self._handling, self._interrupted = False, False

    def _on_sigint(self, signum: int, frame: Any) -> None:
        loop = self._loop
        if loop is not None and (self.controller.running is not None or self._cell is not None):
            loop.call_soon_threadsafe(self.controller.interrupt, self._cell)
        elif self._handling:  # a cell about to start: it starts interrupted
            self._interrupted = True

    def _kill_now(self) -> None:
        self.controller.kill_now()
        self.ptys.kill_now()

    def _say(self, md: Markdown, plain_text: str | None = None) -> None:
        self.controller.say(md, plain_text)  # text/plain is the rendered text unless given

    # -- execute -------------------------------------------------------------

    async def do_execute(self, code: str, silent: bool, store_history: bool = True,
                         user_expressions: Any = None, allow_stdin: bool = False,
                         *, cell_meta: Any = None, cell_id: Any = None) -> dict[str, Any]:
        self._loop = asyncio.get_running_loop()
        if store_history and not silent:
            self.cell_history.append(code)
        self._sink = KernelSink(self, self.get_parent("shell"))
        self._allow_stdin = bool(allow_stdin)
        self._next_input = None
        if self._interrupted:
            self._interrupted = False
            self._say(Markdown("*Interrupted.*"))
            return self._error("Interrupted", "the cell was interrupted")
        # The cell runs as a task of its own, so an interrupt can cancel it
        # wherever it waits without cancelling ipykernel's handler.
        self._cell = asyncio.ensure_future(self._execute(code))
        try:
            return await self._cell
        except BaseException as exc:  # noqa: BLE001 - nothing may escape do_execute
            if isinstance(exc, (KeyboardInterrupt, asyncio.CancelledError)):
                return self._error("Interrupted", "the cell was interrupted")
            self.log.error("cell failed: %s", "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
            return self._error(type(exc).__name__, str(exc), note="an internal error of acp-kernel; the kernel is still alive")
        finally:
            self.controller.running = None
            self._cell = None

    def _ok(self, payload: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        payload = list(payload or [])
        if self._next_input is not None:  # a new cell below this one (KernelFrontend.next_input)
            payload.append({"source": "set_next_input", "text": self._next_input, "replace": False})
            self._next_input = None
        return {"status": "ok", "execution_count": self.execution_count, "payload": payload, "user_expressions": {}}

    def _error(self, ename: str, evalue: str, *, note: str = "") -> dict[str, Any]:
        """The cell's one error: an ``error`` message and the error reply, and no
        other output saying the same (:func:`error_content`)."""
        content = error_content(ename, evalue, note)
        if self._sink is not None and self.session is not None:
            self.session.send(self.iopub_socket, "error", content, parent=self._sink.parent, ident=compat.iopub_topic(self, "error"))
        return {"status": "error", "execution_count": self.execution_count, **content}

    async def _execute(self, code: str) -> dict[str, Any]:
        if code.strip() in EXIT_WORDS:  # as IPython does: ask the frontend to exit (a console does)
            self._say(Markdown("*Asked the frontend to exit (a console closes; a notebook keeps the kernel).*"))
            return self._ok([{"source": "ask_exit", "keepkernel": False}])
        cell = cells.parse_cell(code)
        if cell.errors:
            return self._error("UsageError", "\n".join(cell.errors))
        if cell.shell is not None:
            return await self._shell(cell)
        for command in cell.commands:
            failed = await self._command(command)
            if failed is not None:
                return failed
        if not cell.prompt:
            return self._ok()
        prompt = params.interpolate(cell.prompt, self.controller.values)  # {NAME} of %set
        if self.controller.pty_target is not None:
            return await self._pty_prompt(self.controller.pty_target, prompt)
        return await self._prompt(prompt)

    async def _prompt(self, prompt: str) -> dict[str, Any]:
        c = self.controller
        try:
            cwd = c.session.cwd if c.session is not None else c.cwd
            blocks = [text_block(prompt)] + [resource_link(p) for p in cells.mentions(prompt, cwd)]
            turn = await c.prompt(blocks)
        except Unavailable as exc:
            return self._error("AgentUnavailable", str(exc))
        except AcpError as exc:  # refused before a turn began (ContentRefused, a turn still running)
            return self._error(type(exc).__name__, str(exc), note="not sent to the agent")
        if turn.error is not None:
            return self._error("AgentError", turn.error.splitlines()[0] if turn.error else "")
        # A forced cancel left the agent marked for restart: the next cell
        # restarts it (and reopens the session), so this one returns at once.
        return self._ok()

    async def _pty_prompt(self, name: str, prompt: str) -> dict[str, Any]:
        try:
            reply = await self.controller.prompt_terminal(name, prompt)
        except PassthroughError as exc:
            return self._error("PassthroughError", str(exc))
        if reply.outcome == "exited":
            return self._error("PassthroughExited", self.ptys.get(name).terminal.describe_exit())
        if reply.outcome == "timeout":  # not ready, or still working at the cell timeout
            return self._error("PassthroughTimeout", reply.detail)
        return self._ok()

    # -- kernel commands: the table's verbs, run by the controller --------------

    async def _command(self, cmd: cells.Command) -> dict[str, Any] | None:
        """None when it went well, else the error reply."""
        try:
            if cmd.name == "help":
                self._say(cells.help_markdown(), cells.help_text())
            else:
                await self.controller.run(cmd.call)  # type: ignore[arg-type]
            return None
        except Unavailable as exc:
            return self._error("AgentUnavailable", str(exc))
        except UsageError as exc:
            return self._error("UsageError", str(exc))
        except (RpcError, AcpError, ValueError) as exc:
            return self._error("CommandError", f"{cmd.line}: {exc}")

    # -- %%shell --------------------------------------------------------------

    async def _shell(self, cell: cells.Cell) -> dict[str, Any]:
        sink = self._sink
        try:
            await shell_cell(cell.shell_args, cell.shell or "", sink.stream, frontend=KernelFrontend(self).frontend(),  # type: ignore[union-attr]
                             display=sink, cwd=self.controller.cwd,  # type: ignore[arg-type]
                             on_start=lambda term: setattr(self.controller, "running", Killed(term)))
        except (ShellCellError, TerminalError) as exc:  # bad options, a bad cwd, or --raise
            sink.stream(f"{exc}\n", "stderr")  # type: ignore[union-attr]
            return self._error(type(exc).__name__, str(exc))
        return self._ok()

    # -- completion, inspection, shutdown --------------------------------------

    async def do_is_complete(self, code: str) -> dict[str, Any]:
        status = "complete" if code.strip() in EXIT_WORDS else cells.is_complete(code)
        return {"status": status, **({"indent": ""} if status == "incomplete" else {})}

    async def do_complete(self, code: str, cursor_pos: int) -> dict[str, Any]:
        matches, start = complete(code, cursor_pos, controller=self.controller, pty_target=self.controller.pty_target)
        return {"status": "ok", "matches": matches, "cursor_start": start, "cursor_end": cursor_pos, "metadata": {}}

    async def do_inspect(self, code: str, cursor_pos: int, detail_level: int = 0, omit_sections: Any = ()) -> dict[str, Any]:
        found = inspect(code, cursor_pos, controller=self.controller)
        if not found:
            return {"status": "ok", "found": False, "data": {}, "metadata": {}}
        return {"status": "ok", "found": True, "data": bundle(found), "metadata": {}}

    async def do_shutdown(self, restart: bool) -> dict[str, Any]:
        # This runs on the control thread's loop; the agent and terminals live on the shell's.
        await kernel_io.on_loop(self._loop, self.controller.close(), self.log, "the agent")
        self.controller.kill_now()
        await kernel_io.on_loop(self._loop, self.ptys.close_all(), self.log, "the passthrough terminals")
        self.ptys.kill_now()
        compat.short_flushes()
        return {"status": "ok", "restart": restart}


def main() -> None:
    tune_own_process()
    compat.launch_kernel_app(AcpKernel)


if __name__ == "__main__":
    main()
