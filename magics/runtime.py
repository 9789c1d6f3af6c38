"""What ``%acp``, ``%%acp`` and ``%%shell`` do, on the kernel's event loop.

Thin over the same Client, Session, Turn and TurnView as the ACP kernel.
Connections are kept by alias, so several agents can be open at once.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shlex
import signal
import sys
from collections.abc import Awaitable, Callable
from contextlib import contextmanager
from collections.abc import Iterator
from typing import Any

from acp_kernel.errors import AcpError, AuthRequired, ConnectionClosed, PassthroughError, RpcError
from acp_kernel.host import POLICIES, ClientSettings
from acp_kernel.registry import AgentSpec, adhoc_agent, load_config
from acp_kernel.safe import Markdown, block, bundle, code, markdown, plain
from acp_kernel.session import Client, Session, embedded_resource, text_block
from acp_kernel.turn import Turn

#: Bytes of a variable sent with ``--attach`` at most.
ATTACH_CAP = 64 * 1024


class UsageError(Exception):
    """A wrong ``%acp`` call; shown as a one-line message, not a traceback."""


def _usage(exc: Exception) -> Exception:
    try:
        from IPython.core.error import UsageError as IPythonUsageError

        return IPythonUsageError(str(exc))
    except ImportError:  # pragma: no cover - IPython is a dependency
        return exc


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message}")


def _connect_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="%acp connect", add_help=False)
    p.add_argument("name", nargs="?")
    p.add_argument("--command")
    p.add_argument("--cwd")
    p.add_argument("--permissions", choices=POLICIES)
    p.add_argument("--as", dest="alias")
    return p


def _passthrough_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="%acp passthrough", add_help=False)
    p.add_argument("name", nargs="?")
    p.add_argument("--command")
    p.add_argument("--cwd")
    p.add_argument("--as", dest="alias")
    return p


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
            text = head(50).to_csv()
            mime = "text/csv"
        except Exception:  # noqa: BLE001 - fall back to repr
            text = repr(value)
    else:
        text = repr(value)
    data = text.encode("utf-8", "replace")
    if len(data) > cap:
        text = data[:cap].decode("utf-8", "ignore") + f"\n... [cut at {cap:,} bytes]"
    return embedded_resource(f"python:{name}", text, mime)


class _Conn:
    def __init__(self, alias: str, client: Client, session: Session) -> None:
        self.alias, self.client, self.session = alias, client, session


class Runtime:
    """Open connections by alias; the default is the last one connected."""

    def __init__(self) -> None:
        from acp_kernel.ptycell import Terminals

        self.conns: dict[str, _Conn] = {}
        self.ptys = Terminals()  # passthrough terminals, by alias (the same namespace as conns)
        self.default: str | None = None
        try:
            self.config = load_config()
        except AcpError:
            self.config = None

    # -- output ---------------------------------------------------------------

    @staticmethod
    def _md(md: Markdown, plain: str | None = None) -> None:
        """A message in the cell, through the same checked sink as turns."""
        from acp_kernel.view.sink import IPythonSink

        IPythonSink().display(bundle(md, plain))

    def _ns(self) -> dict[str, Any]:
        from IPython import get_ipython

        ip = get_ipython()
        return ip.user_ns if ip is not None else {}

    # -- interrupt ------------------------------------------------------------

    @contextmanager
    def _sigint(self, on_interrupt: Callable[[], Awaitable[Any]]) -> Iterator[None]:
        """While a turn runs, SIGINT cancels it (stock IPython would delay the
        interrupt until the awaited cell yields, or kill the await outright)."""
        loop = asyncio.get_running_loop()
        try:
            previous = signal.signal(
                signal.SIGINT, lambda s, f: loop.call_soon_threadsafe(lambda: asyncio.ensure_future(on_interrupt()))
            )
        except ValueError:  # not the main thread: no signal handling here
            yield
            return
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)

    # -- %acp -----------------------------------------------------------------

    async def line(self, line: str) -> Any:
        try:
            words = shlex.split(line)
        except ValueError as exc:
            raise _usage(UsageError(f"%acp: {exc}")) from None
        if not words:
            raise _usage(UsageError("usage: %acp connect|disconnect|agents|status|mode|model|config|sessions|load|new|cancel"))
        verb, args = words[0], words[1:]
        handler = getattr(self, "_verb_" + verb, None)
        if handler is None:
            raise _usage(UsageError(f"%acp: unknown command {verb!r}"))
        try:
            return await handler(args)
        except UsageError as exc:
            raise _usage(exc) from None
        except AuthRequired as exc:
            from acp_kernel.view.transcript import auth_markdown

            self._md(auth_markdown(exc.methods))
        except ConnectionClosed as exc:
            self._md(Markdown("**The agent went away.**\n\n") + block(exc.explain()))
        except (AcpError, RpcError, OSError) as exc:
            self._md(Markdown("**%acp {}:** {}").format(verb, str(exc)))
        return None

    @staticmethod
    def _guard() -> None:
        """Inside a kernel, agents die with it even on ``kill -9`` (see acp_kernel.watchdog)."""
        from IPython import get_ipython

        if getattr(get_ipython(), "kernel", None) is not None:
            from acp_kernel import watchdog

            try:
                watchdog.enable()
            except OSError:
                pass

    def _spec(self, name: str | None, command: str | None) -> AgentSpec:
        if command:
            return adhoc_agent(command)
        if self.config is None:
            self.config = load_config()
        return self.config.agent(name or self.config.default_agent)

    def _conn(self, alias: str | None) -> _Conn:
        key = alias or self.default
        if key is None:
            raise UsageError("no agent connected; use %acp connect NAME (e.g. %acp connect demo)")
        if key not in self.conns:
            known = ", ".join([*self.conns, *self.ptys.panels]) or "none"
            raise UsageError(f"no connection {key!r} (open: {known}); use %acp connect NAME")
        return self.conns[key]

    async def _verb_connect(self, args: list[str]) -> None:
        ns = _connect_parser().parse_args(args)
        spec = self._spec(ns.name, ns.command)
        alias = ns.alias or spec.name
        if alias in self.conns or alias in self.ptys.panels:
            await self._close(alias)
        settings = (self.config.client_settings(ns.permissions) if self.config is not None
                    else ClientSettings(permissions=ns.permissions or "ask"))
        self._guard()
        client = await Client(spec, cwd=ns.cwd, settings=settings,
                              mcp_servers=self.config.mcp_servers if self.config else None).start()
        try:
            session = await client.new_session()
        except BaseException:
            await client.close()
            raise
        self.conns[alias] = _Conn(alias, client, session)
        self.default = alias
        info = client.agent_info
        self._md(Markdown("Connected **{}**: {} {}, session {}.").format(
            alias, str(info.get("title") or info.get("name") or spec.title), str(info.get("version") or ""), code(session.id)))

    async def _close(self, alias: str) -> None:
        conn = self.conns.pop(alias, None)
        if conn is not None:
            await conn.client.close()
        await self.ptys.close(alias)
        if self.default == alias:
            self.default = next(iter([*self.conns, *self.ptys.panels]), None)

    async def _verb_disconnect(self, args: list[str]) -> None:
        aliases = args or ([self.default] if self.default else [])
        if not aliases:
            raise UsageError("no connection to close")
        for alias in aliases:
            if alias not in self.ptys.panels:
                self._conn(alias)  # unknown alias: a usage error, not "Disconnected"
            await self._close(alias)
            self._md(Markdown("Disconnected **{}**.").format(alias))

    async def _verb_agents(self, args: list[str]) -> None:
        from acp_kernel.cli import run_agents

        run_agents(sys.stdout)

    async def _verb_status(self, args: list[str]) -> None:
        if not self.conns and not self.ptys.panels:
            self._md(Markdown("No connections. `%acp connect demo` opens one."))
            return
        lines = []
        for alias, conn in self.conns.items():
            s = conn.session
            alive = "running" if conn.client.alive else "exited"
            mark = " (default)" if alias == self.default else ""
            mode = Markdown(", mode {}").format(code(s.current_mode)) if s.current_mode else Markdown("")
            lines.append(Markdown("- **{}**{}: {}, {}, session {}{}, permissions {}").format(
                alias, mark, conn.client.spec.title, alive, code(s.id), mode, conn.client.settings.permissions))
        for alias, panel in self.ptys.panels.items():
            mark = " (default)" if alias == self.default else ""
            lines.append(Markdown("- **{}**{}: terminal {}, {}").format(alias, mark, code(panel.terminal.title), panel.widget.status))
        self._md(Markdown("\n").join(lines))

    async def _verb_mode(self, args: list[str]) -> None:
        conn = self._conn(args[1] if len(args) > 1 else None)
        if not args:
            raise UsageError("usage: %acp mode ID [ALIAS]")
        await conn.session.set_mode(args[0])

    async def _verb_model(self, args: list[str]) -> None:
        if not args:
            raise UsageError("usage: %acp model ID [ALIAS]")
        await self._conn(args[1] if len(args) > 1 else None).session.set_model(args[0])

    async def _verb_config(self, args: list[str]) -> None:
        if len(args) < 2:
            raise UsageError("usage: %acp config ID VALUE [ALIAS]")
        value: Any = {"true": True, "false": False}.get(args[1].lower(), args[1])
        await self._conn(args[2] if len(args) > 2 else None).session.set_config_option(args[0], value)

    async def _verb_sessions(self, args: list[str]) -> list[dict[str, Any]]:
        conn = self._conn(args[0] if args else None)
        return await conn.client.list_sessions(conn.session.cwd)

    async def _verb_load(self, args: list[str]) -> None:
        if not args:
            raise UsageError("usage: %acp load SESSION_ID [ALIAS]")
        conn = self._conn(args[1] if len(args) > 1 else None)
        conn.session = await conn.client.load_session(args[0], conn.session.cwd)
        history = conn.session.background.text
        self._md(Markdown("Reopened session {}.").format(code(args[0]))
                 + (Markdown("\n\n") + markdown(history[-2000:]) if history else Markdown("")))

    async def _verb_new(self, args: list[str]) -> None:
        conn = self._conn(args[0] if args else None)
        conn.session = await conn.client.new_session(conn.session.cwd)
        self._md(Markdown("New session {}.").format(code(conn.session.id)))

    async def _verb_cancel(self, args: list[str]) -> None:
        alias = args[0] if args else self.default
        if alias in self.ptys.panels:
            self.ptys.get(alias).terminal.interrupt()
            return
        await self._conn(alias).session.cancel()

    async def _verb_passthrough(self, args: list[str]) -> None:
        """Open the agent's own CLI in a terminal; ``%%acp`` cells are typed into it."""
        from acp_kernel.ptycell import Target, resolve
        from acp_kernel.view.sink import IPythonSink

        ns = _passthrough_parser().parse_args(args)
        if self.config is None:
            self.config = load_config()
        words = ["--command", ns.command] if ns.command else ([ns.name] if ns.name else [])
        target = resolve(words, self.config, self.config.agent(self.config.default_agent))
        alias = ns.alias or f"{target.name}-cli"
        if alias in self.conns:
            await self._close(alias)
        self._guard()
        panel = self.ptys.open(Target(alias, target.settings, target.env, target.title), ns.cwd or os.getcwd())
        self.default = panel.terminal.name
        IPythonSink().display(panel.bundle())

    # -- %%acp ----------------------------------------------------------------

    async def cell(self, args: str, body: str) -> Turn | None:
        from acp_kernel.view import TurnView
        from acp_kernel.view.sink import IPythonSink

        try:
            ns = _cell_parser().parse_args(shlex.split(args))
            alias = ns.alias or self.default
            if alias in self.ptys.panels:
                if ns.attach:
                    raise UsageError("--attach sends variables to ACP agents; a passthrough terminal takes text only")
                return await self._pty_cell(alias, body if ns.no_interpolate else self._interpolate(body, self._ns()))
            conn = self._conn(ns.alias)
        except (UsageError, ValueError) as exc:
            raise _usage(exc) from None
        user_ns = self._ns()
        text = body if ns.no_interpolate else self._interpolate(body, user_ns)
        blocks = [text_block(text)]
        for name in ns.attach:
            if name not in user_ns:
                raise _usage(UsageError(f"--attach {name}: no such variable"))
            blocks.append(attachment(name, user_ns[name]))
        if conn.client.needs_restart or not conn.client.alive:
            await self._reconnect(conn)
        session = conn.session
        session.interactive = self._interactive()
        turn = session.begin(blocks)
        view = TurnView(turn, IPythonSink(), session=session,
                        rate_hz=self.config.refresh_hz if self.config is not None else 10.0)
        try:
            with self._sigint(session.cancel):
                await session.finish(turn)
        finally:
            view.close()
        user_ns["_acp"] = turn
        return turn

    async def _pty_cell(self, alias: str, text: str) -> Any:
        """Type the cell into a passthrough terminal; the value is the :class:`Reply`."""
        from acp_kernel.ptycell import outcome_markdown
        from acp_kernel.view.sink import IPythonSink

        terminal = self.ptys.get(alias).terminal

        async def ctrl_c() -> None:
            terminal.interrupt()

        try:
            with self._sigint(ctrl_c):
                reply = await self.ptys.prompt(alias, text.rstrip("\n"), IPythonSink())
        except PassthroughError as exc:
            raise _usage(exc) from None
        if not self._interactive() and reply.text:  # headless: no terminal on screen, keep the reply
            print(plain(reply.text))
        note = outcome_markdown(terminal, reply)
        if note:
            self._md(note)
        self._ns()["_acp"] = reply
        return reply

    @staticmethod
    def _interactive() -> bool:
        """Can someone answer a permission form? As in the ACP kernel: the
        execute request's ``allow_stdin`` (nbclient sends False: headless)."""
        from IPython import get_ipython

        kernel = getattr(get_ipython(), "kernel", None)
        if kernel is None:
            return False
        try:
            content = kernel.get_parent("shell").get("content") or {}
        except Exception:  # noqa: BLE001 - an older ipykernel
            content = {}
        return bool(content.get("allow_stdin", getattr(kernel, "_allow_stdin", False)))

    @staticmethod
    def _interpolate(text: str, ns: dict[str, Any]) -> str:
        """``{name}`` -> value, like IPython's ``!cmd {x}``; unknown names stay as written."""
        import string

        class _Keep(dict):
            def __missing__(self, key: str) -> str:
                return "{" + key + "}"

        try:
            return string.Formatter().vformat(text, (), _Keep(ns))
        except (ValueError, AttributeError, IndexError, KeyError):
            return text

    async def _reconnect(self, conn: _Conn) -> None:
        old = conn.session.id
        await conn.client.close()
        client = await Client(conn.client.spec, cwd=conn.session.cwd, settings=conn.client.settings,
                              mcp_servers=conn.client.mcp_servers).start()
        try:
            conn.session = await client.load_session(old, conn.session.cwd) if (
                client.can("resume") or client.can("load")) else await client.new_session(conn.session.cwd)
        except (RpcError, AcpError):
            conn.session = await client.new_session(conn.session.cwd)
        conn.client = client
        self._md(Markdown("*Restarted **{}**.*").format(conn.alias))

    # -- %%shell --------------------------------------------------------------

    async def shell(self, args: str, body: str) -> Any:
        from acp_kernel.shellcell import ShellCellError, parse_options, run_shell
        from acp_kernel.terminals import TerminalError

        try:
            opts = parse_options(args)
        except ShellCellError as exc:
            raise _usage(exc) from None
        # IPython ends every cell with a newline; the line is the body without it
        # (as in the ACP kernel), so --show-argv and the argv match terminal_request.
        if body.endswith("\n"):
            body = body[:-1]

        def write(text: str) -> None:
            sys.stdout.write(text)
            sys.stdout.flush()

        running: list[Any] = []
        with self._sigint(lambda: running[0].kill("killed") if running else asyncio.sleep(0)):
            try:
                return await run_shell(body, opts, write, cwd=os.getcwd(), on_start=running.append)
            except TerminalError as exc:
                raise _usage(exc) from None

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
            conn.client.kill_now()
        _runtime.ptys.kill_now()
