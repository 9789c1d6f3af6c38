"""What ``%acp``, ``%%acp`` and ``%%shell`` do, on the kernel's event loop.

A thin adapter: each connection (by alias) is a
:class:`~acp_kernel.controller.Controller`, the same as the ACP kernel's, and
``%acp`` lines are read by the same command table
(:mod:`acp_kernel.commands`). What is the magics' own: several connections
by alias, ``%%acp`` cells (interpolation, attachments, the turn as the cell's
value), passthrough terminals by alias, and ``%%shell``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from acp_kernel import commands
from acp_kernel.api import IPythonFrontend, guard
from acp_kernel.commands import MAGICS, Call
from acp_kernel.controller import Controller, Unavailable, load_settings
from acp_kernel.errors import AcpError, PassthroughError, RpcError
from acp_kernel.registry import adhoc_agent
from acp_kernel.safe import Markdown, code, text
from acp_kernel.session import embedded_resource, text_block
from acp_kernel.turn import Turn

#: Bytes of a variable sent with ``--attach`` at most.
ATTACH_CAP = 64 * 1024

try:
    # IPython shows exactly this class as one line (``UsageError: ...``), no
    # traceback; a subclass would get a traceback. So every failure of a
    # magic, a usage error or an agent that could not start, raises it.
    from IPython.core.error import UsageError
except ImportError:  # pragma: no cover - IPython is a dependency
    class UsageError(Exception):  # type: ignore[no-redef]
        pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message}")


def _cell_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="%%acp", add_help=False)
    p.add_argument("alias", nargs="?")
    p.add_argument("--no-interpolate", action="store_true")
    p.add_argument("--attach", action="append", default=[], metavar="VAR")
    return p


def attachment(name: str, value: Any, cap: int = ATTACH_CAP) -> dict[str, Any]:
    """A variable as an embedded resource: a DataFrame's head as CSV, else its repr."""
    mime = "text/plain"
    head = getattr(value, "head", None)
    to_csv = getattr(value, "to_csv", None)
    if callable(head) and callable(to_csv):
        try:
            text_ = head(50).to_csv()
            mime = "text/csv"
        except Exception:  # noqa: BLE001 - fall back to repr
            text_ = repr(value)
    else:
        text_ = repr(value)
    data = text_.encode("utf-8", "replace")
    if len(data) > cap:
        text_ = data[:cap].decode("utf-8", "ignore") + f"\n... [cut at {cap:,} bytes]"
    return embedded_resource(f"python:{name}", text_, mime)


