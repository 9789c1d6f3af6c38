"""Passthrough terminals for cells: one runner for the ACP kernel and the magics.

``%passthrough claude`` (kernel) and ``%acp passthrough claude`` (magics)
both resolve their words with :func:`resolve` and keep their terminals in a
:class:`Terminals`; a prompt cell shows the live terminal again and types
the cell into it with :meth:`Terminals.prompt`.

Importing it is cheap: terminado (and the widget) load with the first terminal,
so a kernel that never opens one does not pay for them at start-up.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
from dataclasses import dataclass, field
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..client.commands import KERNEL, VERBS
from ..client.discovery import resolve_command
from ..errors import AcpError, PassthroughError
from ..client.registry import BUILTIN, AgentSpec, Config, ConfigError, Passthrough, load_config
from ..safe import Markdown, bundle, code, text
from ..protocol.transport import CommandNotFound
from .notebook import NotebookLink, here, offer_terminal

if TYPE_CHECKING:
    from ..view.sink import DisplaySink
    from .manager import PassthroughManager, PassthroughTerminal, Reply
    from .panel import TerminalPanel

USAGE = VERBS["passthrough"].usage(KERNEL)


@dataclass(frozen=True)
class Target:
    """What to run under the PTY, and the name its terminal goes by."""

    name: str
    settings: Passthrough
    env: dict[str, str] = field(default_factory=dict)
    title: str = ""
    install: str = ""  # how to get the program, for the not-found message

    def heading(self) -> str:
        """What the terminal's header says: the agent, then the command (program by its base name)."""
        argv = list(self.settings.command)
        shown = shlex.join([os.path.basename(argv[0]), *argv[1:]]) if argv else ""
        return f"{self.title} · {shown}" if self.title else shown


def resolve(words: list[str], config: Config, current: AgentSpec | None) -> Target:
    """``[AGENT]`` (default: the current agent) or ``--command CMD ...``."""
    if words and words[0] == "--command":
        argv = words[1:]
        if len(argv) == 1:
            argv = shlex.split(argv[0])
        if not argv:
            raise PassthroughError("--command needs a program, e.g. --command 'bash -l'")
        # An unknown program: no raw-mode wait (a line-mode program never leaves canonical mode).
        return Target(os.path.basename(argv[0]) or "terminal", Passthrough(tuple(argv), raw_mode=False))
    if len(words) > 1:
        raise PassthroughError(f"usage: {USAGE}")
    spec = config.agent(words[0]) if words else current
    if spec is None:
        raise PassthroughError(f"no agent given; usage: {USAGE}")
    if spec.passthrough is None:
        raise PassthroughError(
            f"{spec.title} has no interactive CLI in the registry; give one in the config file "
            f"(agents.{spec.name}.passthrough.command) or use %passthrough --command CMD"
        )
    return Target(spec.name, _resolved(spec.passthrough, spec.env, spec.title), dict(spec.env), spec.title,
                  spec.passthrough.install or spec.install)


def _resolved(settings: Passthrough, env: dict[str, str], title: str) -> Passthrough:
    """The settings with their command words resolved (``{interpreter-of:kimi}``)."""
    try:
        command = resolve_command(settings.command, env)
    except LookupError as exc:
        hint = f" ({settings.install})" if settings.install else ""
        raise PassthroughError(f"cannot start {title}: {exc.args[0]!r} was not found on PATH{hint}") from None
    return dataclasses.replace(settings, command=command) if command != settings.command else settings


def login_target(spec: AgentSpec, method: dict) -> Target:
    """An agent's ``terminal`` auth method: the agent's own command plus the
    method's ``args`` and ``env`` (never a command of the method's choosing).
    Checked against the SDK's ``TerminalAuthMethod`` (ACP v1); v2's list form
    of ``env`` (``[{name, value}]``) is accepted too."""
    from ..protocol.schema import TerminalAuthMethod  # lazy: start-up time
    from pydantic import ValidationError

    raw = dict(method)
    if isinstance(raw.get("env"), list):
        raw["env"] = {e.get("name"): e.get("value") for e in raw["env"] if isinstance(e, dict)}
    try:
        parsed = TerminalAuthMethod.model_validate(raw)
    except ValidationError as exc:
        where = ", ".join(".".join(str(p) for p in err["loc"]) for err in exc.errors())
        raise PassthroughError(f"the agent's login method {method.get('id')!r} is malformed ({where})") from None
    settings = Passthrough((*spec.command, *(parsed.args or [])), raw_mode=False)
    return Target(f"{spec.name}-login", settings, {**spec.env, **(parsed.env or {})}, f"{spec.title} (log in)")


