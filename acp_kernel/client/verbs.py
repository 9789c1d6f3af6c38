"""What the command table's verbs do, one handler each, in :data:`HANDLERS`.

:mod:`acp_kernel.client.commands` says what a verb is called, what it takes
and how it reads; this says what it does, the same in every front-end.
:meth:`Controller.run <acp_kernel.client.controller.Controller.run>` looks a
verb up in :data:`HANDLERS`. Verbs a front-end handles itself (``help``
everywhere, ``connect`` and ``disconnect`` in the magics) have no handler
here. A new verb is a :class:`~acp_kernel.client.commands.Verb` in the table
and a handler with its entry below.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from .commands import VERBS, Call, UsageError
from ..errors import AcpError, PassthroughError, RpcError
from .params import parse_set, value_text
from .registry import adhoc_agent
from ..safe import Markdown, block, code, plain, text
from .session import Choice, Session, absolute_roots

if TYPE_CHECKING:  # pragma: no cover
    from .controller import Controller

Handler = Callable[["Controller", Call], Awaitable[Any]]


def available(session: Session, what: str) -> list[Choice]:
    """The modes or models the agent offers (``what``: "mode" or "model")."""
    return session.available_modes() if what == "mode" else session.available_models()


def usage(c: Controller, verb: str) -> str:
    """The verb's usage line in this front-end's words."""
    return VERBS[verb].usage(c.frontend.kind)


# -- the agent ------------------------------------------------------------------


async def agent(c: Controller, call: Call) -> None:
    command = call.words("--command")
    if command:
        spec = adhoc_agent(command)
    elif call.arg(0):
        spec = c.config.agent(call.arg(0) or "")
    else:
        raise UsageError("usage: %agent NAME | --command CMD")
    await c.restart(keep_session=False, quiet=True)
    c.want_session = None
    c.spec = spec
    c.remember()
    c.say(Markdown("*Agent: {}* ({}); it starts with the next prompt.").format(
        text(spec.display_name()), code(" ".join(spec.command))))


async def agents(c: Controller, call: Call) -> None:
    listing, failed = c.parts.list_agents()
    c.say(block(listing.rstrip("\n")), plain(listing))
    if failed:
        raise AcpError(listing.strip().splitlines()[0] if listing.strip() else "cannot list the agents")


async def restart(c: Controller, call: Call) -> None:
    await c.restart(keep_session=True)
    await c.ensure()


async def auth(c: Controller, call: Call) -> None:
    method_id = call.arg(0) or ""
    life = c.life
    if life.client is None or not life.client.alive:
        life.client = await life.start()
    method = next((m for m in life.client.auth_methods if m.get("id") == method_id), {})
    if method.get("type") == "terminal":
        await _terminal_login(c, method)
        return
    await life.client.authenticate(method_id)
    c.say(Markdown("*Authenticated.*"))


async def logout(c: Controller, call: Call) -> None:
    """``logout`` where the agent offers it; the open session is left to the agent."""
    life = c.life
    if life.client is None or not life.client.alive:
        life.client = await life.start()
    await life.client.logout()  # AcpError, said as the cell's one line, where it offers none
    c.say(Markdown("*Logged out of {}; new sessions need a login again ({}).*").format(
        c.name, code(usage(c, "auth"))))


async def _terminal_login(c: Controller, method: dict) -> None:
    """Run the agent's login in a terminal here; on exit status 0, reconnect (ACP v1)."""
    if c.ptys is None:
        raise AcpError("this front-end cannot show a terminal for the login")
    ptys = c.ptys
    panel = ptys.open(c.parts.login_target(c.spec, method), c.cwd, reuse=False)
    panel.show(c.frontend.sink())
    c.say(Markdown("*Log in in the terminal above; the agent reconnects when it exits.*"))
    c.running = panel.terminal
    try:
        outcome = await panel.terminal.wait_exit()
    finally:
        c.running = None
    if outcome == "interrupted":
        c.say(Markdown("*Interrupted: Ctrl-C sent to the login. Run {} again to retry.*").format(
            code(usage(c, "auth"))))
        raise AcpError("the login was interrupted")
    status = panel.terminal.exit_status
    await ptys.close(panel.terminal.name)  # exited: this only forgets it
    if status != 0:
        c.say(Markdown("**Login {}.** Run {} to try again.").format(
            text(panel.terminal.describe_exit()), code(f"{usage(c, 'auth').rsplit(' ', 1)[0]} {method.get('id')}")))
        raise AcpError(f"login {panel.terminal.describe_exit()}")
    await c.restart(keep_session=True, quiet=True)
    c.say(Markdown("*Logged in; the agent restarts with the next prompt.*"))