class Runtime:
    """Open connections by alias; the default is the last one connected."""

    def __init__(self) -> None:
        from acp_kernel.ptycell import Terminals

        self.frontend = IPythonFrontend()
        self.conns: dict[str, Controller] = {}
        self.ptys = Terminals()  # passthrough terminals, by alias (the same namespace as conns)
        self.default: str | None = None
        self.config, self.config_error = load_settings()
        #: The loop the connections live on: the kernel's (first use), or a
        #: loop of our own (see :meth:`background`); calls bridge to it.
        self.loop: asyncio.AbstractEventLoop | None = None
        self._stop: Callable[[], Any] | None = None  # what an interrupt does now

    # -- where connections live ---------------------------------------------------

    def background(self) -> asyncio.AbstractEventLoop:
        """For a magic IPython calls while the kernel's loop is busy running
        the cell (the cell that loaded the extension, a plain ``def``): a loop
        of our own in a thread, which connections then live on. Only while
        nothing is open on the kernel's loop."""
        if self.loop is None or (self.loop.is_running() and self.loop is asyncio.get_running_loop()
                                 and not self.conns and not self.ptys.panels):
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="acp-magics", daemon=True).start()
            self.loop = loop
        if self.loop is asyncio.get_running_loop():
            raise UsageError("%acp inside a plain function cannot wait for the agent while the cell runs: "
                             "make it `async def` and await it, or use `agent = await acp_kernel.connect(...)`")
        return self.loop

    def run_blocking(self, coro: Any) -> Any:
        """Run ``coro`` on :meth:`background`'s loop and wait here (the calling thread blocks)."""
        try:
            loop = self.background()
        except BaseException:
            coro.close()
            raise
        future = asyncio.run_coroutine_threadsafe(coro, loop)
        with self._sigint(lambda: loop.call_soon_threadsafe(self._interrupt_now), loop=None):
            return future.result()

    def _interrupt_now(self) -> None:
        if self._stop is not None:
            self._stop()

    async def _bridge(self, coro: Any) -> Any:
        """Await ``coro`` on the connections' loop, from whichever loop calls."""
        here = asyncio.get_running_loop()
        if self.loop is None:
            self.loop = here
        home = self.loop
        if home is here:
            return await coro
        future = asyncio.run_coroutine_threadsafe(coro, home)
        with self._sigint(lambda: home.call_soon_threadsafe(self._interrupt_now)):
            try:
                return await asyncio.wrap_future(future)
            except asyncio.CancelledError:
                future.cancel()
                raise

    def _say(self, md: Markdown) -> None:
        from acp_kernel.safe import bundle

        self.frontend.sink().display(bundle(md))

    @staticmethod
    def _ns() -> dict[str, Any]:
        from IPython import get_ipython

        ip = get_ipython()
        return ip.user_ns if ip is not None else {}

    @contextmanager
    def _sigint(self, on_interrupt: Callable[[], Any], loop: Any = "running") -> Iterator[None]:
        """While a verb or turn runs, SIGINT calls ``on_interrupt`` on the loop
        (stock IPython would delay the interrupt until the cell yields, or
        kill the await outright). ``loop=None``: call it in the signal handler."""
        if loop == "running":
            loop = asyncio.get_running_loop()
        try:
            previous = signal.signal(signal.SIGINT, (lambda s, f: on_interrupt()) if loop is None
                                     else (lambda s, f: loop.call_soon_threadsafe(on_interrupt)))
        except ValueError:  # not the main thread: no signal handling here
            yield
            return
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)

    async def _interruptible(self, coro: Any, conn: Controller | None = None) -> Any:
        """Run ``coro`` as its own task, so an interrupt can stop it wherever it waits."""
        task = asyncio.ensure_future(coro)
        stop = (lambda: conn.interrupt(task)) if conn is not None else task.cancel
        self._stop = stop  # for an interrupt that arrives through a bridge (another thread)
        with self._sigint(stop):
            try:
                return await task
            except asyncio.CancelledError:
                if task.cancelled() and not asyncio.current_task().cancelling():  # type: ignore[union-attr]
                    raise KeyboardInterrupt("interrupted") from None
                raise
            finally:
                self._stop = None

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
            own = getattr(self, "_verb_" + verb, None)
            if own is not None:
                return await self._interruptible(own(call))
            alias = call.option("--as")
            if verb == "cancel" and (alias or self.default) in self.ptys.panels:
                return self.ptys.get(alias or self.default).terminal.interrupt()  # type: ignore[arg-type]
            conn = self.conns.get(alias) if verb == "agents" and not alias else self._conn(alias)  # type: ignore[arg-type]
            if conn is None:  # %acp agents with nothing connected
                conn = Controller(self.frontend, config=self.config)
            await self._interruptible(conn.run(call), conn)
            return None
        except commands.UsageError as exc:
            raise UsageError(str(exc)) from None
        except PassthroughError as exc:
            raise UsageError(str(exc)) from None
        except Unavailable as exc:
            raise UsageError(str(exc)) from None
        except (AcpError, RpcError, OSError) as exc:
            self._say(Markdown("**{}:** {}").format(text(call.line), text(str(exc))))
            raise UsageError(f"{call.line}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None

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
        command = call.option("--command")
        try:
            spec = adhoc_agent(list(command)) if command else self.config.agent(  # type: ignore[arg-type]
                call.arg(0) or self.config.default_agent)
        except AcpError as exc:  # an unknown name, an unreadable command
            raise UsageError(str(exc)) from None
        alias = str(call.option("--as") or spec.name)
        if alias in self.conns or alias in self.ptys.panels:
            await self._close(alias)
        guard()
        conn = Controller(self.frontend, spec=spec, config=self.config, cwd=call.option("--cwd"),  # type: ignore[arg-type]
                          permissions=call.option("--permissions"), label=alias, ptys=self.ptys)  # type: ignore[arg-type]
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
        alias = call.option("--as")
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
        from acp_kernel.ptycell import Target, resolve

        command = call.option("--command")
        words = ["--command", *command] if command else call.args  # type: ignore[misc]
        target = resolve(list(words), self.config, self.config.agent(self.config.default_agent))
        alias = str(call.option("--as") or f"{target.name}-cli")
        if alias in self.conns:
            await self._close(alias)
        guard()
        panel = self.ptys.open(Target(alias, target.settings, target.env, target.title),
                               str(call.option("--cwd") or os.getcwd()))
        self.default = panel.terminal.name
        self.frontend.sink().display(panel.bundle())

    # -- %%acp ----------------------------------------------------------------

    async def cell(self, args: str, body: str) -> Turn | Any:
        return await self._bridge(self._cell(args, body))

    async def _cell(self, args: str, body: str) -> Turn | Any:
        try:
            ns = _cell_parser().parse_args(commands.split(args, "%%acp"))
        except commands.UsageError as exc:
            raise UsageError(str(exc)) from None
        user_ns = self._ns()
        prompt = body if ns.no_interpolate else self._interpolate(body, user_ns)
        alias = ns.alias or self.default
        if alias in self.ptys.panels:
            if ns.attach:
                raise UsageError("--attach sends variables to ACP agents; a passthrough terminal takes text only")
            return await self._pty_cell(alias, prompt)  # type: ignore[arg-type]
        conn = self._conn(ns.alias)
        blocks = [text_block(prompt)]
        for name in ns.attach:
            if name not in user_ns:
                raise UsageError(f"--attach {name}: no such variable")
            blocks.append(attachment(name, user_ns[name]))
        try:
            turn = await self._interruptible(conn.prompt(blocks), conn)
        except Unavailable as exc:
            raise UsageError(str(exc)) from None
        user_ns["_acp"] = turn
        return turn

    async def _pty_cell(self, alias: str, prompt: str) -> Any:
        """Type the cell into a passthrough terminal; the value is the :class:`Reply`."""
        conn = Controller(self.frontend, config=self.config, ptys=self.ptys)
        try:
            reply = await self._interruptible(conn.prompt_terminal(alias, prompt.rstrip("\n")), conn)
        except PassthroughError as exc:
            raise UsageError(str(exc)) from None
        self._ns()["_acp"] = reply
        return reply

    @staticmethod
    def _interpolate(text_: str, ns: dict[str, Any]) -> str:
        """``{name}`` -> value, like IPython's ``!cmd {x}``; unknown names stay as written."""
        import string

        class _Keep(dict):
            def __missing__(self, key: str) -> str:
                return "{" + key + "}"

        try:
            return string.Formatter().vformat(text_, (), _Keep(ns))
        except (ValueError, AttributeError, IndexError, KeyError):
            return text_

    # -- %%shell --------------------------------------------------------------

    async def shell(self, args: str, body: str) -> Any:
        from acp_kernel.shellcell import ShellCellError, parse_options, run_shell
        from acp_kernel.terminals import TerminalError

        try:
            opts = parse_options(args)
        except ShellCellError as exc:
            raise UsageError(str(exc)) from None
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
                return await run_shell(body, opts, write, cwd=os.getcwd(), on_start=running.append)
            except TerminalError as exc:
                raise UsageError(str(exc)) from None

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
