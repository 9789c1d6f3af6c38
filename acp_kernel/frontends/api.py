"""The Python API: an agent for Python code, in a notebook or a script.

::

    import acp_kernel

    agent = await acp_kernel.connect("demo")       # or command="my-agent --acp"
    turn = await agent.prompt("Summarise README.md")
    print(turn.text, turn.stop_reason)
    await agent.close()

Inside IPython (a notebook with the ordinary Python kernel) each turn renders
live in the cell that awaits it, with the same view as ``%%acp``; elsewhere
nothing is shown and the :class:`~acp_kernel.client.turn.Turn` is the result. Usable
in loops and functions (``async def``). Built on the same
:class:`~acp_kernel.client.controller.Controller` as the kernel and the magics.
"""

from __future__ import annotations

import atexit
import os
import sys
import weakref
from typing import Any

from .. import compat
from ..client.commands import MAGICS, parse
from ..client.controller import Controller
from .parts import PARTS
from ..client.registry import AgentSpec, adhoc_agent
from ..client.session import Choice, Session, text_block
from ..client.turn import Turn
from ..client.verbs import with_info
from ..view.frontend import TERMINAL, Frontend, WidgetClients, frontend_for
from ..view.sink import IPythonSink
from ..client.notebook import NO_ORIGIN, Origin, ipython_side
from .ask import StdinQuestions
from ..protocol import watchdog
from ..client.commands import POLICIES

#: No display and nobody to answer: Python code outside IPython (or ``render=False``).
UNSEEN = Frontend(widgets=False, updates=True, ask="none")
#: Terminal IPython whose stdin is not a terminal (a piped script): input() would read the script.
PIPED = Frontend(widgets=False, updates=False, ask="none")

__all__ = ["Agent", "IPythonFrontend", "connect"]

_open: "weakref.WeakSet[Controller]" = weakref.WeakSet()


class _Discard:
    """A sink for code outside IPython: the turn is the result, nothing is shown."""

    def display(self, data: dict, metadata: dict | None = None, display_id: str | None = None) -> None:
        pass

    def update(self, data: dict, metadata: dict | None = None, display_id: str = "") -> None:
        pass


def _ipython() -> Any:
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython is a dependency
        return None
    return get_ipython()


def widget_clients(kernel: Any) -> WidgetClients:
    """The clients of an IPython kernel that announced a widget manager,
    watched from the first call on (:func:`acp_kernel.compat.watch_shell_messages`)."""
    clients = getattr(kernel, "_acp_widget_clients", None)
    if clients is None:
        clients = WidgetClients()
        compat.watch_shell_messages(kernel, ("comm_open", "comm_info_request"), clients.note)
        kernel._acp_widget_clients = clients
    return clients


def _parent(kernel: Any) -> dict[str, Any]:
    try:
        return kernel.get_parent("shell") or {}
    except Exception:  # noqa: BLE001 - an older ipykernel
        return {}


class IPythonFrontend:
    """The magics' and the API's front-end: IPython's display machinery, and
    what the cell's frontend shows (:mod:`acp_kernel.view.frontend`).

    - an IPython kernel: a client that announced a widget manager is a
      notebook; one that connected before ``%load_ext`` is not seen, so a
      kernel Jupyter Server started (``JPY_SESSION_NAME`` set) counts as one
      too; else a console (stdin) or a headless run (no ``allow_stdin``);
    - terminal IPython: append-only text, questions through ``input()``;
    - no IPython (or ``render=False``): nothing shown, nobody answers.
    """

    kind = MAGICS

    def __init__(self, render: bool = True) -> None:
        self.render = render

    def sink(self) -> Any:
        if not self.render or _ipython() is None:
            return _Discard()
        return IPythonSink()

    def frontend(self) -> Frontend:
        ip = _ipython()
        if ip is None or not self.render:
            return UNSEEN
        kernel = getattr(ip, "kernel", None)
        if kernel is None:
            return TERMINAL if _isatty(sys.stdin) else PIPED
        parent = _parent(kernel)
        content = parent.get("content") or {}
        allow = bool(content.get("allow_stdin", compat.allow_stdin(kernel)))
        notebook = widget_clients(kernel).has_widgets(parent) or bool(os.environ.get("JPY_SESSION_NAME"))
        return frontend_for(widget_manager=notebook, allow_stdin=allow)

    def widgets(self) -> bool:
        return self.frontend().widgets

    def notebook_side(self) -> Any:
        """For the ``notebook`` MCP server: all of its tools, on the user's
        namespace, inside a Jupyter kernel (None elsewhere: terminal IPython
        has no kernel channels for the server to reach)."""
        ip = _ipython()
        if ip is None or getattr(ip, "kernel", None) is None:
            return None
        return ipython_side(ip)

    def origin(self) -> Origin:
        kernel = getattr(_ipython(), "kernel", None)
        return Origin.of(_parent(kernel)) if kernel is not None else NO_ORIGIN

    def next_input(self, text: str) -> bool:
        """IPython's own ``set_next_input`` (a payload of this cell's reply; terminal IPython
        puts it in the next prompt)."""
        ip = _ipython()
        if ip is None or not self.render or not self.interactive():  # headless: nbclient drops it
            return False
        ip.set_next_input(text, replace=False)
        return True

    def interactive(self) -> bool:
        """Someone can answer: buttons in a notebook, a typed line in a console
        or terminal IPython; not a headless run (nbclient: no ``allow_stdin``)."""
        fe = self.frontend()
        if fe.ask == "widgets":
            return bool((_parent(_ipython().kernel).get("content") or {}).get("allow_stdin", True))
        return fe.ask == "stdin"

    def asker(self) -> StdinQuestions | None:
        """Questions through stdin: ``input_request`` to a console, ``input()`` in terminal IPython."""
        if self.frontend().ask != "stdin":
            return None
        kernel = getattr(_ipython(), "kernel", None)
        if kernel is None:
            return StdinQuestions.from_input(input)
        return StdinQuestions(compat.stdin_reader(kernel))


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def guard() -> None:
    """Inside a kernel, agents die with it even on ``kill -9`` (see :mod:`acp_kernel.protocol.watchdog`)."""
    if getattr(_ipython(), "kernel", None) is not None:
        try:
            watchdog.enable()
        except OSError:
            pass