# -- sessions -------------------------------------------------------------------


async def new(c: Controller, call: Call) -> None:
    await c.life.close_session()
    c.want_session = None
    session = await c.ensure()
    c.say(Markdown("*New session {} in {}.*").format(code(session.id), code(session.cwd)))


async def sessions(c: Controller, call: Call) -> list[dict[str, Any]]:
    action, sid = call.arg(0), call.arg(1)
    if action is not None:
        if action != "delete" or sid is None:
            raise UsageError(f"usage: {usage(c, 'sessions')}")
        await delete(c, sid)
        return []
    session = await c.ensure()
    client = session.client
    if client.can("list"):
        listed = with_info(await client.list_sessions(c.cwd), client.sessions.values())
    else:  # the sessions open here, as their updates named them
        listed = with_info([], [session])
        c.say(Markdown("*{} does not list sessions; the one open here:*").format(c.name))
    if not listed:
        c.say(Markdown("*No sessions listed for {}.*").format(code(c.cwd)))
        return listed
    rows = Markdown("\n").join(
        Markdown("- {} {}{}{}").format(
            code(s.get("sessionId")), text(s.get("title") or ""),
            Markdown(" · updated {}").format(text(str(s.get("updatedAt")))) if s.get("updatedAt") else Markdown(""),
            Markdown(" ← **current**") if s.get("sessionId") == session.id else Markdown(""))
        for s in listed)
    more = [Markdown("Reopen one with {}.").format(code(usage(c, "load")))]
    if client.can("delete"):
        more.append(Markdown("{} removes one.").format(code(usage(c, "sessions").replace("[delete ID]", "delete ID"))))
    c.say(rows + Markdown("\n\n") + Markdown(" ").join(more))
    return listed


def with_info(listed: list[dict[str, Any]], open_: Any) -> list[dict[str, Any]]:
    """The agent's list with the title and time its ``session_info_update``
    gave each open session (newer than the list's); an open session the list
    leaves out is added."""
    rows = {s.get("sessionId"): dict(s) for s in listed}
    for session in open_:
        row = rows.setdefault(session.id, {"sessionId": session.id, "cwd": session.cwd})
        if session.title is not None:
            row["title"] = session.title
        if session.updated_at is not None:
            row["updatedAt"] = session.updated_at
    return list(rows.values())


async def delete(c: Controller, sid: str) -> None:
    """``%sessions delete ID``: ``session/delete`` where offered. The current
    session is refused: deleting it under the notebook would leave its next
    cell nowhere; ``%new`` first."""
    if c.session is not None and c.session.id == sid:
        raise AcpError(f"session {sid} is this notebook's current session; {usage(c, 'new')} starts another, "
                       "then delete it")
    session = await c.ensure()
    client = session.client
    await client.delete_session(sid)
    # Checked, not assumed: claude-agent-acp 0.49 answers a delete and lists the session still.
    if client.can("list") and any(s.get("sessionId") == sid for s in await client.list_sessions(c.cwd)):
        c.say(Markdown("*{} answered the delete of session {}, but still lists it.*").format(c.name, code(sid)))
    else:
        c.say(Markdown("*Deleted session {}.*").format(code(sid)))