class Terminals:
    """The terminals a kernel has open, by name, and the views that show them.

    Inside a Jupyter kernel, a CLI whose registry entry has ``mcp_args`` starts
    with the ``notebook`` MCP server in a generated config file
    (:mod:`acp_kernel.passthrough.notebook`), unless ``config.notebook_mcp`` is
    off; ``permissions`` (a callable: the connection's policy now) decides its
    ``execute`` runs, else the config file's policy (default ``ask``); ``side``
    (a callable: the front-end's ``notebook_side``) says which tools it serves
    and on what (none: ``cells`` from the prompts typed); ``frontend`` (the
    magics' ``IPythonFrontend``) tells whether a person can answer the server's
    questions in a cell (None: nobody; see :func:`~.notebook.here`).
    """

    def __init__(self, *, config: Config | None = None, permissions: Callable[[], str] | None = None,
                 side: Callable[[], Any] | None = None, frontend: Any = None) -> None:
        self._manager: PassthroughManager | None = None
        self.panels: dict[str, TerminalPanel] = {}
        self.config = config
        self.permissions = permissions
        self.side = side
        self.frontend = frontend
        self._asked: dict[str, Passthrough] = {}  # the settings each was opened with, before the MCP flag
        self._links: dict[str, NotebookLink] = {}
        self._notes: dict[str, Markdown] = {}

    def _config(self) -> Config:
        if self.config is None:
            try:
                self.config = load_config()
            except ConfigError:  # the front-end says so; the built-in defaults hold here
                self.config = Config(agents=dict(BUILTIN))
        return self.config

    def _policy(self) -> str:
        if self.permissions is not None:
            return self.permissions()
        return self._config().permissions or "ask"

    def open(self, target: Target, cwd: str, *, reuse: bool = True) -> TerminalPanel:
        """The running terminal for ``target`` if there is one (same command), else a new one."""
        old = self.panels.get(target.name)
        if reuse and old is not None and old.terminal.alive and \
                self._asked.get(target.name, old.terminal.settings) == target.settings:
            return old
        if self._manager is None:
            # The PTY side (terminado, tornado, pyte) loads with the first terminal, not with the kernel.
            from .manager import PassthroughManager  # lazy: start-up time
            self._manager = PassthroughManager()
        started: list[PassthroughTerminal] = []
        offered = offer_terminal(target.name, target.settings, enabled=self._config().notebook_mcp,
                                 policy=self._policy, side=self.side() if self.side is not None else None,
                                 on_interrupt=lambda: started[0].interrupt() if started else None)
        try:
            terminal = self._manager.open(target.name, offered.settings, cwd=cwd, env=target.env)
        except CommandNotFound as exc:
            if offered.link is not None:
                offered.link.close()
            hint = f" ({target.install})" if target.install else ""
            raise PassthroughError(f"cannot start {target.heading()}: {exc.program!r} was not found on PATH{hint}") from None
        except BaseException:
            if offered.link is not None:
                offered.link.close()
            raise
        started.append(terminal)
        name = terminal.name
        self._asked[name] = target.settings
        self._links.pop(name, None)
        self._notes.pop(name, None)
        if offered.link is not None:
            link = offered.link
            self._links[name] = link
            terminal.exited.add_done_callback(lambda _: link.close())
        if offered.note is not None:
            self._notes[name] = offered.note
        from .panel import TerminalPanel  # lazy: start-up time

        panel = TerminalPanel(terminal, title=target.heading())
        self.panels[name] = panel
        return panel

    def note(self, name: str) -> Markdown | None:
        """Why the notebook MCP server is off for this terminal, once (None: nothing to say).
        A front-end shows it under the terminal; else the first prompt's cell does."""
        return self._notes.pop(name, None)

    def link(self, name: str) -> NotebookLink | None:
        """The terminal's offer of the notebook MCP server (its bridge and config file), if any."""
        return self._links.get(name)

    def get(self, name: str) -> TerminalPanel:
        panel = self.panels.get(name)
        if panel is None:
            known = ", ".join(self.panels) or "none"
            raise PassthroughError(f"no terminal {name!r} (open: {known})")
        return panel

    async def prompt(self, name: str, prompt: str, sink: DisplaySink) -> Reply:
        """Show the terminal in this cell (the cell that showed it before keeps
        its own exchange as text) and type ``prompt`` into it."""
        panel = self.get(name)
        panel.show(sink, prompt)
        note = self.note(name)
        if note is not None:
            sink.display(bundle(note))
        link = self._links.get(name)
        cell = None
        if link is not None:  # the notebook MCP server's runs and questions show in this cell
            cell = link.bridge.cell = here(sink, self.frontend)
            cell.live = True
            link.bridge.prompts.append(prompt)
        try:
            reply = await panel.terminal.send_prompt(prompt, on_dialog=panel.asking)
        except BaseException:
            panel.finish("error")
            raise
        finally:
            if cell is not None:
                cell.end()
        panel.finish(reply.outcome, reply.text)
        return reply

    async def close(self, name: str) -> None:
        panel = self.panels.pop(name, None)
        if panel is not None:
            await panel.stop()
        self._asked.pop(name, None)
        self._notes.pop(name, None)
        link = self._links.pop(name, None)
        if link is not None:
            link.close()

    async def close_all(self) -> None:
        for name in list(self.panels):
            await self.close(name)

    def kill_now(self) -> None:
        for panel in self.panels.values():
            panel.terminal.kill_now()
        for link in self._links.values():
            link.close()

    def listing(self) -> Markdown:
        if not self.panels:
            return Markdown("*No passthrough terminals.*")
        return Markdown("\n").join(
            Markdown("- {}: {} · {} · pid {}").format(code(name), code(p.terminal.title), p.widget.status, str(p.terminal.pid))
            for name, p in self.panels.items())


