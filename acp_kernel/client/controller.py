"""One agent connection as every front-end drives it: the ACP kernel, the
magics and the Python API.

A :class:`Controller` coordinates the parts that change for different reasons:

- :mod:`~acp_kernel.client.output`: the cell's messages, progress and status lines;
- :mod:`~acp_kernel.client.lifecycle`: starting, restarting, resuming and closing the agent;
- :mod:`~acp_kernel.client.route`: whether prompts go to a passthrough terminal;
- :mod:`~acp_kernel.client.verbs`: what the command table's verbs do, so every
  front-end says the same words.

What stays here is a turn (prompt, cancel, interrupt) and the dispatch of a
verb. The front-end supplies a :class:`~acp_kernel.client.frontend.Frontend`
(where this cell's outputs go, who can answer a question) and the
:class:`~acp_kernel.client.parts.Parts` above the client layer it uses (the
view, the notebook MCP server, passthrough terminals), so this module imports
none of them.
"""

from __future__ import annotations

import asyncio
import gc
import os
from typing import Any, Callable, Protocol

from .commands import Call, UsageError
from .frontend import Frontend
from .lifecycle import Lifecycle, Unavailable
from .output import Output, status_lines
from ..errors import PassthroughError
from .parts import Parts, Terminals
from .host import ClientSettings
from .registry import BUILTIN, AgentSpec, Config, ConfigError, load_config
from .route import Route
from ..safe import Markdown, text
from .session import Client, Session
from .turn import Notice, Turn
from .verbs import HANDLERS, available

__all__ = ["CANCEL_GRACE", "Controller", "Frontend", "Unavailable", "available", "load_settings"]

#: How long an interrupted turn may take to end before the cell returns anyway.
CANCEL_GRACE = 0.75


def _freeze_heap() -> bool:
    """The heap as it is when a turn starts (modules, the session's history) out of the
    garbage collector's sight until the turn ends (``gc.freeze``; ``gc.unfreeze`` after):
    a turn of a few thousand tool calls makes enough objects for a full collection, which
    walked the whole heap (a third of a 2,000-call turn's time, measured) and now walks
    only the turn's own objects. Nothing is freed that would not be: cyclic garbage from
    before the turn waits for a collection after it. False (nothing frozen) when the heap
    is frozen already (a turn in another session, or someone else's freeze). Only in a
    process of our own (the ACP kernel's), as :func:`..frontends.process.tune_own_process`."""
    if gc.get_freeze_count():
        return False
    gc.freeze()
    return True


def _freeze_turn() -> None:
    """At a turn's end (:meth:`.Turn.on_ending`), before the view renders the finished turn:
    the turn's own objects (a long turn's thousands of blocks, rows and their states) join
    the frozen heap, so the collections the rendering sets off walk only what it makes (one
    young collection walked the 20,000 objects of a 2,000-call turn, 2 ms of its end). The
    turn's caller unfreezes it all when the turn is over, as :func:`_freeze_heap`'s."""
    gc.freeze()


class Interruptible(Protocol):
    """What runs in the cell besides a turn: a passthrough terminal or a
    login (Ctrl-C), a shell command (killed)."""

    def interrupt(self) -> None: ...


