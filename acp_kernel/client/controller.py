"""One agent connection as every front-end drives it: the ACP kernel, the
magics and the Python API.

A :class:`Controller` owns what each front-end used to implement on its own:
starting the agent (with the start-up line and failure text of
:mod:`acp_kernel.client.startup`), reconnecting after the agent died, resuming the
remembered session in the remembered directory with the remembered agent
(:mod:`acp_kernel.client.store`), sessions, modes, models, config options,
permissions, cancel and interrupt, and running a turn into a view. The verbs
of the command table (:mod:`acp_kernel.client.commands`) run here, so every
front-end says the same words.

The front-end supplies a :class:`Frontend`: where this cell's outputs go, and
who (if anyone) can answer a question; and the :class:`~acp_kernel.client.parts.Parts`
above the client layer it uses (the view, the notebook MCP server, passthrough
terminals), so this module imports none of them.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from typing import Any, Callable, Protocol

from . import store
from .commands import VERBS, Call, UsageError
from ..errors import AcpError, AuthRequired, ConnectionClosed, PassthroughError, RpcError
from .notebook import SessionBridge
from .params import parse_set, value_text
from .parts import Parts
from .registry import BUILTIN, AgentSpec, Config, ConfigError, adhoc_agent, load_config
from ..safe import Markdown, block, bundle, code, markdown, plain, text
from .session import Choice, Client, Session
from .startup import explain_failure, starting_line
from .turn import Turn

#: How long an interrupted turn may take to end before the cell returns anyway.
CANCEL_GRACE = 0.75
#: How much replayed history is shown after a session/load.
HISTORY_CHARS = 4000


class Frontend(Protocol):
    """What a front-end gives the controller (duck-typed; keep it small)."""

    def sink(self) -> Any:
        """This cell's :class:`~acp_kernel.view.sink.DisplaySink` (display / update)."""

    def interactive(self) -> bool:
        """Can someone answer a permission question or a form now?"""

    def widgets(self) -> bool:
        """Can this front-end show widgets (buttons, live rows)?"""

    def asker(self) -> Callable[[Any, Any], None] | None:
        """Who answers questions without widgets: the view hands it each
        question with its tool call (``asker(prompt, call)``) when the
        frontend answers through stdin (``input_request`` in the kernel,
        ``input()`` in terminal IPython); ``close()`` runs when the turn
        ends. None: widgets (or nobody) answer."""

    # Optional: ``frontend()`` -> :class:`~acp_kernel.view.frontend.Frontend`
    # (what the cell's frontend shows: widgets, in-place updates, who answers).


class Unavailable(AcpError):
    """The agent could not be started or give a session; the cell already
    shows why, ``str()`` is one line for an error reply."""


def load_settings(permissions: str | None = None) -> tuple[Config, str | None]:
    """The config file (or the built-in agents and the reason it was not read)."""
    try:
        return load_config(), None
    except ConfigError as exc:
        return Config(agents=dict(BUILTIN)), str(exc)


