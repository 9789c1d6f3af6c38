"""``acp-kernel``: the command line (headless prompts, agent list, demo agent).

Exit codes of ``acp-kernel prompt`` (distinct so scripts can tell them apart):
0 end_turn, 1 agent failure, 2 usage or config error, 3 authentication
required, 4 refusal, 5 cancelled, 6 max_tokens or max_turn_requests.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import signal
import sys
from typing import Any, Sequence, TextIO

EXIT_OK, EXIT_AGENT, EXIT_USAGE, EXIT_AUTH, EXIT_REFUSAL, EXIT_CANCELLED, EXIT_LIMIT = range(7)
STOP_EXIT = {
    "end_turn": EXIT_OK,
    "refusal": EXIT_REFUSAL,
    "cancelled": EXIT_CANCELLED,
    "max_tokens": EXIT_LIMIT,
    "max_turn_requests": EXIT_LIMIT,
}


def _jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {}
        for f in dataclasses.fields(value):
            if f.name in ("future", "loop", "terminal", "request") or f.name.startswith("_"):
                continue
            out[f.name] = _jsonable(getattr(value, f.name))
        return out
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return repr(value)


def event_json(event: Any) -> dict[str, Any]:
    """One event as one JSON object for ``--format json``."""
    from .turn import Chunk, Notice, PlanEvent, StateEvent, ToolCallEvent, UnknownUpdate

    kind = type(event)
    if kind is Chunk:
        return {"type": event.role, "text": event.text} if event.text else {"type": event.role, "content": event.content}
    if kind is ToolCallEvent:
        c = event.call
        return {"type": "tool_call", "new": event.new, "id": c.id, "title": c.title, "kind": c.kind,
                "status": c.status, "update": event.raw}
    if kind is PlanEvent:
        return {"type": "plan", "entries": event.entries}
    if kind is StateEvent:
        return {"type": event.kind, "update": event.raw}
    if kind is UnknownUpdate:
        return {"type": "unknown_update", "kind": event.kind, "update": event.raw}
    if kind is Notice:
        return {"type": "notice", "level": event.level, "text": event.text}
    return {"type": _snake(kind.__name__), **_jsonable(event)}


def _snake(name: str) -> str:
    return "".join("_" + c.lower() if c.isupper() and i else c.lower() for i, c in enumerate(name))


def describe(event: Any) -> str | None:
    """A one-line account of an event for stderr in ``--format text``."""
    from .turn import Chunk, Notice, PlanEvent, ToolCallEvent, UnknownUpdate

    kind = type(event)
    if kind is ToolCallEvent:
        c = event.call
        if event.new or c.final:
            return f"[tool] {c.kind or 'other'}: {c.title or c.id} ({c.status})"
        return None
    if kind is PlanEvent:
        marks = {"completed": "x", "in_progress": "~"}
        return "[plan] " + "; ".join(f"[{marks.get(e.get('status'), ' ')}] {e.get('content', '')}" for e in event.entries)
    if kind is Notice:
        return f"[{event.level}] {event.text}"
    if kind is UnknownUpdate:
        return f"[update] unknown kind {event.kind!r} kept"
    if kind is Chunk:
        return None
    name = kind.__name__
    if name == "TerminalStarted":
        via = " (shell line run through the shell)" if event.via_shell else ""
        return f"[terminal] {json.dumps(list(event.argv))}{via}"
    if name == "PermissionResolved":
        return f"[permission] {event.title or event.tool_call_id}: {event.option_kind or 'cancelled'} ({event.by})"
    if name in ("FileRead", "FileWritten"):
        return f"[fs] {name[4:].lower()} {event.path}"
    return None


_encode = json.JSONEncoder(ensure_ascii=False).encode


def _silence_stdout() -> None:
    """After a broken pipe, point stdout at /dev/null so exit does not complain."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


