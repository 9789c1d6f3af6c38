"""The ACP kernel: each cell a prompt, the turn rendered live, interrupt cancels.

A wrapper kernel on ipykernel's ``Kernel`` with an async ``do_execute``
(ipykernel >= 7.4 handles widget comms while it awaits, so permission buttons
work mid-turn). The agent starts on the first cell, in its own session, so the
kernel's SIGINT never reaches it; SIGINT here cancels the turn instead.
Nothing escapes ``do_execute``: an exception there would leave the frontend
waiting for a reply forever.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import signal
import traceback
import uuid
from typing import Any

from ipykernel.kernelbase import Kernel

from . import cells, ptycell, store, watchdog
from .errors import AcpError, AuthRequired, ConnectionClosed, PassthroughError, RpcError
from .host import POLICIES
from .registry import AgentSpec, Config, ConfigError, adhoc_agent, load_config
from .safe import Markdown, block, bundle, check_data, code, markdown, text
from .session import Client, Session, __version__, resource_link, text_block
from .transport import CommandNotFound

#: How long an interrupted turn may take to end before the cell returns anyway.
CANCEL_GRACE = 0.75
#: How much replayed history the first cell shows after a session/load.
HISTORY_CHARS = 4000


def _install_comms(kernel: Kernel) -> None:
    """Give ipywidgets a comm manager bound to this kernel (as IPythonKernel does)."""
    import comm
    from ipykernel.comm.comm import BaseComm
    from ipykernel.comm.manager import CommManager

    manager = CommManager(kernel=kernel)
    comm.create_comm = lambda *a, **k: BaseComm(*a, **k)
    comm.get_comm_manager = lambda *a, **k: manager
    for msg_type in ("comm_open", "comm_msg", "comm_close"):
        kernel.shell_handlers[msg_type] = getattr(manager, msg_type)
    kernel.comm_manager = manager  # type: ignore[attr-defined]


class KernelSink:
    """The view's DisplaySink: display messages on iopub, parented to the cell."""

    def __init__(self, kernel: "AcpKernel", parent: dict[str, Any]) -> None:
        self.kernel = kernel
        self.parent = parent

    def _send(self, msg_type: str, content: dict[str, Any]) -> None:
        if "data" in content:
            check_data(content["data"])
        k = self.kernel
        k.session.send(k.iopub_socket, msg_type, content, parent=self.parent, ident=k._topic(msg_type))

    def display(self, data: dict, metadata: dict | None = None, display_id: str | None = None) -> None:
        self._send("display_data", {"data": data, "metadata": metadata or {},
                                    "transient": {"display_id": display_id} if display_id else {}})

    def update(self, data: dict, metadata: dict | None = None, display_id: str = "") -> None:
        self._send("update_display_data", {"data": data, "metadata": metadata or {},
                                           "transient": {"display_id": display_id}})

    def stream(self, text: str, name: str = "stdout") -> None:
        self._send("stream", {"name": name, "text": text})


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

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        _install_comms(self)
        self.config_error: str | None = None
        try:
            self.acp_config: Config = load_config()
        except ConfigError as exc:
            self.config_error = str(exc)
            from .registry import BUILTIN

            self.acp_config = Config(agents=dict(BUILTIN))
        self.spec: AgentSpec = self.acp_config.agents.get(
            os.environ.get("ACP_KERNEL_AGENT", ""), None
        ) or self.acp_config.agents[self.acp_config.default_agent]
        policy = os.environ.get("ACP_KERNEL_PERMISSIONS") or self.acp_config.permissions or "ask"
        self.settings = self.acp_config.client_settings(policy if policy in POLICIES else "ask")
        self.settings.terminal_auth = True  # %auth runs terminal login methods in a passthrough terminal
        self.cwd = os.getcwd()
        self.agent: Client | None = None
        self.acp_session: Session | None = None
        self.key = store.notebook_key(self._kernel_id())
        remembered = store.recall(self.key)
        self._want_session: str | None = (
            remembered.session_id if remembered and remembered.agent == self.spec.name else None
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        self._running: Any = None  # the turn or terminal an interrupt should stop
        self._cell: asyncio.Task | None = None  # the running cell: an interrupt elsewhere cancels it
        self._sink: KernelSink | None = None
        self.ptys = ptycell.Terminals()
        self.pty_target: str | None = None  # while set, prompts are typed into this terminal
        atexit.register(self._kill_now)

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
        # Agents and terminals die with the kernel, even by SIGKILL (see watchdog).
        try:
            watchdog.enable()
        except OSError as exc:
            self.log.warning("could not start the process watchdog: %s", exc)

    def pre_handler_hook(self) -> None:  # keep our SIGINT handler during handlers
        pass

    def post_handler_hook(self) -> None:
        pass

    def _on_sigint(self, signum: int, frame: Any) -> None:
        loop = self._loop
        if loop is not None and (self._running is not None or self._cell is not None):
            loop.call_soon_threadsafe(self._interrupt)

    def _interrupt(self) -> None:
        """Stop what the cell is doing: a turn is cancelled per the spec, a
        terminal gets its key; anything else (an agent starting, a login, a
        %command waiting on the agent) is cancelled outright."""
        running = self._running
        if running is None:
            if self._cell is not None and not self._cell.done():
                self._cell.cancel()
        elif isinstance(running, Session):
            asyncio.ensure_future(running.cancel(grace=CANCEL_GRACE))
        elif hasattr(running, "interrupt"):  # a passthrough terminal: Ctrl-C
            running.interrupt()
        elif running is not None and hasattr(running, "kill"):
            asyncio.ensure_future(running.kill("killed"))

    def _kill_now(self) -> None:
        if self.agent is not None:
            self.agent.kill_now()
        self.ptys.kill_now()

    # -- output helpers ------------------------------------------------------

    def _markdown(self, md: Markdown, plain: str | None = None) -> None:
        """A message in the cell: ``md`` is built from our templates with
        agent strings escaped (:mod:`acp_kernel.safe`); the sink refuses any other."""
        if self._sink is not None:
            self._sink.display(bundle(md, plain))

    def _progress(self, md: Markdown) -> Any:
        """A line shown while something slow runs; the returned callable blanks it."""
        sink = self._sink
        if sink is None:
            return lambda: None
        display_id = f"acp-progress-{uuid.uuid4().hex[:12]}"
        sink.display(bundle(md), display_id=display_id)
        return lambda: sink.update(bundle(Markdown(""), ""), display_id=display_id)

    def _stream(self, text: str, name: str = "stdout") -> None:
        if self._sink is not None:
            self._sink.stream(text, name)

    # -- execute -------------------------------------------------------------

    async def do_execute(self, code: str, silent: bool, store_history: bool = True,
                         user_expressions: Any = None, allow_stdin: bool = False,
                         *, cell_meta: Any = None, cell_id: Any = None) -> dict[str, Any]:
        self._loop = asyncio.get_running_loop()
        self._sink = KernelSink(self, self.get_parent("shell"))
        # The cell runs as a task of its own, so an interrupt can cancel it
        # wherever it waits without cancelling ipykernel's handler.
        self._cell = asyncio.ensure_future(self._execute(code, allow_stdin))
        try:
            return await self._cell
        except BaseException as exc:  # noqa: BLE001 - nothing may escape do_execute
            if isinstance(exc, (KeyboardInterrupt, asyncio.CancelledError)):
                self._markdown(Markdown("*Interrupted.*"))
                return self._error("Interrupted", "the cell was interrupted")
            tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
            self.log.error("cell failed: %s", "".join(tb))
            self._markdown(Markdown("**Internal error:** {} (the kernel is still alive)").format(code(f"{type(exc).__name__}: {exc}")))
            return self._error(type(exc).__name__, str(exc))
        finally:
            self._running = None
            self._cell = None

    def _ok(self) -> dict[str, Any]:
        return {"status": "ok", "execution_count": self.execution_count, "payload": [], "user_expressions": {}}

    def _error(self, ename: str, evalue: str) -> dict[str, Any]:
        return {"status": "error", "execution_count": self.execution_count,
                "ename": ename, "evalue": evalue, "traceback": []}

    async def _execute(self, code: str, allow_stdin: bool) -> dict[str, Any]:
        if self.config_error:
            self._markdown(Markdown("**Configuration problem** (built-in agents only until it is fixed):\n\n") + block(self.config_error))
            self.config_error = None
        cell = cells.parse_cell(code)
        if cell.errors:
            self._markdown(Markdown("  \n").join(Markdown("**Error:** {}").format(e) for e in cell.errors))
            return self._error("CellError", "; ".join(cell.errors))
        if cell.shell is not None:
            return await self._shell(cell)
        for command in cell.commands:
            ok = await self._command(command)
            if not ok:
                return self._error("CommandError", command.line)
        if not cell.prompt:
            return self._ok()
        if self.pty_target is not None:
            return await self._pty_prompt(self.pty_target, cell.prompt, allow_stdin)
        return await self._prompt(cell.prompt, allow_stdin)

    async def _prompt(self, text: str, allow_stdin: bool) -> dict[str, Any]:
        session = await self._ensure_session()
        if session is None:
            return self._error("AgentUnavailable", "the agent could not be started")
        session.interactive = bool(allow_stdin)
        blocks: list[dict[str, Any]] = [text_block(text)]
        blocks += [resource_link(p) for p in cells.mentions(text, session.cwd)]
        from .view import TurnView

        turn = session.begin(blocks)
        view = TurnView(turn, self._sink, session=session, rate_hz=self.acp_config.refresh_hz)
        self._running = session
        try:
            await session.finish(turn)
        finally:
            self._running = None
            view.close()
        if turn.error is not None:
            return self._error("AgentError", turn.error.splitlines()[0])
        # A forced cancel left the agent marked for restart: the next cell
        # restarts it (and reopens the session), so this one returns at once.
        return self._ok()

    async def _pty_prompt(self, name: str, text: str, allow_stdin: bool) -> dict[str, Any]:
        try:
            panel = self.ptys.get(name)
            self._running = panel.terminal
            reply = await self.ptys.prompt(name, text, self._sink)
        except PassthroughError as exc:
            self._markdown(Markdown("**Passthrough:** {}").format(str(exc)))
            return self._error("PassthroughError", str(exc))
        if not allow_stdin and reply.text:  # headless (nbclient): no terminal on screen, keep the reply
            self._stream(reply.text + "\n")
        note = ptycell.outcome_markdown(panel.terminal, reply)
        if note:
            self._markdown(note)
        if reply.outcome == "exited":
            return self._error("PassthroughExited", panel.terminal.describe_exit())
        return self._ok()

    # -- agent lifecycle -----------------------------------------------------

    async def _ensure_session(self) -> Session | None:
        client = self.agent
        if client is not None and (not client.alive or client.needs_restart):
            await self._restart_client(keep_session=True, quiet=not client.needs_restart)
        if self.agent is None:
            first_run = os.path.basename(self.spec.command[0]) in ("npx", "uvx", "pnpx", "bunx") if self.spec.command else False
            # An agent given by command line is titled by its whole command: name the program only.
            name = os.path.basename(self.spec.command[0]) if self.spec.source == "command line" and self.spec.command else self.spec.title
            done = self._progress(Markdown("*Starting {}…{}*").format(
                name, Markdown(" (the first start downloads it)") if first_run else Markdown("")))
            try:
                self.agent = await self._new_client().start()
            except CommandNotFound as exc:
                self._markdown(Markdown("**Cannot start {}:** {}").format(self.spec.title, str(exc)))
                return None
            except ConnectionClosed as exc:
                self._markdown(Markdown("**{} exited during start-up.**\n\n").format(self.spec.title) + block(exc.explain()))
                return None
            except (AcpError, OSError) as exc:
                self._markdown(Markdown("**Cannot start {}:** {}").format(self.spec.title, str(exc)))
                return None
            finally:
                done()
        if self.acp_session is None:
            self.acp_session = await self._open_session(self.agent)
        return self.acp_session

    def _new_client(self) -> Client:
        return Client(self.spec, cwd=self.cwd, settings=self.settings, mcp_servers=self.acp_config.mcp_servers)

    async def _open_session(self, client: Client) -> Session | None:
        want, self._want_session = self._want_session, None
        try:
            if want and (client.can("resume") or client.can("load")):
                try:
                    session = await client.load_session(want, self.cwd)
                    self._show_history(session)
                    self._remember(session)
                    return session
                except (RpcError, AcpError) as exc:
                    self._markdown(Markdown("*Could not reopen session {} ({}); starting a new one.*").format(code(want), str(exc)))
            session = await client.new_session(self.cwd)
        except AuthRequired as exc:
            from .view.transcript import auth_markdown

            self._markdown(auth_markdown(exc.methods, list(self.spec.command))
                           + Markdown("\n\n`%auth METHOD` logs in with one of them here (a terminal method "
                                      "opens the agent's login in a terminal); after setting variables, restart the kernel."))
            return None
        except ConnectionClosed as exc:
            self._markdown(Markdown("**The agent went away.**\n\n") + block(exc.explain()))
            return None
        except (RpcError, AcpError) as exc:
            self._markdown(Markdown("**The agent refused to open a session:** {}").format(str(exc)))
            return None
        self._remember(session)
        return session

    def _show_history(self, session: Session) -> None:
        history = session.background
        answer = history.text
        user = [e.text for e in history.events if getattr(e, "role", None) == "user"]
        if not answer and not user:
            self._markdown(Markdown("*Resumed session {}.*").format(code(session.id)))
            return
        shown = answer if len(answer) <= HISTORY_CHARS else "...\n\n" + answer[-HISTORY_CHARS:]
        self._markdown(Markdown("*Reopened session {}: {} earlier prompts. The last answer:*\n\n").format(
            code(session.id), str(len(user))) + markdown(shown))

    def _remember(self, session: Session) -> None:
        try:
            store.remember(self.key, store.Remembered(self.spec.name, list(self.spec.command), session.id, session.cwd))
        except OSError as exc:
            self.log.warning("could not remember the session: %s", exc)

    async def _restart_client(self, *, keep_session: bool, quiet: bool = False) -> None:
        client, session = self.agent, self.acp_session
        self.agent, self.acp_session = None, None
        if keep_session and session is not None:
            self._want_session = session.id
        if client is not None:
            await client.close()
        if not quiet:
            self._markdown(Markdown("*Restarted the agent.*"))

    # -- kernel commands ------------------------------------------------------

    async def _command(self, cmd: cells.Command) -> bool:
        try:
            return await getattr(self, "_cmd_" + cmd.name)(cmd.args)
        except (RpcError, AcpError, ValueError) as exc:
            self._markdown(Markdown("**{}:** {}").format(cmd.line, str(exc)))
            return False

    async def _cmd_help(self, args: list[str]) -> bool:
        self._markdown(cells.help_markdown())
        return True

    async def _cmd_agent(self, args: list[str]) -> bool:
        if not args:
            raise ValueError("usage: %agent NAME | --command CMD")
        if args[0] == "--command":
            spec = adhoc_agent(args[1:] if len(args) > 2 else " ".join(args[1:]))
        else:
            spec = self.acp_config.agent(args[0])
        await self._restart_client(keep_session=False, quiet=True)
        self.spec = spec
        self._markdown(Markdown("*Agent: {}* ({}); it starts with the next prompt.").format(spec.title, code(" ".join(spec.command))))
        return True

    async def _cmd_new(self, args: list[str]) -> bool:
        if self.agent is not None and self.agent.alive and self.acp_session is not None:
            await self.agent.services.close_session(self.acp_session.id)
        self.acp_session = None
        self._want_session = None
        session = await self._ensure_session()
        if session is not None:
            self._markdown(Markdown("*New session {}.*").format(code(session.id)))
        return session is not None

    async def _connected(self) -> Session:
        session = await self._ensure_session()
        if session is None:
            raise AcpError("no session (see the message above)")
        return session

    async def _cmd_sessions(self, args: list[str]) -> bool:
        session = await self._connected()
        listed = await session.client.list_sessions(self.cwd)
        if not listed:
            self._markdown(Markdown("*No sessions listed for this directory.*"))
            return True
        rows = Markdown("\n").join(
            Markdown("- {} {}{}{}").format(
                code(s.get("sessionId")), text(s.get("title") or ""),
                Markdown(" · updated {}").format(str(s.get("updatedAt"))) if s.get("updatedAt") else Markdown(""),
                Markdown(" ← **current**") if s.get("sessionId") == session.id else Markdown(""))
            for s in listed
        )
        self._markdown(rows + Markdown("\n\nReopen one with `%load ID`."))
        return True

    async def _cmd_load(self, args: list[str]) -> bool:
        if len(args) != 1:
            raise ValueError("usage: %load SESSION_ID")
        await self._restart_client(keep_session=False, quiet=True)
        self._want_session = args[0]
        return await self._ensure_session() is not None

    async def _cmd_mode(self, args: list[str]) -> bool:
        session = await self._connected()
        if not args:
            modes = (session.modes or {}).get("availableModes") or []
            listing = Markdown(", ").join(code(m.get("id")) for m in modes if isinstance(m, dict)) or Markdown("none offered")
            self._markdown(Markdown("Mode: {}. Available: {}.").format(code(session.current_mode), listing))
            return True
        await session.set_mode(args[0])
        self._markdown(Markdown("*Mode: {}.*").format(code(args[0])))
        return True

    async def _cmd_model(self, args: list[str]) -> bool:
        session = await self._connected()
        if not args:
            opt = session.model_option()
            if opt:
                values = Markdown(", ").join(code(o.get("value")) for o in opt.get("options") or [] if isinstance(o, dict))
                self._markdown(Markdown("Model: {}. Available: {}.").format(code(opt.get("currentValue")), values))
            else:
                self._markdown(Markdown("Models: {}").format(str(session.models or "the agent lists none")))
            return True
        await session.set_model(args[0])
        self._markdown(Markdown("*Model: {}.*").format(code(args[0])))
        return True

    async def _cmd_config(self, args: list[str]) -> bool:
        session = await self._connected()
        if len(args) != 2:
            raise ValueError("usage: %config ID VALUE")
        value: Any = {"true": True, "false": False}.get(args[1].lower(), args[1])
        await session.set_config_option(args[0], value)
        self._markdown(Markdown("*{} = {}.*").format(code(args[0]), code(args[1])))
        return True

    async def _cmd_permissions(self, args: list[str]) -> bool:
        if len(args) != 1 or args[0] not in POLICIES:
            raise ValueError("usage: %permissions " + "|".join(POLICIES))
        self.settings.permissions = args[0]  # type: ignore[assignment]
        self._markdown(Markdown("*Permissions: {}.*").format(args[0]))
        return True

    async def _cmd_cwd(self, args: list[str]) -> bool:
        if len(args) != 1:
            raise ValueError("usage: %cwd DIR")
        path = os.path.abspath(os.path.join(self.cwd, os.path.expanduser(args[0])))
        if not os.path.isdir(path):
            raise ValueError(f"not a directory: {path}")
        self.cwd = path
        self._markdown(Markdown("*Working directory: {} (for new sessions; `%new` to start one here).*").format(code(path)))
        return True

    async def _cmd_auth(self, args: list[str]) -> bool:
        if len(args) != 1:
            raise ValueError("usage: %auth METHOD_ID")
        if self.agent is None or not self.agent.alive:
            self.agent = await self._new_client().start()
        method = next((m for m in self.agent.auth_methods if isinstance(m, dict) and m.get("id") == args[0]), {})
        if method.get("type") == "terminal":
            return await self._terminal_login(method)
        await self.agent.authenticate(args[0])
        self._markdown(Markdown("*Authenticated.*"))
        return True

    async def _terminal_login(self, method: dict) -> bool:
        """Run the agent's login in a terminal here; on exit status 0, reconnect (ACP v1)."""
        panel = self.ptys.open(ptycell.login_target(self.spec, method), self.cwd, reuse=False)
        self._sink.display(panel.bundle())  # type: ignore[union-attr]
        self._markdown(Markdown("*Log in in the terminal above; the kernel reconnects when it exits.*"))
        self._running = panel.terminal
        try:
            outcome = await panel.terminal.wait_exit()
        finally:
            self._running = None
        if outcome == "interrupted":
            self._markdown(Markdown("*Interrupted: Ctrl-C sent to the login. Run `%auth` again to retry.*"))
            return False
        status = panel.terminal.exit_status
        await self.ptys.close(panel.terminal.name)  # exited: this only forgets it
        if status != 0:
            self._markdown(Markdown("**Login {}.** Run {} to try again.").format(panel.terminal.describe_exit(), code(f"%auth {method.get('id')}")))
            return False
        await self._restart_client(keep_session=True, quiet=True)
        self._markdown(Markdown("*Logged in; the agent restarts with the next prompt.*"))
        return True

    async def _cmd_passthrough(self, args: list[str]) -> bool:
        verb = args[0] if args else ""
        if verb == "off":
            self.pty_target = None
            self._markdown(Markdown("*Prompts go to {} over ACP again.*").format(self.spec.title))
        elif verb == "list":
            self._markdown(self.ptys.listing())
        elif verb == "stop":
            name = args[1] if len(args) > 1 else self.pty_target
            if name is None:
                raise PassthroughError("no passthrough terminal to stop")
            self.ptys.get(name)
            await self.ptys.close(name)
            if self.pty_target == name:
                self.pty_target = None
            self._markdown(Markdown("*Stopped {}.*").format(code(name)))
        else:
            target = ptycell.resolve(args, self.acp_config, self.spec)
            panel = self.ptys.open(target, self.cwd)
            self.pty_target = panel.terminal.name
            self._sink.display(panel.bundle())  # type: ignore[union-attr]
            self._markdown(Markdown("*The next cells are typed into {} "
                                    "(interrupt sends Ctrl-C; `%passthrough off` goes back to ACP).*").format(code(panel.terminal.name)))
        return True

    async def _cmd_restart(self, args: list[str]) -> bool:
        await self._restart_client(keep_session=True)
        return await self._ensure_session() is not None

    async def _cmd_status(self, args: list[str]) -> bool:
        M = Markdown
        lines = [M("- agent: **{}** ({})").format(self.spec.title, code(" ".join(self.spec.command)))]
        client, session = self.agent, self.acp_session
        if client is not None and client.alive:
            info = client.agent_info
            lines.append(M("- running: {} {}, pid {}").format(
                str(info.get("title") or info.get("name") or "?"), str(info.get("version") or ""),
                str(client.transport.pid if client.transport else "?")))
        else:
            lines.append(M("- not running (starts with the next prompt)"))
        if session is not None:
            lines.append(M("- session: {} in {}").format(code(session.id), code(session.cwd)))
            if session.current_mode:
                lines.append(M("- mode: {}").format(code(session.current_mode)))
            opt = session.model_option()
            if opt:
                lines.append(M("- model: {}").format(code(opt.get("currentValue"))))
            if session.usage:
                lines.append(M("- usage: {}/{} tokens").format(str(session.usage.get("used")), str(session.usage.get("size"))))
        if self.pty_target is not None:
            lines.append(M("- prompts go to the passthrough terminal {}").format(code(self.pty_target)))
        lines.append(M("- permissions: {}").format(self.settings.permissions))
        lines.append(M("- working directory: {}").format(code(self.cwd)))
        self._markdown(M("\n").join(lines))
        return True

    # -- %%shell --------------------------------------------------------------

    async def _shell(self, cell: cells.Cell) -> dict[str, Any]:
        from .shellcell import ShellCellError, parse_options, run_shell
        from .terminals import TerminalError

        try:
            opts = parse_options(cell.shell_args)
            result = await run_shell(cell.shell or "", opts, self._stream, cwd=self.cwd,
                                     on_start=lambda term: setattr(self, "_running", term))
        except (ShellCellError, TerminalError) as exc:
            self._stream(f"{exc}\n", "stderr")
            return self._error(type(exc).__name__, str(exc))
        if result.status.exit_code != 0 and opts.raise_on_error:
            return self._error("ShellError", str(result.status))
        return self._ok()

    # -- completion, inspection, shutdown --------------------------------------

    async def do_is_complete(self, code: str) -> dict[str, Any]:
        status = cells.is_complete(code)
        return {"status": status, **({"indent": ""} if status == "incomplete" else {})}

    async def do_complete(self, code: str, cursor_pos: int) -> dict[str, Any]:
        from .complete import complete

        matches, start = complete(code, cursor_pos, kernel=self)
        return {"status": "ok", "matches": matches, "cursor_start": start, "cursor_end": cursor_pos, "metadata": {}}

    async def do_inspect(self, code: str, cursor_pos: int, detail_level: int = 0, omit_sections: Any = ()) -> dict[str, Any]:
        from .complete import inspect

        found = inspect(code, cursor_pos, kernel=self)
        if not found:
            return {"status": "ok", "found": False, "data": {}, "metadata": {}}
        return {"status": "ok", "found": True, "data": bundle(found), "metadata": {}}

    async def do_shutdown(self, restart: bool) -> dict[str, Any]:
        # This runs on the control thread's loop; the agent and terminals live on the shell's.
        client, self.agent, self.acp_session = self.agent, None, None
        if client is not None:
            await self._on_shell_loop(client.close(), "the agent")
            client.kill_now()
        await self._on_shell_loop(self.ptys.close_all(), "the passthrough terminals")
        self.ptys.kill_now()
        return {"status": "ok", "restart": restart}

    async def _on_shell_loop(self, coro: Any, what: str) -> None:
        try:
            loop = self._loop
            if loop is not None and loop.is_running() and loop is not asyncio.get_running_loop():
                done = asyncio.run_coroutine_threadsafe(coro, loop)
                await asyncio.wait_for(asyncio.wrap_future(done), 5.0)
            else:
                await coro
        except Exception:  # noqa: BLE001 - shutting down regardless
            self.log.warning("closing %s cleanly failed; killing", what, exc_info=True)


def main() -> None:
    from ipykernel import kernelapp
    from ipykernel.iostream import IOPubThread

    class _NoForkPipe(IOPubThread):
        def __init__(self, socket: Any, pipe: bool = False, **kwargs: Any) -> None:
            super().__init__(socket, pipe=False, **kwargs)

    class AcpKernelApp(kernelapp.IPKernelApp):
        def init_iopub(self, context: Any) -> None:
            # IPKernelApp's IOPub thread listens on a sixth TCP port (127.0.0.1)
            # for output of *forked* Python children. This kernel runs no user
            # Python and forks none (agents and terminals are exec'd with pipes
            # of their own): no port beyond the five in the connection file.
            saved, kernelapp.IOPubThread = kernelapp.IOPubThread, _NoForkPipe
            try:
                super().init_iopub(context)
            finally:
                kernelapp.IOPubThread = saved

    AcpKernelApp.launch_instance(kernel_class=AcpKernel)


if __name__ == "__main__":
    main()
