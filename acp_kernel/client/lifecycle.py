"""The agent's life under a controller: start, restart, resume, close.

Starting the agent (with the start-up line and failure text of
:mod:`acp_kernel.client.startup`), reconnecting after it died, reopening the
remembered session in the remembered directory with the remembered agent
(:mod:`acp_kernel.client.store`), and offering the ``notebook`` MCP server
to each agent process. :func:`start_agent` and :func:`open_session` are the
parts the headless CLI shares: it prints where the controller displays.
"""

from __future__ import annotations

import os
from typing import Any, Callable

from . import store
from ..errors import AcpError, AuthRequired, ConnectionClosed, RpcError
from .frontend import Frontend
from .notebook import SessionBridge, known_notebook
from .output import Output
from .parts import Parts
from .registry import AgentSpec, Config, adhoc_agent
from .route import Route
from ..safe import Markdown, code, markdown, plain, text
from .session import Client, Session
from .startup import Failure, explain_failure, starting_line
from .turn import Chunk, MessageEdit

#: How much replayed history is shown after a session/load.
HISTORY_CHARS = 4000


class Unavailable(AcpError):
    """The agent could not be started or give a session; the cell already
    shows why, ``str()`` is one line for an error reply. ``failure`` is the
    explanation (None when the agent asked for a login instead)."""

    def __init__(self, message: str, failure: Failure | None = None, cause: BaseException | None = None) -> None:
        super().__init__(message)
        self.failure = failure
        self.cause = cause


async def explain(client: Client, exc: BaseException) -> Unavailable:
    """Why ``client`` could not start or give its first session, with the
    stderr tail and exit status of its process (which an ``RpcError`` does
    not carry). The client is closed first, so its stderr is read to the end."""
    try:
        await client.close()
    except Exception:  # noqa: BLE001 - it failed already; what it said matters more
        client.kill_now()
    status, err = client.transport.exit_info() if client.transport is not None else (None, "")
    failure = explain_failure(client.spec, exc, stderr=err, returncode=status)
    return Unavailable(failure.error_line(), failure, exc)


async def start_agent(client: Client, *, meanwhile: Callable[[], object] | None = None) -> Client:
    """Start the agent's process and initialize (:meth:`.Client.start`, ``meanwhile`` too);
    :class:`Unavailable` (explained) when it cannot."""
    try:
        return await client.start(meanwhile=meanwhile)
    except (AcpError, OSError) as exc:
        raise await explain(client, exc) from None


async def open_session(client: Client, cwd: str | None = None) -> Session:
    """A new session; :class:`Unavailable` (explained, the agent closed) when there is none."""
    try:
        return await client.new_session(cwd)
    except (AcpError, OSError) as exc:
        raise await explain(client, exc) from None


