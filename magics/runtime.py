"""What ``%acp``, ``%%acp`` and ``%%shell`` do, on the kernel's event loop.

A thin adapter: each connection (by alias) is a
:class:`~acp_kernel.client.controller.Controller`, the same as the ACP kernel's, and
``%acp`` lines are read by the same command table
(:mod:`acp_kernel.client.commands`). What is the magics' own: several connections
by alias, ``%%acp`` cells (interpolation, attachments, the turn as the cell's
value), passthrough terminals by alias, and ``%%shell``.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

from acp_kernel.client import commands
from acp_kernel.frontends.api import IPythonFrontend, guard
from acp_kernel.frontends.parts import PARTS
from acp_kernel.client.commands import MAGICS, Call
from acp_kernel.client.controller import Controller, Unavailable, load_settings
from acp_kernel.errors import AcpError, PassthroughError, RpcError
from acp_kernel.client.registry import adhoc_agent
from acp_kernel.safe import Markdown, code, plain, text
from acp_kernel.client.session import text_block
from acp_kernel.client.turn import Turn

from .bridge import LoopHome, UsageError
from .cellinput import ATTACH_CAP, attachment, cell_parser, interpolate
from acp_kernel.passthrough.ptycell import Target, Terminals, resolve
from acp_kernel.view.plaintext import message
from acp_kernel.frontends.shellcell import ShellOptionsError, shell_cell
from acp_kernel.services.terminals import TerminalError


def said(message: str) -> UsageError:
    """A usage error carrying text an agent may have written (an error it sent): IPython
    shows it as a traceback, drawn by JupyterLab's stderr renderer, so it is made as
    text/plain is (no escape sequences, no link of a ``javascript:...``)."""
    return UsageError(str(plain(message)))

__all__ = ["ATTACH_CAP", "Runtime", "UsageError", "attachment", "kill_all_now", "runtime"]


class Runtime(LoopHome):
    """Open connections by alias; the default is the last one connected."""

    _interpolate = staticmethod(interpolate)

    def __init__(self) -> None:
        self.frontend = IPythonFrontend()
        self.conns: dict[str, Controller] = {}
        self.default: str | None = None
        self.config, self.config_error = load_settings()
        # Passthrough terminals, by alias (the same namespace as conns).
        self.ptys = Terminals(config=self.config, side=self.frontend.notebook_side, frontend=self.frontend)
        LoopHome.__init__(self)

    def busy(self) -> bool:
        return bool(self.conns or self.ptys.panels)

    def _say(self, md: Markdown) -> None:
        self.frontend.sink().display(message(md))  # text/plain: the rendered text (terminal IPython prints it)

    @staticmethod
    def _ns() -> dict[str, Any]:
        from IPython import get_ipython

        ip = get_ipython()
        return ip.user_ns if ip is not None else {}

    # -- %acp -----------------------------------------------------------------

    async def line(self, line: str, local_ns: dict[str, Any] | None = None) -> Any:
        """An ``%acp`` line; with ``local_ns`` (a rewritten line), ``{name}``
        and ``$name`` are expanded first, as IPython does for line magics."""
        if local_ns is not None:
            line = self._expand(line, local_ns)
        return await self._bridge(self._line(line))

    async def _line(self, line: str) -> Any:
        try:
            call = commands.parse(commands.split(line, "%acp"), MAGICS, "%acp " + line)
            verb = call.verb.name
            if verb == "help":
                return self._say(commands.help_markdown(MAGICS))
            own = self.OWN_VERBS.get(verb)
            if own is not None:
                return await self._interruptible(own(self, call))
            alias = call.text("--as")
            target = alias or self.default
            if verb == "cancel" and target is not None and target in self.ptys.panels:
                return self.ptys.get(target).terminal.interrupt()
            conn = self.conns.get(alias or "") if verb == "agents" and not alias else self._conn(alias)
            if conn is None:  # %acp agents with nothing connected
                conn = Controller(self.frontend, parts=PARTS, config=self.config)
            await self._interruptible(conn.run(call), conn)
            return None
        except commands.UsageError as exc:
            raise said(str(exc)) from None
        except PassthroughError as exc:
            raise said(str(exc)) from None
        except Unavailable as exc:
            raise said(str(exc)) from None
        except (AcpError, RpcError, OSError) as exc:
            # The error says the first line; the cell shows the rest, if any: each thing once.
            first, _, rest = str(exc).partition("\n")
            if rest.strip():
                self._say(text(rest))
            raise said(f"{call.line}: {first or type(exc).__name__}") from None

    def _expand(self, line: str, local_ns: dict[str, Any]) -> str:
        from IPython.utils.text import DollarFormatter

        try:
            return DollarFormatter().vformat(line, args=[], kwargs={**self._ns(), **local_ns})
        except Exception:  # noqa: BLE001 - as IPython's var_expand: keep the line as written
            return line

    def _conn(self, alias: str | None) -> Controller:
        key = alias or self.default
        if key is None:
            raise UsageError("no agent connected; use %acp connect NAME (e.g. %acp connect demo)")
        if key not in self.conns:
            known = ", ".join([*self.conns, *self.ptys.panels]) or "none"
            raise UsageError(f"no connection {key!r} (open: {known}); use %acp connect NAME")
        return self.conns[key]

    async def _verb_connect(self, call: Call) -> None:
        command = call.words("--command")
        try:
            spec = adhoc_agent(command) if command else self.config.agent(
                call.arg(0) or self.config.default_agent)
        except AcpError as exc:  # an unknown name, an unreadable command
            raise said(str(exc)) from None
        alias = call.text("--as") or spec.name
        if alias in self.conns or alias in self.ptys.panels:
            await self._close(alias)
        guard()
        conn = Controller(self.frontend, parts=PARTS, spec=spec, config=self.config, cwd=call.text("--cwd"),
                          permissions=call.text("--permissions"), label=alias, ptys=self.ptys)
        if call.option("--no-mcp"):
            conn.notebook_mcp = False
        conn.config_error, self.config_error = self.config_error, None
        try:
            session = await conn.ensure()
        except BaseException:
            await conn.close()
            raise
        self.conns[alias] = conn
        self.default = alias
        info = conn.client.agent_info  # type: ignore[union-attr]
        self._say(Markdown("Connected **{}**: {} {}, session {}.").format(
            text(alias), text(str(info.get("title") or info.get("name") or spec.title)),
            text(str(info.get("version") or "")), code(session.id)))

    async def _close(self, alias: str) -> None:
        conn = self.conns.pop(alias, None)
        if conn is not None:
            await conn.close()
        await self.ptys.close(alias)
        if self.default == alias:
            self.default = next(iter([*self.conns, *self.ptys.panels]), None)

    async def _verb_disconnect(self, call: Call) -> None:
        aliases = call.args or ([self.default] if self.default else [])
        if not aliases:
            raise UsageError("no connection to close")
        for alias in aliases:
            if alias not in self.ptys.panels:
                self._conn(alias)  # unknown alias: a usage error, not "Disconnected"
            await self._close(alias)
            self._say(Markdown("Disconnected **{}**.").format(text(alias)))

    async def _verb_status(self, call: Call) -> None:
        alias = call.text("--as")
        if not self.conns and not self.ptys.panels:
            self._say(Markdown("No connections. `%acp connect demo` opens one."))
            return
        parts = []
        for name, conn in self.conns.items():
            if alias and name != alias:
                continue
            mark = " (default)" if name == self.default else ""
            lines = [Markdown("  ") + line for line in conn.status_lines()]
            parts.append(Markdown("- **{}**{}:\n").format(text(name), mark) + Markdown("\n").join(lines))
        for name, panel in self.ptys.panels.items():
            mark = " (default)" if name == self.default else ""
            parts.append(Markdown("- **{}**{}: terminal {}, {}").format(
                text(name), mark, code(panel.terminal.title), text(panel.widget.status)))
        self._say(Markdown("\n").join(parts))

    async def _verb_passthrough(self, call: Call) -> None:
        """Open the agent's own CLI in a terminal; ``%%acp`` cells are typed into it."""
        command = call.words("--command")
        words = ["--command", *command] if command else call.args
        target = resolve(words, self.config, self.config.agent(self.config.default_agent))
        alias = call.text("--as") or f"{target.name}-cli"
        if alias in self.conns:
            await self._close(alias)
        guard()
        panel = self.ptys.open(Target(alias, target.settings, target.env, target.title),
                               call.text("--cwd") or os.getcwd())
        self.default = panel.terminal.name
        panel.show(self.frontend.sink())
        note = self.ptys.note(panel.terminal.name)  # why the notebook MCP server is off, if it is
        if note is not None:
            self._say(note)

    #: The verbs the magics run themselves (connections by alias, terminals by
    #: alias, the status of every connection); ``help`` too. The others go to a
    #: connection's controller (:data:`acp_kernel.client.verbs.HANDLERS`).
    OWN_VERBS = {
        "connect": _verb_connect,
        "disconnect": _verb_disconnect,
        "status": _verb_status,
        "passthrough": _verb_passthrough,
    }

    # -- %%acp ----------------------------------------------------------------

    async def cell(self, args: str, body: str) -> Turn | Any:
        return await self._bridge(self._cell(args, body))

    async def _cell(self, args: str, body: str) -> Turn | Any:
        try:
            ns = cell_parser().parse_args(commands.split(args, "%%acp"))
        except commands.UsageError as exc:
            raise said(str(exc)) from None
        user_ns = self._ns()
        prompt = body if ns.no_interpolate else self._interpolate(body, user_ns)
        alias = ns.alias or self.default
        if alias in self.ptys.panels:
            if ns.attach:
                raise UsageError("--attach sends variables to ACP agents; a passthrough terminal takes text only")
            return await self._pty_cell(alias, prompt)
        conn = self._conn(ns.alias)
        blocks = [text_block(prompt)]
        for name in ns.attach:
            if name not in user_ns:
                raise UsageError(f"--attach {name}: no such variable")
            blocks.append(attachment(name, user_ns[name]))
        try:
            turn = await self._interruptible(conn.prompt(blocks), conn)
        except Unavailable as exc:
            raise said(str(exc)) from None
        except AcpError as exc:  # refused before a turn began (ContentRefused: an attachment it cannot take)
            raise said(str(exc).split("\n", 1)[0]) from None
        user_ns["_acp"] = turn
        return turn

    async def _pty_cell(self, alias: str, prompt: str) -> Any:
        """Type the cell into a passthrough terminal; the value is the :class:`Reply`."""
        conn = Controller(self.frontend, parts=PARTS, config=self.config, ptys=self.ptys)
        try:
            reply = await self._interruptible(conn.prompt_terminal(alias, prompt.rstrip("\n")), conn)
        except PassthroughError as exc:
            raise said(str(exc)) from None
        self._ns()["_acp"] = reply
        return reply

    # -- %%shell --------------------------------------------------------------

    async def shell(self, args: str, body: str) -> Any:
        # IPython ends every cell with a newline; the line is the body without it
        # (as in the ACP kernel), so --show-argv and the argv match terminal_request.
        if body.endswith("\n"):
            body = body[:-1]

        def write(text_: str) -> None:
            sys.stdout.write(text_)
            sys.stdout.flush()

        running: list[Any] = []
        with self._sigint(lambda: asyncio.ensure_future(running[0].kill("killed")) if running else None):
            try:
                return await shell_cell(args, body, write, frontend=self.frontend.frontend(), display=self.frontend.sink(),
                                        cwd=os.getcwd(), on_start=running.append)
            except (ShellOptionsError, TerminalError) as exc:  # --raise's ShellCellError is a real error
                raise said(str(exc)) from None

    async def close_all(self) -> None:
        for alias in [*self.conns, *self.ptys.panels]:
            await self._close(alias)


_runtime: Runtime | None = None


def runtime() -> Runtime:
    global _runtime
    if _runtime is None:
        _runtime = Runtime()
    return _runtime


def kill_all_now() -> None:
    """At interpreter exit: no agent outlives the kernel."""
    if _runtime is not None:
        for conn in _runtime.conns.values():
            conn.kill_now()
        _runtime.ptys.kill_now()