async def load(c: Controller, call: Call) -> None:
    sid = call.arg(0) or ""
    client = c.client
    if client is None or not client.alive or client.needs_restart:
        await c.restart(keep_session=False, quiet=True)
        c.want_session = sid
        await c.ensure()
        return
    if c.session is not None and c.session.id == sid:
        await c.life.close_session()  # reopened afresh below
    try:
        session = await client.load_session(sid, c.cwd)
    except (RpcError, AcpError) as exc:
        c.say(Markdown("**Could not reopen session {}:** {}").format(code(sid), text(str(exc))))
        raise AcpError(f"could not reopen session {sid}") from None
    await c.life.close_session()  # the one it replaces, once the new one is open
    c.life.opened(session)
    c.life.show_history(session, "Reopened")


async def cwd(c: Controller, call: Call) -> None:
    """``%cwd DIR`` moves the working directory; ``%cwd add DIR`` / ``remove DIR``
    change the other workspace roots (``additionalDirectories``) of new sessions."""
    action, given = (call.arg(0), call.arg(1)) if len(call.args) == 2 else (None, call.arg(0))
    if action not in (None, "add", "remove") or (action is None and given in ("add", "remove")):
        raise UsageError(f"usage: {usage(c, 'cwd')}")
    roots = c.settings.extra_roots
    roots[:] = absolute_roots(roots)  # the config's may be relative or start with ~
    if given is not None:
        path = os.path.abspath(os.path.join(c.cwd, os.path.expanduser(given)))
        if action == "remove":
            if path not in roots:
                raise UsageError(f"not an additional directory: {path}")
            roots.remove(path)
        elif not os.path.isdir(path):
            raise UsageError(f"not a directory: {path}")
        elif action == "add":
            if path not in roots:
                roots.append(path)
        else:
            c.cwd = path
        c.remember()
    line = Markdown("*Working directory: {} (for new sessions; `{}` starts one here).*").format(
        code(c.cwd), text(usage(c, "new")))
    if roots:
        line += Markdown("\n\n*Additional directories for new sessions: {}.*").format(
            Markdown(", ").join(code(r) for r in roots))
        client = c.client
        if client is not None and client.alive and not client.can("additionalDirectories"):
            line += Markdown(" *{} takes none (it does not advertise `sessionCapabilities.additionalDirectories`).*"
                             ).format(c.name)
    c.say(line)


# -- what the session runs with -----------------------------------------------------


async def mode(c: Controller, call: Call) -> None:
    await _choose(c, call, "mode")


async def model(c: Controller, call: Call) -> None:
    await _choose(c, call, "model")


async def _choose(c: Controller, call: Call, what: str) -> None:
    session = await c.ensure()
    wanted = call.arg(0)
    if wanted is None:
        choices = available(session, what)
        if not choices:
            c.say(Markdown("*{} offers no {}s.*").format(c.name, what))
            return
        rows = Markdown("\n").join(
            Markdown("- {}{}{}{}").format(
                code(ch.id), Markdown(" {}").format(text(ch.name)) if ch.name and ch.name != ch.id else Markdown(""),
                Markdown(" — {}").format(text(ch.description)) if ch.description else Markdown(""),
                Markdown(" ← **current**") if ch.current else Markdown(""))
            for ch in choices)
        c.say(Markdown("{}s {} offers:\n\n").format(what.capitalize(), c.name) + rows)
        return
    setter = session.set_mode if what == "mode" else session.set_model
    chosen = await setter(wanted)  # an id or a name; one the agent does not list is refused
    shown = chosen.id if chosen is not None else wanted
    c.say(Markdown("*{}: {}.*").format(what.capitalize(), code(shown)))