class Lifecycle:
    """One agent (which, where, with what settings), its process and its current session."""

    def __init__(self, output: Output, frontend: Frontend, parts: Parts, route: Route, *, spec: AgentSpec,
                 config: Config, cwd: str, permissions: str | None, key: str | None, terminal_auth: bool,
                 label: str | None = None) -> None:
        self.output = output
        self.frontend = frontend
        self.parts = parts
        self.route = route
        self.config = config
        self.spec = spec
        self.default_name = spec.name
        self.settings = config.client_settings(permissions)
        self.settings.terminal_auth = terminal_auth
        self.settings.url_elicitation = True  # the turn widget shows pages to open (client_capabilities)
        self.settings.open_notebooks = self._open_notebooks
        self.cwd = cwd
        self.key = key
        self.label = label  # the magics' alias; the kernel shows the agent's title
        self.client: Client | None = None
        self.session: Session | None = None
        self.want_session: str | None = None
        #: Offer the ``notebook`` MCP server (config ``"mcp": false``, or ``--no-mcp``, turns it off).
        self.notebook_mcp = config.notebook_mcp
        self._notebook_entry: dict[str, Any] | None = None
        self._notebook_tools: frozenset[str] = frozenset()
        #: What the notebook MCP server's interrupt stops (the controller's running turn).
        self.on_interrupt: Callable[[], None] = lambda: None

    def _open_notebooks(self) -> list[str]:
        """The notebook this kernel runs for (its front-end has it open), if it names one."""
        side = self.frontend.notebook_side()
        path = known_notebook(side.namespace() if side is not None else None)
        return [path] if path else []

    @property
    def name(self) -> Markdown:
        return Markdown("**{}**").format(text(self.label or self.spec.display_name()))

    def interrupt(self) -> None:
        """The user interrupted code the notebook MCP server ran: stop the turn too."""
        self.on_interrupt()

    def say(self, md: Markdown, plain_text: Any = None) -> None:
        self.output.say(md, plain_text)

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
        if got.roots:
            self.settings.extra_roots = [r for r in got.roots if os.path.isdir(r)]
        self.want_session = got.session_id or None
        if got.passthrough:
            self.route.restore(got.passthrough, got.passthrough_prompt)

    def remember(self) -> None:
        session = self.session
        agent, prompt = self.route.remembered()
        try:
            store.remember(self.key, store.Remembered(
                self.spec.name, list(self.spec.command), session.id if session else "",
                session.cwd if session else self.cwd, self.default_name, agent, prompt,
                list(self.settings.extra_roots)))
        except OSError:
            pass  # nothing to resume after a restart; the notebook works on

    # -- the agent's life -----------------------------------------------------

    async def ensure(self) -> Session:
        """The session to prompt: start the agent, reconnect after it died,
        reopen the remembered session. Raises :class:`Unavailable` after the
        cell shows why."""
        self.output.notes()
        client = self.client
        if client is not None and (not client.alive or client.needs_restart):
            why = "it had to be restarted" if client.needs_restart else "it had exited"
            await self.restart(keep_session=True)
            self.say(Markdown("*Restarted {} ({}).*").format(self.name, why))
        if self.client is None:
            self.client = await self.start()
        if self.session is None:
            self.session = await self._open(self.client)
        return self.session

    async def start(self) -> Client:
        done = self.output.progress(Markdown("*{}*").format(text(starting_line(self.spec))))
        client = Client(self.spec, cwd=self.cwd, settings=self.settings, mcp_servers=self._mcp_servers())
        try:
            return await start_agent(client)
        except Unavailable as exc:
            raise self._shown(exc) from None
        finally:
            done()

    def _shown(self, exc: Unavailable) -> Unavailable:
        """Show what the error's own line (``str(exc)``, said by the caller's error
        reply or exception) leaves out, so the cell says each thing once."""
        rest = exc.failure.below() if exc.failure is not None else None
        if rest is not None and not rest.empty:
            self.say(rest.markdown(), plain(rest.plain()))
        return exc

    def _mcp_servers(self) -> list[dict[str, Any]]:
        """The config's MCP servers, plus the ``notebook`` server inside a
        Jupyter kernel (a fresh token per agent process: the last one's
        server is told to go)."""
        servers = list(self.config.mcp_servers)
        self._withdraw_notebook()
        side = self.frontend.notebook_side()
        if not self.notebook_mcp or side is None:
            return servers
        if any(isinstance(s, dict) and s.get("name") == "notebook" for s in servers):
            self.say(Markdown("*The config file has an MCP server named `notebook`: "
                              "acp-kernel's own notebook server is not offered.*"))
            return servers
        bridge = SessionBridge(self, side)
        self._notebook_entry, self._notebook_tools = self.parts.offer_notebook(bridge), bridge.tools
        return servers + ([self._notebook_entry] if self._notebook_entry else [])

    def notebook_tools(self) -> frozenset[str] | None:
        """The notebook MCP server's tools offered to the running agent; None: not offered."""
        return self._notebook_tools if self._notebook_entry is not None else None

    def notebook_started(self) -> bool:
        """Whether the running agent started the notebook server it was offered."""
        return self._notebook_entry is not None and self.parts.notebook_started(self._notebook_entry)

    def _withdraw_notebook(self) -> None:
        entry, self._notebook_entry = self._notebook_entry, None
        if entry is not None:
            self.parts.withdraw_notebook(entry)

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
                    self.show_history(session, "Resumed")
                    return self.opened(session)
            elif want:
                self.say(Markdown("*Session {} cannot be reopened: {} offers neither resume nor load; "
                                  "starting a new one in {}.*").format(code(want), self.name, code(self.cwd)))
            return self.opened(await client.new_session(self.cwd))
        except AuthRequired as exc:
            self.say(self.parts.auth_markdown(exc.methods, list(self.spec.command))
                     + Markdown("\n\n`%auth METHOD` logs in with one of them here (a terminal method "
                                "opens the agent's login in a terminal); after setting variables, restart."))
            raise Unavailable(f"{self.spec.display_name()} needs you to log in", cause=exc) from None
        except (ConnectionClosed, RpcError, AcpError) as exc:
            # The agent is no use without a session: stop it, and say why with what it printed.
            self.client = None
            raise self._shown(await explain(client, exc)) from None

    def opened(self, session: Session) -> Session:
        self.session = session
        self.remember()
        if self.settings.extra_roots and not session.client.can("additionalDirectories"):
            self.say(Markdown("*{} takes no additional directories (it does not advertise "
                              "`sessionCapabilities.additionalDirectories`): {} were not given to it, and "
                              "the file policy's workspace is {} alone.*").format(
                self.name, Markdown(", ").join(code(r) for r in self.settings.extra_roots), code(session.cwd)))
        return session

    async def close_session(self) -> None:
        """The notebook is done with its current session (``%new``, ``%load``):
        ``session/close`` where the agent offers it; an agent's failure to close
        is said, never raised (the user's action goes on)."""
        client, session = self.client, self.session
        self.session = None
        if client is None or session is None:
            return
        why = await client.close_session(session.id)
        if why is not None:
            self.say(Markdown("*Session {} was not closed cleanly by the agent ({}); going on.*").format(
                code(session.id), text(why)))

    def show_history(self, session: Session, verb: str) -> None:
        """After a resume or load: the number of earlier prompts and the
        last answer only (the text after the last user message)."""
        prompts, answer = replayed(session.background.events)
        where = code(session.cwd)
        if not answer and not prompts:
            self.say(Markdown("*{} session {} in {}.*").format(verb, code(session.id), where))
            return
        shown = answer if len(answer) <= HISTORY_CHARS else "...\n\n" + answer[-HISTORY_CHARS:]
        self.say(Markdown("*Reopened session {} in {}: {} earlier prompts. The last answer:*\n\n").format(
            code(session.id), where, str(prompts)) + markdown(shown))

    async def restart(self, *, keep_session: bool) -> None:
        """Close the agent (it starts again with the next prompt); ``keep_session``: reopen this session then."""
        client, session = self.client, self.session
        self.client, self.session = None, None
        if keep_session and session is not None:
            self.want_session = session.id
        if client is not None:
            await client.close()
        self._withdraw_notebook()

    async def close(self) -> None:
        client, self.client, self.session = self.client, None, None
        if client is not None:
            await client.close()
        self._withdraw_notebook()

    def kill_now(self) -> None:
        if self.client is not None:
            self.client.kill_now()