class Agent:
    """One agent process and its current session, for Python code."""

    def __init__(self, controller: Controller) -> None:
        self.controller = controller

    @property
    def session(self) -> Session | None:
        return self.controller.session

    @property
    def client(self) -> Any:
        return self.controller.client

    def __repr__(self) -> str:
        sid = self.session.id if self.session else None
        return f"<Agent {self.controller.spec.name!r} session={sid!r}>"

    async def prompt(self, prompt: str | list[dict[str, Any]]) -> Turn:
        """Send a prompt (text, or ACP content blocks) and wait for the turn
        to end; cancelling the await cancels the turn per the protocol."""
        blocks = [text_block(prompt)] if isinstance(prompt, str) else list(prompt)
        c = self.controller
        import asyncio

        try:
            return await c.prompt(blocks)
        except asyncio.CancelledError:
            await asyncio.shield(c.cancel())
            raise

    async def cancel(self) -> None:
        await self.controller.cancel()

    async def close(self) -> None:
        await self.controller.close()
        _open.discard(self.controller)

    async def __aenter__(self) -> "Agent":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    # modes, models, sessions: what the agent offers, and choosing

    def modes(self) -> list[Choice]:
        """The modes the agent offers (config-option modes included)."""
        return self._session().available_modes()

    def models(self) -> list[Choice]:
        return self._session().available_models()

    async def set_mode(self, mode: str) -> Choice | None:
        """Switch mode by id or name; the :class:`~acp_kernel.client.session.Choice`
        (None when the agent lists no modes and took the id as given)."""
        return await self._session().set_mode(mode)

    async def set_model(self, model: str) -> Choice | None:
        return await self._session().set_model(model)

    async def new_session(self) -> Session:
        """Close the current session (``session/close`` where offered) and open another."""
        c = self.controller
        await c.life.close_session()
        c.want_session = None
        return await c.ensure()

    async def sessions(self) -> list[dict[str, Any]]:
        """The agent's sessions for the working directory, each with the title
        and time its latest ``session_info_update`` gave (agent text: escape it to show)."""
        session = await self.controller.ensure()
        return with_info(await session.client.list_sessions(self.controller.cwd), session.client.sessions.values())

    async def delete_session(self, session_id: str) -> None:
        """``session/delete`` where the agent offers it (``AcpError`` otherwise);
        the current session is refused: :meth:`new_session` first."""
        await self.controller.run(parse(["sessions", "delete", session_id], MAGICS))

    async def logout(self) -> None:
        """``logout`` where the agent offers it (``AcpError`` otherwise)."""
        await self.controller.run(parse(["logout"], MAGICS))

    def _session(self) -> Session:
        if self.controller.session is None:
            raise RuntimeError("the agent is closed; connect again")
        return self.controller.session


async def connect(agent: str | AgentSpec | None = None, *, command: str | list[str] | None = None,
                  cwd: str | None = None, permissions: str | None = None, render: bool = True,
                  mcp: bool | None = None) -> Agent:
    """Start an agent (a known name, an :class:`AgentSpec`, or ``command``)
    and open a session in ``cwd``. Raises :class:`~acp_kernel.client.controller.Unavailable`
    (after showing why, in IPython) when it cannot. ``mcp=False``: no
    ``notebook`` MCP server for this agent (the config's ``mcp`` otherwise)."""
    if permissions is not None and permissions not in POLICIES:
        raise ValueError(f"permissions: choose from {', '.join(POLICIES)}")
    guard()
    controller = Controller(IPythonFrontend(render), parts=PARTS, cwd=cwd, permissions=permissions, terminal_auth=False)
    if mcp is not None:
        controller.notebook_mcp = mcp
    if command is not None:
        controller.spec = adhoc_agent(command)
    elif isinstance(agent, AgentSpec):
        controller.spec = agent
    elif agent:
        controller.spec = controller.config.agent(agent)
    _open.add(controller)
    await controller.ensure()
    return Agent(controller)


@atexit.register
def _kill_all_now() -> None:
    """At interpreter exit: no agent outlives the process."""
    for controller in list(_open):
        controller.kill_now()