class Killed:
    """A shell command as something an interrupt stops: it is killed."""

    def __init__(self, terminal: Any) -> None:
        self.terminal = terminal

    def interrupt(self) -> None:
        asyncio.ensure_future(self.terminal.kill("killed"))


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
                 key: str | None = None, ptys: Terminals | None = None, terminal_auth: bool = True,
                 own_process: bool = False) -> None:
        self.frontend = frontend
        #: The process is ours (the ACP kernel): a turn may freeze its heap (:func:`_freeze_heap`).
        #: Never under the magics, in the user's Python, whose code runs during a turn.
        self.own_process = own_process
        self.parts = parts
        self.output = Output(frontend, parts)
        if config is None:
            config, self.output.config_error = load_settings()
        self.route = Route()
        self.life = Lifecycle(self.output, frontend, parts, self.route, spec=spec or config.agents[config.default_agent],
                              config=config, cwd=os.path.abspath(cwd or os.getcwd()), permissions=permissions,
                              key=key, terminal_auth=terminal_auth, label=label)
        self.life.on_interrupt = self.interrupt
        self.ptys = ptys
        #: What an interrupt stops: the running turn's session, a terminal, a shell command.
        self.running: Session | Interruptible | None = None
        self.values: dict[str, Any] = {}  # kernel: %set NAME VALUE, for {NAME} in prompts
        self._between_said: tuple[Any, int] = (None, 0)

    # -- the parts' state, as the front-ends read and set it ----------------------

    @property
    def config(self) -> Config:
        return self.life.config

    @property
    def settings(self) -> ClientSettings:
        return self.life.settings

    @property
    def spec(self) -> AgentSpec:
        return self.life.spec

    @spec.setter
    def spec(self, spec: AgentSpec) -> None:
        self.life.spec = spec

    @property
    def default_name(self) -> str:
        return self.life.default_name

    @default_name.setter
    def default_name(self, name: str) -> None:
        self.life.default_name = name

    @property
    def cwd(self) -> str:
        return self.life.cwd

    @cwd.setter
    def cwd(self, path: str) -> None:
        self.life.cwd = path

    @property
    def client(self) -> Client | None:
        return self.life.client

    @property
    def session(self) -> Session | None:
        return self.life.session

    @session.setter
    def session(self, session: Session | None) -> None:
        self.life.session = session

    @property
    def want_session(self) -> str | None:
        return self.life.want_session

    @want_session.setter
    def want_session(self, sid: str | None) -> None:
        self.life.want_session = sid

    @property
    def notebook_mcp(self) -> bool:
        return self.life.notebook_mcp

    @notebook_mcp.setter
    def notebook_mcp(self, offer: bool) -> None:
        self.life.notebook_mcp = offer

    @property
    def config_error(self) -> str | None:
        return self.output.config_error

    @config_error.setter
    def config_error(self, error: str | None) -> None:
        self.output.config_error = error

    @property
    def pty_target(self) -> str | None:
        """Kernel: while set, prompts are typed into this passthrough terminal."""
        return self.route.target

    @property
    def name(self) -> Markdown:
        return self.life.name

    @property
    def terminals(self) -> Terminals:
        """The front-end's passthrough terminals (the kernel's, the magics' by alias)."""
        if self.ptys is None:
            raise PassthroughError("this front-end has no passthrough terminals")
        return self.ptys

    # -- output, remembering, the agent's life: the parts' --------------------------

    def say(self, md: Markdown, plain_text: Any = None) -> None:
        self.output.say(md, plain_text)

    def progress(self, md: Markdown) -> Callable[[], None]:
        return self.output.progress(md)

    def status_lines(self) -> list[Markdown]:
        return status_lines(self.life, self.name, self.route.target)

    def restore(self) -> None:
        self.life.restore()

    def remember(self) -> None:
        self.life.remember()

    async def ensure(self) -> Session:
        """The session to prompt (see :meth:`Lifecycle.ensure`); :class:`Unavailable` after the cell shows why."""
        return await self.life.ensure()

    async def restart(self, *, keep_session: bool, quiet: bool = False) -> None:
        await self.life.restart(keep_session=keep_session)
        if not quiet:
            self.say(Markdown("*Restarted {}.*").format(self.name))

    async def close(self) -> None:
        await self.life.close()

    def kill_now(self) -> None:
        self.life.kill_now()

    # -- turns ----------------------------------------------------------------

    async def prompt(self, blocks: list[dict[str, Any]]) -> Turn:
        """Send a prompt and render the turn live in this cell; returns the
        ended turn (its ``error`` says what went wrong)."""
        session = await self.ensure()
        session.interactive = self.frontend.interactive()
        shows = self.output.shows()
        # A page to open is shown only by the turn widget, which answers with buttons.
        session.links = session.interactive and shows.ask == "widgets" and shows.widgets and shows.updates
        self._between_turns(session)
        turn = session.begin(blocks)  # ContentRefused: before a turn exists, for the front-end to show
        turn.origin = self.frontend.origin()
        # The view hands each question (with its tool call) to the asker when
        # the frontend answers through stdin.
        asker = self.frontend.asker()
        view = self.parts.view_for(turn, self.frontend.sink(), session=session, rate_hz=self.config.refresh_hz,
                                   widgets=self.frontend.widgets(), frontend=shows, asker=asker)
        self.running = session
        frozen = self.own_process and _freeze_heap()
        if frozen:
            turn.on_ending(_freeze_turn)
        try:
            await session.finish(turn)
        finally:
            self.running = None
            if asker is not None:
                asker.close()
            view.close()
            if frozen:
                gc.unfreeze()
        return turn

    def _between_turns(self, session: Session) -> None:
        """What the agent asked while no turn was running (answered then by the
        permission broker, never asked: nobody watched a cell for it), said once
        in a display of its own before this cell's turn, not inside it."""
        last = session.turns[-1] if session.turns else session.background
        said_turn, said = self._between_said
        if said_turn is last:
            start = said
        elif last.ended is not None:  # asked after its end: among its last ``late_events`` (compaction only drops)
            start = max(0, len(last.events) - last.late_events)
        else:
            start = 0
        for ev in last.events[start:]:
            if isinstance(ev, Notice) and ev.kind == "between-turns":
                self.say(Markdown("⚠️ *Before this cell:* {}").format(text(ev.text)), f"Before this cell: {ev.text}")
        self._between_said = (last, len(last.events))

    async def prompt_terminal(self, name: str, prompt: str) -> Any:
        """Type a prompt into a passthrough terminal shown in this cell; the
        :class:`~acp_kernel.passthrough.manager.Reply`. Where no terminal is on
        screen (headless), the reply is kept as text in the cell."""
        ptys = self.terminals
        if name not in ptys.panels:
            last = self.route.reopens(name)
            if last is not None:
                reply = await self._reopen_terminal(name, last, prompt)
                if reply is not None:
                    return reply
        panel = ptys.get(name)
        self.running = panel.terminal
        try:
            reply = await ptys.prompt(name, prompt, self.frontend.sink())
        finally:
            self.running = None
        if reply.sent and self.route.typed(name, prompt):
            self.remember()
        note = self.parts.outcome_markdown(panel.terminal, reply)
        if note:
            self.say(note)
        return reply

    async def _reopen_terminal(self, name: str, last: str, prompt: str) -> Any:
        """After a kernel restart: the remembered CLI again, resumed where it has a
        resume flag (:func:`~acp_kernel.passthrough.ptycell.reopen`); the
        :class:`Reply` when the prompt is not typed again, else None."""
        self.running = None
        opened = await self.parts.reopen_terminal(self.terminals, name, last, prompt, self.config, self.cwd)
        self.route.target = opened.panel.terminal.name
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
        anything else (an agent starting) cancels ``cell``."""
        running = self.running
        if isinstance(running, Session):
            running.cancel_soon(grace=CANCEL_GRACE)  # session/cancel is written now, not on a later loop turn
        elif running is not None:
            running.interrupt()
        elif cell is not None and not cell.done():
            cell.cancel()

    # -- the command table's verbs ----------------------------------------------

    async def run(self, call: Call) -> Any:
        """Run one verb (:data:`~acp_kernel.client.verbs.HANDLERS`); usage errors
        raise :class:`UsageError`, agent errors show in the cell and raise
        :class:`Unavailable` / ``AcpError``."""
        self.output.notes()
        handler = HANDLERS.get(call.verb.name)
        if handler is None:  # the front-end handles its own verbs (help, connect, disconnect)
            raise UsageError(f"{call.verb.name}: not available here")
        return await handler(self, call)