def replayed(events: list[Any]) -> tuple[int, str]:
    """The number of earlier prompts in a replayed history and the last answer
    (the agent's text after the last user message). A prompt is one run of user
    chunks (agents may send one message in several). An agent message the replay
    changes after it was sent (:class:`MessageEdit`: replaced, or a chunk for an
    earlier id) counts as changed, never twice."""
    chunks = [(i, e.role) for i, e in enumerate(events) if isinstance(e, Chunk)]
    users = [i for n, (i, role) in enumerate(chunks) if role == "user" and (n == 0 or chunks[n - 1][1] != "user")]
    start = users[-1] + 1 if users else 0
    by_id: dict[object, list[str]] = {}
    for n, e in enumerate(events[start:]):
        if isinstance(e, Chunk) and e.role == "agent":
            by_id.setdefault(e.message_id if e.message_id is not None else ("no id", n), []).append(e.text)
        elif isinstance(e, MessageEdit) and e.role == "agent" and e.message_id in by_id:  # (an earlier prompt's: not ours)
            parts = by_id[e.message_id]
            if e.replaced:  # the text again, after the blank line that set the message apart
                parts[:] = [parts[0][:len(parts[0]) - len(parts[0].lstrip("\n"))] + e.text]
            else:
                parts.append(e.text)
    return len(users), "".join("".join(parts) for parts in by_id.values()).lstrip("\n")