class _Printer:
    """Subscribes to a turn and writes it out, as text or as JSON lines.

    Output is gathered and written once per burst of events (a loop
    callback), not once per event: one system call per 32-byte chunk would
    cost more than parsing it.
    """

    def __init__(self, fmt: str, out: TextIO, err: TextIO) -> None:
        self.fmt, self.out, self.err = fmt, out, err
        self._buf: list[str] = []
        self._scheduled = False
        self.broken = False

    def _emit(self, text: str) -> None:
        self._buf.append(text)
        if not self._scheduled:
            self._scheduled = True
            try:
                asyncio.get_running_loop().call_soon(self.flush)
            except RuntimeError:
                self.flush()

    def flush(self) -> None:
        self._scheduled = False
        if self._buf:
            data = "".join(self._buf)
            self._buf.clear()
            if self.broken:
                return
            try:
                self.out.write(data)
                self.out.flush()
            except BrokenPipeError:  # `| head` closed the pipe: stop writing, keep going
                self.broken = True
                _silence_stdout()

    def __call__(self, event: Any) -> None:
        if event is None:
            self.flush()
            return
        name = type(event).__name__
        if self.fmt == "json":
            if name == "Chunk" and event.text:
                self._emit('{"type": "' + event.role + '", "text": ' + _encode(event.text) + "}\n")
            else:
                self._emit(_encode(event_json(event)) + "\n")
            return
        if name == "Chunk" and event.role == "agent":
            self._emit(event.text)
            return
        if name == "PermissionPrompt":
            return  # handled by the asker
        line = describe(event)
        if line:
            self.flush()
            self.err.write(line + "\n")
            self.err.flush()


async def _ask_permission(prompt: Any, err: TextIO) -> None:
    """Ask on the terminal (stdin is a TTY here)."""
    options = prompt.options
    err.write(f"\n[permission] {prompt.title or 'the agent asks permission'} ({prompt.kind or 'unknown kind'})\n")
    for i, opt in enumerate(options, 1):
        err.write(f"  {i}. {opt.get('name') or opt['optionId']} [{opt.get('kind')}]\n")
    err.write("choose a number (empty = reject): ")
    err.flush()
    loop = asyncio.get_running_loop()
    answer = (await loop.run_in_executor(None, sys.stdin.readline)).strip()
    if answer.isdigit() and 1 <= int(answer) <= len(options):
        prompt.answer(options[int(answer) - 1]["optionId"])
    else:
        prompt.reject()