class Controller:
    """One agent, its current session and what the user chose for it."""

    def __init__(self, frontend: Frontend, *, parts: Parts, spec: AgentSpec | None = None, config: Config | None = None,
                 cwd: str | None = None, permissions: str | None = None, label: str | None = None,
                 key: str | None = None, ptys: Any = None, terminal_auth: bool = True) -> None:
        self.frontend = frontend
        self.parts = parts
        self.config_error: str | None = None
        if config is None:
            config, self.config_error = load_settings()
        self.config = config
        self.spec = spec or config.agents[config.default_agent]
        self.default_name = self.spec.name
        self.settings = config.client_settings(permissions)
        self.settings.terminal_auth = terminal_auth
        self.cwd = os.path.abspath(cwd or os.getcwd())
        self.label = label  # the magics' alias; the kernel shows the agent's title
        self.key = key
        self.ptys = ptys
        self.client: Client | None = None
        self.session: Session | None = None
        self.want_session: str | None = None
        self.running: Any = None  # what an interrupt stops: a Session, a terminal...
        self.pty_target: str | None = None  # kernel: while set, prompts are typed into this terminal
        self.pty_agent = ""  # the agent whose CLI pty_target runs ("" for a --command terminal)
        self.pty_prompt = ""  # the last prompt typed into it (remembered for a resume)
        self.pty_resume: tuple[str, str] | None = None  # after a restart: (agent, last prompt) to reopen
        self.values: dict[str, Any] = {}  # kernel: %set NAME VALUE, for {NAME} in prompts
        #: Offer the ``notebook`` MCP server (config ``"mcp": false``, or ``--no-mcp``, turns it off).
        self.notebook_mcp = config.notebook_mcp
        self._notebook_entry: dict[str, Any] | None = None
        self._notebook_tools: frozenset[str] = frozenset()

    # -- output ---------------------------------------------------------------

    def say(self, md: Markdown, plain_text: Any = None) -> None:
        """A message in the cell (``md`` from our templates, agent strings
        escaped); its text/plain is the rendered text (a console prints it),
        not the markdown source with its escapes."""
        self.frontend.sink().display(self.parts.message(md, plain_text))

    def progress(self, md: Markdown) -> Callable[[], None]:
        """A line shown while something slow runs; the returned callable
        blanks it (where the frontend applies updates: a console would
        print the blank again, or ignore it)."""
        sink = self.frontend.sink()
        display_id = f"acp-progress-{uuid.uuid4().hex[:12]}"
        sink.display(self.parts.message(md), display_id=display_id)
        if not self.updates():
            return lambda: None
        return lambda: sink.update(bundle(Markdown(""), ""), display_id=display_id)

    def view_frontend(self) -> Any:
        """The cell's :class:`~acp_kernel.view.frontend.Frontend`, when the front-end tells."""
        get = getattr(self.frontend, "frontend", None)
        return get() if get is not None else None

    def updates(self) -> bool:
        fe = self.view_frontend()
        return True if fe is None else fe.updates

    @property
    def name(self) -> Markdown:
        return Markdown("**{}**").format(text(self.label or self.spec.display_name()))

    def notes(self) -> None:
        """Say once what the user should know before anything runs."""
        if self.config_error:
            self.say(Markdown("**Configuration problem** (built-in agents only until it is fixed):\n\n")
                     + block(self.config_error))
            self.config_error = None

    # -- remembering ----------------------------------------------------------

    def restore(self) -> None:
        """Take back the agent, directory and session this notebook used
        before a restart (kept under ``self.key``)."""
        got = store.recall(self.key)
        if got is None or (got.default or got.agent) != self.default_name:
            return  # another kernel (agent) now runs this notebook
        known = self.config.agents.get(got.agent)
        if known is not None and tuple(known.command) == tuple(got.command):
            self.spec = known
        elif got.command:
            self.spec = adhoc_agent(got.command)
        if os.path.isdir(got.cwd):
            self.cwd = got.cwd
        self.want_session = got.session_id or None
        if got.passthrough:  # cells went to the agent's own CLI: they still do (started on the next prompt)
            self.pty_target = self.pty_agent = got.passthrough
            self.pty_prompt = got.passthrough_prompt
            self.pty_resume = (got.passthrough, got.passthrough_prompt)

    def remember(self) -> None:
        session = self.session
        try:
            store.remember(self.key, store.Remembered(
                self.spec.name, list(self.spec.command), session.id if session else "",
                session.cwd if session else self.cwd, self.default_name,
                self.pty_agent if self.pty_target else "", self.pty_prompt if self.pty_target else ""))
        except OSError:
            pass  # nothing to resume after a restart; the notebook works on

    # -- the agent's life -----------------------------------------------------

    async def ensure(self) -> Session:
        """The session to prompt: start the agent, reconnect after it died,
        reopen the remembered session. Raises :class:`Unavailable` after the
        cell shows why."""
        self.notes()
        client = self.client
        if client is not None and (not client.alive or client.needs_restart):
            why = "it had to be restarted" if client.needs_restart else "it had exited"
            await self.restart(keep_session=True, quiet=True)
            self.say(Markdown("*Restarted {} ({}).*").format(self.name, why))
        if self.client is None:
            self.client = await self._start()
        if self.session is None:
            self.session = await self._open(self.client)
        return self.session

    async def _start(self) -> Client:
        done = self.progress(Markdown("*{}*").format(text(starting_line(self.spec))))
        client = Client(self.spec, cwd=self.cwd, settings=self.settings, mcp_servers=self._mcp_servers())
        try:
            return await client.start()
        except (AcpError, OSError) as exc:
            raise await self._failed(client, exc) from None
        finally:
            done()

    def _mcp_servers(self) -> list[dict[str, Any]]:
        """The config's MCP servers, plus the ``notebook`` server inside a
        Jupyter kernel (a fresh token per agent process: the last one's
        server is told to go)."""
        servers = list(self.config.mcp_servers)
        self._withdraw_notebook()
        side = getattr(self.frontend, "notebook_side", lambda: None)()
        if not self.notebook_mcp or side is None:
            return servers
        if any(isinstance(s, dict) and s.get("name") == "notebook" for s in servers):
            self.say(Markdown("*The config file has an MCP server named `notebook`: "
                              "acp-kernel's own notebook server is not offered.*"))
            return servers
        bridge = SessionBridge(self, side)
        self._notebook_entry, self._notebook_tools = self.parts.offer_notebook(bridge), bridge.tools
        return servers + ([self._notebook_entry] if self._notebook_entry else [])

    def _withdraw_notebook(self) -> None:
        entry, self._notebook_entry = self._notebook_entry, None
        if entry is not None:
            self.parts.withdraw_notebook(entry)

    async def _failed(self, client: Client, exc: BaseException) -> Unavailable:
        """Show why the agent could not start or give its first session (with
        the stderr tail and exit status of its process, which an ``RpcError``
        does not carry) and return the one-line error to raise."""
        try:
            await client.close()
        except Exception:  # noqa: BLE001 - it failed already; what it said matters more
            client.kill_now()
        status, err = client.transport.exit_info() if client.transport is not None else (None, "")
        failure = explain_failure(self.spec, exc, stderr=err, returncode=status)
        self.say(failure.markdown(), plain(failure.plain()))
        first = failure.detail.split("\n", 1)[0]
        return Unavailable(f"{failure.headline}: {first}" if first else failure.headline)

    async def _open(self, client: Client) -> Session:
        want, self.want_session = self.want_session, None
        try:
            if want and (client.can("resume") or client.can("load")):
                try:
                    session = await client.load_session(want, self.cwd)
                except (RpcError, AcpError) as exc:
                    if isinstance(exc, AuthRequired):
                        raise
                    self.say(Markdown("*Could not reopen session {} ({}); starting a new one in {}.*").format(
                        code(want), text(str(exc)), code(self.cwd)))
                else:
                    self._show_history(session, "Resumed")
                    return self._opened(session)
            elif want:
                self.say(Markdown("*Session {} cannot be reopened: {} offers neither resume nor load; "
                                  "starting a new one in {}.*").format(code(want), self.name, code(self.cwd)))
            return self._opened(await client.new_session(self.cwd))
        except AuthRequired as exc:
            self.say(self.parts.auth_markdown(exc.methods, list(self.spec.command))
                     + Markdown("\n\n`%auth METHOD` logs in with one of them here (a terminal method "
                                "opens the agent's login in a terminal); after setting variables, restart."))
            raise Unavailable(f"{self.spec.display_name()} needs you to log in") from None
        except (ConnectionClosed, RpcError, AcpError) as exc:
            # The agent is no use without a session: stop it, and say why with what it printed.
            self.client = None
            raise await self._failed(client, exc) from None

    def _opened(self, session: Session) -> Session:
        self.session = session
        self.remember()
        return session

    def _show_history(self, session: Session, verb: str) -> None:
        """After a resume or load: the number of earlier prompts and the
        last answer only (the text after the last user message)."""
        events = session.background.events
        users = [i for i, e in enumerate(events) if getattr(e, "role", None) == "user"]
        start = users[-1] + 1 if users else 0
        answer = "".join(e.text for e in events[start:] if getattr(e, "role", None) == "agent")
        where = code(session.cwd)
        if not answer and not users:
            self.say(Markdown("*{} session {} in {}.*").format(verb, code(session.id), where))
            return
        shown = answer if len(answer) <= HISTORY_CHARS else "...\n\n" + answer[-HISTORY_CHARS:]
        self.say(Markdown("*Reopened session {} in {}: {} earlier prompts. The last answer:*\n\n").format(
            code(session.id), where, str(len(users))) + markdown(shown))

    async def restart(self, *, keep_session: bool, quiet: bool = False) -> None:
        client, session = self.client, self.session
        self.client, self.session = None, None
        if keep_session and session is not None:
            self.want_session = session.id
        if client is not None:
            await client.close()
        self._withdraw_notebook()
        if not quiet:
            self.say(Markdown("*Restarted {}.*").format(self.name))

    async def close(self) -> None:
        client, self.client, self.session = self.client, None, None
        if client is not None:
            await client.close()
        self._withdraw_notebook()

    def kill_now(self) -> None:
        if self.client is not None:
            self.client.kill_now()

    # -- turns ----------------------------------------------------------------

    async def prompt(self, blocks: list[dict[str, Any]]) -> Turn:
        """Send a prompt and render the turn live in this cell; returns the
        ended turn (its ``error`` says what went wrong)."""
        session = await self.ensure()
        session.interactive = self.frontend.interactive()
        self._between_turns(session)
        turn = session.begin(blocks)  # ContentRefused: before a turn exists, for the front-end to show
        # The view hands each question (with its tool call) to the asker when
        # the frontend answers through stdin.
        asker = self.frontend.asker()
        view = self.parts.view_for(turn, self.frontend.sink(), session=session, rate_hz=self.config.refresh_hz,
                        widgets=self.frontend.widgets(), frontend=self.view_frontend(), asker=asker)
        self.running = session
        try:
            await session.finish(turn)
        finally:
            self.running = None
            if asker is not None:
                getattr(asker, "close", lambda: None)()
            view.close()
        return turn

    def _between_turns(self, session: Session) -> None:
        """What the agent asked while no turn was running (answered then by the
        permission broker, never asked: nobody watched a cell for it), said once
        in a display of its own before this cell's turn, not inside it."""
        last = session.turns[-1] if session.turns else session.background
        said_turn, said = getattr(self, "_between_said", (None, 0))
        start = said if said_turn is last else 0
        for ev in last.events[start:]:
            if type(ev).__name__ == "Notice" and getattr(ev, "kind", None) == "between-turns":
                self.say(Markdown("⚠️ *Before this cell:* {}").format(text(ev.text)), f"Before this cell: {ev.text}")
        self._between_said = (last, len(last.events))

    async def prompt_terminal(self, name: str, prompt: str) -> Any:
        """Type a prompt into a passthrough terminal shown in this cell; the
        :class:`~acp_kernel.passthrough.manager.Reply`. Where no terminal is on
        screen (headless), the reply is kept as text in the cell."""
        if name not in self.ptys.panels and self.pty_resume is not None and self.pty_resume[0] == name:
            reply = await self._reopen_terminal(name, prompt)
            if reply is not None:
                return reply
        panel = self.ptys.get(name)
        self.running = panel.terminal
        try:
            reply = await self.ptys.prompt(name, prompt, self.frontend.sink())
        finally:
            self.running = None
        if reply.sent and name == self.pty_target and self.pty_agent:
            self.pty_prompt = prompt
            self.remember()
        note = self.parts.outcome_markdown(panel.terminal, reply)
        if note:
            self.say(note)
        return reply

    async def _reopen_terminal(self, name: str, prompt: str) -> Any:
        """After a kernel restart: the remembered CLI again, resumed where it has a
        resume flag (:func:`~acp_kernel.passthrough.ptycell.reopen`); the
        :class:`Reply` when the prompt is not typed again, else None."""
        _, last = self.pty_resume or ("", "")
        self.pty_resume = None
        self.running = None
        opened = await self.parts.reopen_terminal(self.ptys, name, last, prompt, self.config, self.cwd)
        self.pty_target = opened.panel.terminal.name
        self.say(opened.note)
        if opened.type_prompt:
            return None
        opened.panel.show(self.frontend.sink())
        return self.parts.resumed_reply(prompt, opened.panel.terminal.screen_text())

    async def cancel(self) -> None:
        if self.session is not None:
            await self.session.cancel(grace=CANCEL_GRACE)

    def interrupt(self, cell: asyncio.Task | None = None) -> None:
        """Stop what runs now (on the loop): a turn is cancelled per the
        spec, a passthrough terminal gets Ctrl-C, a shell command is killed;
        anything else (an agent starting, a login) cancels ``cell``."""
        running = self.running
        if isinstance(running, Session):
            running.cancel_soon(grace=CANCEL_GRACE)  # session/cancel is written now, not on a later loop turn
        elif hasattr(running, "interrupt"):
            running.interrupt()
        elif running is not None and hasattr(running, "kill"):
            asyncio.ensure_future(running.kill("killed"))
        elif cell is not None and not cell.done():
            cell.cancel()

    # -- the command table's verbs ----------------------------------------------

    async def run(self, call: Call) -> Any:
        """Run one verb; usage errors raise :class:`UsageError`, agent errors
        show in the cell and raise :class:`Unavailable` / ``AcpError``."""
        self.notes()
        handler = getattr(self, "verb_" + call.verb.name, None)
        if handler is None:  # pragma: no cover - the front-end handles its own verbs
            raise UsageError(f"{call.verb.name}: not available here")
        return await handler(call)

    async def verb_agent(self, call: Call) -> None:
        command = call.words("--command")
        if command:
            spec = adhoc_agent(command)
        elif call.arg(0):
            spec = self.config.agent(call.arg(0) or "")
        else:
            raise UsageError("usage: %agent NAME | --command CMD")
        await self.restart(keep_session=False, quiet=True)
        self.want_session = None
        self.spec = spec
        self.remember()
        self.say(Markdown("*Agent: {}* ({}); it starts with the next prompt.").format(
            text(spec.display_name()), code(" ".join(spec.command))))

    async def verb_agents(self, call: Call) -> None:
        listing, failed = self.parts.list_agents()
        self.say(block(listing.rstrip("\n")), plain(listing))
        if failed:
            raise AcpError(listing.strip().splitlines()[0] if listing.strip() else "cannot list the agents")

    async def verb_new(self, call: Call) -> None:
        if self.client is not None and self.client.alive and self.session is not None:
            await self.client.services.close_session(self.session.id)
        self.session, self.want_session = None, None
        session = await self.ensure()
        self.say(Markdown("*New session {} in {}.*").format(code(session.id), code(session.cwd)))

    async def verb_sessions(self, call: Call) -> list[dict[str, Any]]:
        session = await self.ensure()
        listed = await session.client.list_sessions(self.cwd)
        if not listed:
            self.say(Markdown("*No sessions listed for {}.*").format(code(self.cwd)))
            return listed
        rows = Markdown("\n").join(
            Markdown("- {} {}{}{}").format(
                code(s.get("sessionId")), text(s.get("title") or ""),
                Markdown(" · updated {}").format(text(str(s.get("updatedAt")))) if s.get("updatedAt") else Markdown(""),
                Markdown(" ← **current**") if s.get("sessionId") == session.id else Markdown(""))
            for s in listed)
        self.say(rows + Markdown("\n\nReopen one with {}.").format(code(self._usage("load"))))
        return listed

    def _usage(self, verb: str) -> str:
        return VERBS[verb].usage(getattr(self.frontend, "kind", "kernel"))

    async def verb_load(self, call: Call) -> None:
        sid = call.arg(0) or ""
        client = self.client
        if client is None or not client.alive or client.needs_restart:
            await self.restart(keep_session=False, quiet=True)
            self.want_session = sid
            await self.ensure()
            return
        if self.session is not None:
            await client.services.close_session(self.session.id)
        try:
            session = await client.load_session(sid, self.cwd)
        except (RpcError, AcpError) as exc:
            self.say(Markdown("**Could not reopen session {}:** {}").format(code(sid), text(str(exc))))
            raise AcpError(f"could not reopen session {sid}") from None
        self._opened(session)
        self._show_history(session, "Reopened")

    async def verb_mode(self, call: Call) -> None:
        await self._choose(call, "mode")

    async def verb_model(self, call: Call) -> None:
        await self._choose(call, "model")

    async def _choose(self, call: Call, what: str) -> None:
        session = await self.ensure()
        wanted = call.arg(0)
        if wanted is None:
            choices = available(session, what)
            if not choices:
                self.say(Markdown("*{} offers no {}s.*").format(self.name, what))
                return
            rows = Markdown("\n").join(
                Markdown("- {}{}{}{}").format(
                    code(c.id), Markdown(" {}").format(text(c.name)) if c.name and c.name != c.id else Markdown(""),
                    Markdown(" — {}").format(text(c.description)) if c.description else Markdown(""),
                    Markdown(" ← **current**") if c.current else Markdown(""))
                for c in choices)
            self.say(Markdown("{}s {} offers:\n\n").format(what.capitalize(), self.name) + rows)
            return
        setter = session.set_mode if what == "mode" else session.set_model
        chosen = await setter(wanted)  # an id or a name; one the agent does not list is refused
        shown = chosen.id if chosen is not None else wanted
        self.say(Markdown("*{}: {}.*").format(what.capitalize(), code(shown)))

    async def verb_config(self, call: Call) -> None:
        session = await self.ensure()
        cid, value = call.arg(0), call.arg(1)
        if value is not None:
            parsed: Any = {"true": True, "false": False}.get(value.lower(), value)
            await session.set_config_option(cid or "", parsed)
            self.say(Markdown("*{} = {}.*").format(code(cid), code(value)))
            return
        options = [o for o in session.config_options if cid is None or o.get("id") == cid]
        if not options:
            self.say(Markdown("*No config option {}.*").format(code(cid)) if cid else
                     Markdown("*{} offers no config options.*").format(self.name))
            return
        rows = []
        for o in options:
            values = [v.get("value") for v in o.get("options") or [] if isinstance(v, dict) and "value" in v]
            rows.append(Markdown("- {} ({}): {}{}").format(
                code(o.get("id")), text(o.get("name") or o.get("category") or o.get("type") or ""),
                code(o.get("currentValue")),
                Markdown("; choices: {}").format(Markdown(", ").join(code(v) for v in values)) if values else Markdown("")))
        self.say(Markdown("Config options:\n\n") + Markdown("\n").join(rows))

    async def verb_set(self, call: Call) -> None:
        """``%set NAME VALUE`` (the kernel's; papermill's parameters): later
        prompts put the value where they say ``{NAME}``."""
        try:
            name, value = parse_set(call.rest)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        self.values[name] = value
        self.say(Markdown("*{} = {}; prompts put it where they say {}.*").format(
            code(name), code(value_text(value)), code("{" + name + "}")))

    async def verb_permissions(self, call: Call) -> None:
        policy = call.arg(0)
        if policy is not None:
            self.settings.permissions = policy  # type: ignore[assignment]
        self.say(Markdown("*Permissions: {}.*").format(text(self.settings.permissions)))

    async def verb_cwd(self, call: Call) -> None:
        if call.arg(0) is not None:
            path = os.path.abspath(os.path.join(self.cwd, os.path.expanduser(call.arg(0) or "")))
            if not os.path.isdir(path):
                raise UsageError(f"not a directory: {path}")
            self.cwd = path
            self.remember()
        self.say(Markdown("*Working directory: {} (for new sessions; `{}` starts one here).*").format(
            code(self.cwd), text(self._usage("new"))))

    async def verb_cancel(self, call: Call) -> None:
        await self.cancel()

    async def verb_restart(self, call: Call) -> None:
        await self.restart(keep_session=True)
        await self.ensure()

    async def verb_auth(self, call: Call) -> None:
        method_id = call.arg(0) or ""
        if self.client is None or not self.client.alive:
            self.client = await self._start()
        method = next((m for m in self.client.auth_methods if m.get("id") == method_id), {})
        if method.get("type") == "terminal":
            await self._terminal_login(method)
            return
        await self.client.authenticate(method_id)
        self.say(Markdown("*Authenticated.*"))

    async def _terminal_login(self, method: dict) -> None:
        """Run the agent's login in a terminal here; on exit status 0, reconnect (ACP v1)."""
        if self.ptys is None:
            raise AcpError("this front-end cannot show a terminal for the login")
        panel = self.ptys.open(self.parts.login_target(self.spec, method), self.cwd, reuse=False)
        panel.show(self.frontend.sink())
        self.say(Markdown("*Log in in the terminal above; the agent reconnects when it exits.*"))
        self.running = panel.terminal
        try:
            outcome = await panel.terminal.wait_exit()
        finally:
            self.running = None
        if outcome == "interrupted":
            self.say(Markdown("*Interrupted: Ctrl-C sent to the login. Run {} again to retry.*").format(
                code(self._usage("auth"))))
            raise AcpError("the login was interrupted")
        status = panel.terminal.exit_status
        await self.ptys.close(panel.terminal.name)  # exited: this only forgets it
        if status != 0:
            self.say(Markdown("**Login {}.** Run {} to try again.").format(
                text(panel.terminal.describe_exit()), code(f"{self._usage('auth').rsplit(' ', 1)[0]} {method.get('id')}")))
            raise AcpError(f"login {panel.terminal.describe_exit()}")
        await self.restart(keep_session=True, quiet=True)
        self.say(Markdown("*Logged in; the agent restarts with the next prompt.*"))

    async def verb_passthrough(self, call: Call) -> None:
        """The ACP kernel's ``%passthrough``: the next cells are typed into the
        terminal (``pty_target``) until ``off``. The magics open terminals by alias."""
        command = call.words("--command")
        args = call.args + (["--command", *command] if command else [])
        verb = args[0] if args else ""
        if verb == "off":
            self.pty_target = None
            self.remember()
            self.say(Markdown("*Prompts go to {} over ACP again.*").format(text(self.spec.title)))
        elif verb == "list":
            self.say(self.ptys.listing())
        elif verb == "stop":
            name = args[1] if len(args) > 1 else self.pty_target
            if name is None:
                raise PassthroughError("no passthrough terminal to stop")
            self.ptys.get(name)
            await self.ptys.close(name)
            if self.pty_target == name:
                self.pty_target = None
                self.remember()
            self.say(Markdown("*Stopped {}.*").format(code(name)))
        else:
            target = self.parts.resolve_terminal(args, self.config, self.spec)
            panel = self.ptys.open(target, self.cwd)
            self.pty_target = panel.terminal.name
            self.pty_agent = target.name if args[:1] != ["--command"] else ""
            self.pty_prompt, self.pty_resume = "", None
            self.remember()
            panel.show(self.frontend.sink())
            self.say(self.parts.opened_markdown(panel.terminal))
            note = self.ptys.note(panel.terminal.name)  # why the notebook MCP server is off, if it is
            if note is not None:
                self.say(note)

    def status_lines(self) -> list[Markdown]:
        M = Markdown
        lines = [M("- agent: {} ({})").format(self.name, code(" ".join(self.spec.command)))]
        client, session = self.client, self.session
        if client is not None and client.alive:
            info = client.agent_info
            lines.append(M("- running: {} {}, pid {}").format(
                text(str(info.get("title") or info.get("name") or "?")), text(str(info.get("version") or "")),
                str(client.transport.pid if client.transport else "?")))
        else:
            lines.append(M("- not running (starts with the next prompt)"))
        if session is not None:
            lines.append(M("- session: {} in {}").format(code(session.id), code(session.cwd)))
            if session.current_mode:
                lines.append(M("- mode: {}").format(code(session.current_mode)))
            model = session.current_model
            if model:
                lines.append(M("- model: {}").format(code(model)))
            if session.usage:
                lines.append(M("- usage: {}/{} tokens").format(
                    text(str(session.usage.get("used"))), text(str(session.usage.get("size")))))
        if self.pty_target is not None:
            lines.append(M("- prompts go to the passthrough terminal {}").format(code(self.pty_target)))
        lines.append(M("- permissions: {}").format(text(self.settings.permissions)))
        if self._notebook_entry is not None:
            tools = [t for t in ("execute", "variables", "cells") if t in self._notebook_tools]
            lines.append(M("- notebook MCP server: {}").format(text(", ".join(tools) or "no tools")))
        elif not self.notebook_mcp:
            lines.append(M("- notebook MCP server: off"))
        lines.append(M("- working directory: {}").format(code(self.cwd)))
        return lines

    async def verb_status(self, call: Call) -> None:
        self.say(Markdown("\n").join(self.status_lines()))


def available(session: Session, what: str) -> list[Choice]:
    """The modes or models the agent offers (``what``: "mode" or "model")."""
    return session.available_modes() if what == "mode" else session.available_models()