def opened_markdown(terminal: PassthroughTerminal) -> Markdown:
    """What ``%passthrough NAME`` says under the terminal."""
    return Markdown("*The next cells are typed into {} (interrupt sends {}; `%passthrough off` goes back "
                    "to ACP).*").format(code(terminal.name), text(terminal.cancel_description))


def outcome_markdown(terminal: PassthroughTerminal, reply: Reply) -> Markdown | None:
    """A line under the terminal when the reply did not simply settle: what
    was sent, and what the screen shows now (agent text: escaped)."""
    said = last_words(reply)
    shows = Markdown(" The screen shows: {}").format(text(said)) if said else Markdown("")
    if reply.outcome == "interrupted":
        return Markdown("*Interrupted: {} sent to {}.*").format(
            text(terminal.cancel_description), code(terminal.name)) + shows
    if reply.outcome == "exited":
        return Markdown("**{} {}.** `%passthrough` starts it again.").format(code(terminal.name), terminal.describe_exit())
    if reply.outcome == "timeout":
        lead = Markdown("**{}: {}.**").format(code(terminal.name), text(reply.detail))
        tail = (Markdown(" The prompt was not typed.") if not reply.sent and not reply.tries
                else Markdown(" The prompt was not sent (its screen showed the CLI did not take it).")
                if not reply.sent
                else Markdown(" It may still be working: interrupt it, or run the next cell later."))
        return lead + tail + shows
    return None


def last_words(reply: Reply) -> str:
    """The last lines the reply added (or of the screen, when nothing was typed)."""
    from .screen import last_lines, reply_text  # lazy: start-up time

    if reply.sent and reply.text:
        return last_lines(reply.text)
    return last_lines(reply_text(reply.screen.splitlines()))


@dataclass
class Reopened:
    """A remembered passthrough CLI started again after a kernel restart."""

    panel: TerminalPanel
    note: Markdown
    #: False when the CLI resumed its conversation and the prompt is the one it already has.
    type_prompt: bool


async def reopen(terminals: Terminals, name: str, last_prompt: str, prompt: str, config: Config,
                 cwd: str) -> Reopened:
    """Start the agent's CLI again after a kernel restart.

    With the agent's ``resume_args`` (and a conversation to resume: a prompt was
    typed before), the CLI continues its conversation, and ``prompt`` is not
    typed again when it is the one typed last before the restart (re-running
    that cell). When the resume fails (the CLI exits or never gets ready), a
    fresh start follows, which does get the prompt. The note says which.
    """
    try:
        target = resolve([name], config, config.agent(name))
    except AcpError as exc:
        raise PassthroughError(f"cannot start {name} again after the restart: {exc}") from None
    settings, shown = target.settings, code(name)
    if settings.resume_args and last_prompt:
        resumed = dataclasses.replace(target, settings=dataclasses.replace(
            settings, command=(*settings.command, *settings.resume_args)))
        panel = terminals.open(resumed, cwd, reuse=False)
        outcome = await panel.terminal.ready()
        args = code(shlex.join(settings.resume_args))
        if outcome == "idle":
            again = prompt.strip() == last_prompt.strip()
            note = Markdown("*Resumed {} after the kernel restart ({}).*").format(shown, args)
            if again:
                note += Markdown(" *This prompt was typed before the restart: it is in the conversation, "
                                 "so it is not typed again.*")
            return Reopened(panel, note, not again)
        term = panel.terminal
        why = term.describe_exit() if outcome == "exited" else (term.unready() or f"{outcome}")
        await terminals.close(term.name)
        note = Markdown("*Could not resume {} with {} ({}); started it fresh, and the prompt is typed.*").format(
            shown, args, text(why))
    else:
        note = Markdown("*Started {} again after the kernel restart (a new conversation).*").format(shown)
    return Reopened(terminals.open(target, cwd, reuse=False), note, True)