async def run_prompt(args: argparse.Namespace, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    from .errors import AcpError, AuthRequired
    from .registry import ConfigError, adhoc_agent, load_config
    from .session import Client

    try:
        config = load_config()
        spec = adhoc_agent(args.agent_command) if args.agent_command else config.agent(args.agent or config.default_agent)
    except (ConfigError, AcpError) as exc:
        err.write(f"acp-kernel: {exc}\n")
        return EXIT_USAGE
    text = " ".join(args.prompt) if args.prompt else ""
    if not text and not sys.stdin.isatty():
        text = sys.stdin.read()
    if not text.strip():
        err.write("acp-kernel: no prompt given (pass it as arguments or on stdin)\n")
        return EXIT_USAGE
    policy = args.permissions or config.permissions or "ask"
    interactive = sys.stdin.isatty() and policy in ("ask", "allow-reads")
    settings = config.client_settings(policy)
    client = Client(spec, cwd=args.cwd, settings=settings, mcp_servers=config.mcp_servers, interactive=interactive)
    printer = _Printer(args.format, out, err)
    try:
        try:
            await client.start()
            session = await client.new_session()
        except AuthRequired as exc:
            err.write(f"acp-kernel: {exc}\n")
            return EXIT_AUTH
        except (AcpError, OSError) as exc:
            message = exc.explain() if hasattr(exc, "explain") else str(exc)
            err.write(f"acp-kernel: {message}\n")
            return EXIT_AGENT
        turn = session.begin(text)
        turn.subscribe(printer)
        asks: list[asyncio.Task[None]] = []
        if interactive:
            turn.subscribe(lambda e: asks.append(asyncio.ensure_future(_ask_permission(e, err)))
                           if type(e).__name__ == "PermissionPrompt" else None)
        loop = asyncio.get_running_loop()
        cancel_task: list[asyncio.Task[None]] = []
        try:
            loop.add_signal_handler(signal.SIGINT, lambda: cancel_task.append(loop.create_task(session.cancel())))
        except (NotImplementedError, RuntimeError):  # pragma: no cover - Windows
            pass
        await session.finish(turn)
        if cancel_task:
            await cancel_task[0]
        for task in asks:
            task.cancel()
        if args.format == "text" and turn.text and not turn.text.endswith("\n"):
            printer._emit("\n")
        if args.format == "json":
            printer._emit(json.dumps({"type": "end", "stopReason": turn.stop_reason, "error": turn.error}) + "\n")
        printer.flush()
        if turn.error:
            if args.format == "text":
                err.write(f"acp-kernel: {turn.error}\n")
            return EXIT_AGENT
        return STOP_EXIT.get(turn.stop_reason or "", EXIT_AGENT)
    finally:
        await client.close()


def _on_path(program: str) -> bool:
    import shutil

    return os.path.exists(program) if os.sep in program else shutil.which(program) is not None


def run_agents(out: TextIO = sys.stdout) -> int:
    from .registry import ConfigError, load_config

    try:
        config = load_config()
    except ConfigError as exc:
        print(f"acp-kernel: {exc}", file=sys.stderr)
        return EXIT_USAGE
    rows = []
    for name in sorted(config.agents, key=lambda n: (n != "demo", n)):
        spec = config.agents[name]
        mark = "yes" if spec.available() else "no"
        default = " (default)" if name == config.default_agent else ""
        rows.append((name + default, spec.title, mark, " ".join(spec.command), spec.install, spec.passthrough))
    widths = [max(len(r[i]) for r in rows + [("agent", "title", "available", "", "", None)]) for i in range(3)]
    out.write(f"{'agent':<{widths[0]}}  {'title':<{widths[1]}}  {'available':<{widths[2]}}  command\n")
    for r in rows:
        out.write(f"{r[0]:<{widths[0]}}  {r[1]:<{widths[1]}}  {r[2]:<{widths[2]}}  {r[3]}\n")
        pad = f"{'':<{widths[0]}}  {'':<{widths[1]}}  {'':<{widths[2]}}  "
        if r[2] == "no" and r[4]:
            out.write(f"{pad}install: {r[4]}\n")
        if r[5] is not None:
            found = "" if _on_path(r[5].command[0]) else " (not installed)"
            out.write(f"{pad}passthrough: {' '.join(r[5].command)}{found}\n")
    out.write(f"\nconfig file: {config.path}\n")
    return EXIT_OK


def run_install(args: argparse.Namespace) -> int:
    from .install import install
    from .registry import load_config

    spec = None
    if args.agent:
        try:
            spec = load_config().agent(args.agent)
        except Exception as exc:  # ConfigError or unknown agent
            print(f"acp-kernel: {exc}", file=sys.stderr)
            return EXIT_USAGE
    prefix = args.prefix or (None if args.user else sys.prefix)
    path = install(spec, user=args.user, prefix=prefix)
    print(f"installed kernelspec in {path}")
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="acp-kernel", description="Work with ACP coding agents from Jupyter.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("prompt", help="send one prompt to an agent and print the turn")
    who = p.add_mutually_exclusive_group()
    who.add_argument("--agent", help="a known or configured agent (see `acp-kernel agents`)")
    who.add_argument("--agent-command", help="any ACP agent command line, e.g. 'my-agent --acp'")
    p.add_argument("--cwd", default=None, help="the session's working directory (default: here)")
    p.add_argument("--permissions", choices=["ask", "allow-reads", "allow-all", "deny"], default=None,
                   help="how to answer permission requests (default: config, else ask; "
                   "with nobody to ask, requests are rejected)")
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.add_argument("prompt", nargs="*", help="the prompt (default: read stdin)")

    sub.add_parser("agents", help="list known and configured agents and whether each is installed")

    i = sub.add_parser("install", help="install the ACP Agent kernelspec (or one bound to an agent)")
    where = i.add_mutually_exclusive_group()
    where.add_argument("--user", action="store_true", help="for this user only")
    where.add_argument("--sys-prefix", action="store_true", help="into this Python environment (default)")
    where.add_argument("--prefix", help="under this prefix")
    i.add_argument("--agent", help="bind the kernelspec to this agent (\"ACP: Claude Code\")")
    sub.add_parser("demo-agent", help="run the built-in demo ACP agent on stdio (a script, no model)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["demo-agent"]:
        from .demo_agent import main as demo_main

        return demo_main(argv[1:]) or 0
    args = build_parser().parse_args(argv)
    if args.command == "agents":
        try:
            return run_agents()
        except BrokenPipeError:  # `acp-kernel agents | head`
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - nothing more to write
            return EXIT_OK
    if args.command == "install":
        return run_install(args)
    if args.command == "prompt":
        try:
            return asyncio.run(run_prompt(args))
        except KeyboardInterrupt:
            return EXIT_CANCELLED
    return EXIT_USAGE


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