async def config(c: Controller, call: Call) -> None:
    session = await c.ensure()
    cid, value = call.arg(0), call.arg(1)
    if value is not None:
        parsed: Any = {"true": True, "false": False}.get(value.lower(), value)
        await session.set_config_option(cid or "", parsed)
        c.say(Markdown("*{} = {}.*").format(code(cid), code(value)))
        return
    options = [o for o in session.config_options if cid is None or o.get("id") == cid]
    if not options:
        c.say(Markdown("*No config option {}.*").format(code(cid)) if cid else
              Markdown("*{} offers no config options.*").format(c.name))
        return
    rows = []
    for o in options:
        values = [v.get("value") for v in o.get("options") or [] if isinstance(v, dict) and "value" in v]
        rows.append(Markdown("- {} ({}): {}{}").format(
            code(o.get("id")), text(o.get("name") or o.get("category") or o.get("type") or ""),
            code(o.get("currentValue")),
            Markdown("; choices: {}").format(Markdown(", ").join(code(v) for v in values)) if values else Markdown("")))
    c.say(Markdown("Config options:\n\n") + Markdown("\n").join(rows))


async def permissions(c: Controller, call: Call) -> None:
    policy = call.arg(0)
    if policy is not None:
        c.settings.permissions = policy  # type: ignore[assignment]
    c.say(Markdown("*Permissions: {}.*").format(text(c.settings.permissions)))


async def set_value(c: Controller, call: Call) -> None:
    """``%set NAME VALUE`` (the kernel's; papermill's parameters): later
    prompts put the value where they say ``{NAME}``."""
    try:
        name, value = parse_set(call.rest)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    c.values[name] = value
    c.say(Markdown("*{} = {}; prompts put it where they say {}.*").format(
        code(name), code(value_text(value)), code("{" + name + "}")))


async def cancel(c: Controller, call: Call) -> None:
    await c.cancel()


async def status(c: Controller, call: Call) -> None:
    c.say(Markdown("\n").join(c.status_lines()))


# -- passthrough terminals ------------------------------------------------------------


async def passthrough(c: Controller, call: Call) -> None:
    """The ACP kernel's ``%passthrough``: the next cells are typed into the
    terminal (``Route.target``) until ``off``. The magics open terminals by alias."""
    command = call.words("--command")
    args = call.args + (["--command", *command] if command else [])
    verb = args[0] if args else ""
    route, ptys = c.route, c.terminals
    if verb == "off":
        route.off()
        c.remember()
        c.say(Markdown("*Prompts go to {} over ACP again.*").format(text(c.spec.title)))
    elif verb == "list":
        c.say(ptys.listing())
    elif verb == "stop":
        name = args[1] if len(args) > 1 else route.target
        if name is None:
            raise PassthroughError("no passthrough terminal to stop")
        ptys.get(name)
        await ptys.close(name)
        if route.target == name:
            route.off()
            c.remember()
        c.say(Markdown("*Stopped {}.*").format(code(name)))
    else:
        target = c.parts.resolve_terminal(args, c.config, c.spec)
        panel = ptys.open(target, c.cwd)
        route.opened(panel.terminal.name, target.name if args[:1] != ["--command"] else "")
        c.remember()
        panel.show(c.frontend.sink())
        c.say(c.parts.opened_markdown(panel.terminal))
        note = ptys.note(panel.terminal.name)  # why the notebook MCP server is off, if it is
        if note is not None:
            c.say(note)


#: Each verb the controller runs, by its name in :data:`~acp_kernel.client.commands.VERBS`.
HANDLERS: dict[str, Handler] = {
    "agent": agent,
    "agents": agents,
    "restart": restart,
    "auth": auth,
    "logout": logout,
    "new": new,
    "sessions": sessions,
    "load": load,
    "cwd": cwd,
    "mode": mode,
    "model": model,
    "config": config,
    "permissions": permissions,
    "set": set_value,
    "cancel": cancel,
    "status": status,
    "passthrough": passthrough,
}
