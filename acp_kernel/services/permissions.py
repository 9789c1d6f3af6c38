"""Answering ``session/request_permission``: policy first, then the person.

Options are chosen by their ``kind`` (allow_once, allow_always, reject_once,
reject_always), never by id: real agents name them ``allow``, ``allow-once``,
``approve``, ``approved``, ``proceed_once``, ``once``, ``approve_for_session``,
``abort``, ``cancel``, ``reject``...

Policies (``ClientSettings.permissions``):

- ``ask``: the UI decides (a :class:`PermissionPrompt` event);
- ``allow-reads``: tool kinds read, search, fetch and think are allowed, the
  rest asked;
- ``allow-all``: allowed (the agent still gets told which option);
- ``deny``: rejected.

An ``allow_always``/``reject_always`` answer from the person is remembered
for the session, keyed by what actually runs or is touched: (tool kind, the
command line from ``rawInput`` (``command`` [+ ``args``], or ``cmd``), the
paths from ``rawInput`` and ``locations``). The agent's title is *not* part
of the key: a later request with the same title but another command is asked
anew. A request that names nothing concrete (no command, no path) is not
remembered at all: "always" then means once, since there is nothing to hold
the next request to. Agents usually remember these themselves; this only
saves a click when one asks again.

A person's "allow" of an agent request that names a command also lets the
very next ``terminal/create`` of exactly that command line (same session) run
without a second question: one approval, one run (:meth:`PermissionBroker.authorize`).
A policy "allow" grants nothing of the kind: the agent chooses the kind, and
``allow-reads`` must not turn a "read" that names ``curl ... | sh`` into a run.
In the same way a person's allow of an agent request whose ``rawInput`` holds
``code`` (the ``notebook`` MCP server's ``execute``, which agents ask about
themselves) answers the server's own question about exactly that code, and
"allow always" there answers it for the session (:meth:`PermissionBroker.take_code_grant`).

Questions waiting at once are capped per session (``limits.pending_prompts``,
shared with forms); one past the cap is answered ``cancelled`` at once, with
a notice.

When nobody can answer (``ctx.interactive`` False, e.g. nbclient) a reject
option is chosen and a notice says why; with no reject option the answer is
``cancelled``.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import shlex
from collections import deque
from collections.abc import Iterable
from typing import Any, NamedTuple

from .events import Notice, PendingPrompts, PermissionPrompt, PermissionResolved

OPTION_KINDS = ("allow_once", "allow_always", "reject_once", "reject_always")
READ_KINDS = frozenset({"read", "search", "fetch", "think"})
CANCELLED: dict[str, Any] = {"outcome": {"outcome": "cancelled"}}
#: Command lines a person allowed once, kept per session for the terminal
#: that runs them (oldest dropped first).
GRANTS_KEPT = 16

# -- pure ---------------------------------------------------------------------


def selected(option_id: str) -> dict[str, Any]:
    return {"outcome": {"outcome": "selected", "optionId": option_id}}


def pick(options: Iterable[dict[str, Any]], want: str, *, always_first: bool = False) -> dict[str, Any] | None:
    """The option of the wanted sense ("allow" or "reject"), by kind.

    ``*_once`` first (an automatic decision should not grant more than one
    action), unless ``always_first`` (repeating a remembered "always").
    """
    if want not in ("allow", "reject"):
        raise ValueError(want)
    order = (f"{want}_always", f"{want}_once") if always_first else (f"{want}_once", f"{want}_always")
    options = list(options)
    for kind in order:
        for opt in options:
            if opt.get("kind") == kind:
                return opt
    return None


def policy_decision(policy: str, kind: str | None) -> str:
    """"allow", "reject" or "ask" for a tool kind under a policy."""
    if policy == "allow-all":
        return "allow"
    if policy == "deny":
        return "reject"
    if policy == "allow-reads" and kind in READ_KINDS:
        return "allow"
    return "ask"


def command_line(raw_input: Any) -> str:
    """The command line a tool call's ``rawInput`` names, or "".

    ``{"command": "ls -la"}`` (a shell line), ``{"command": ["ls", "-la"]}``,
    ``{"command": "ls", "args": ["-la"]}`` and ``{"cmd": ...}``: argv forms are
    joined with :func:`shlex.join`, so the same argv always gives the same text
    and a shell line equal to it means the same run.
    """
    if not isinstance(raw_input, dict):
        return ""
    cmd = raw_input.get("command")
    if cmd is None:
        cmd = raw_input.get("cmd")
    args = raw_input.get("args")
    if isinstance(cmd, list) and cmd and all(isinstance(c, str) for c in cmd):
        return shlex.join(cmd)
    if isinstance(cmd, str) and cmd.strip():
        if isinstance(args, list) and args and all(isinstance(a, str) for a in args):
            return shlex.join([cmd, *args])
        return cmd
    return ""


def code_of(raw_input: Any) -> str:
    """The Python a tool call would run in the notebook: the ``code`` argument of the
    ``notebook`` MCP server's ``execute``, at the top of ``rawInput`` or one level
    down (agents wrap an MCP call's arguments as ``arguments`` or ``input``); ""."""
    if not isinstance(raw_input, dict):
        return ""
    for where in (raw_input, raw_input.get("arguments"), raw_input.get("input"), raw_input.get("args")):
        if isinstance(where, dict) and isinstance(where.get("code"), str) and where["code"].strip():
            return where["code"]
    return ""


PATH_KEYS = ("path", "file_path", "filePath", "notebook_path", "abs_path", "paths")


def touched_paths(raw_input: Any, locations: Any = None) -> tuple[str, ...]:
    """The paths a tool call names in ``rawInput`` and ``locations``, normalized, sorted."""
    found: set[str] = set()

    def add(value: Any) -> None:
        if isinstance(value, str) and value.strip():
            found.add(os.path.normpath(value))
        elif isinstance(value, list):
            for v in value[:1000]:
                if isinstance(v, str) and v.strip():
                    found.add(os.path.normpath(v))

    if isinstance(raw_input, dict):
        for key in PATH_KEYS:
            add(raw_input.get(key))
    for loc in locations if isinstance(locations, list) else ():
        path = loc.get("path") if isinstance(loc, dict) else getattr(loc, "path", None)
        add(path)
    return tuple(sorted(found))


def memory_key(kind: str | None, command: str, paths: tuple[str, ...]) -> tuple[str, str, tuple[str, ...]] | None:
    """What an "always" answer is remembered by; None when nothing concrete is named."""
    if not command and not paths:
        return None
    return (kind or "?", command, paths)


def describe_action(command: str, paths: tuple[str, ...]) -> str:
    """One plain line for the question: the command, else the paths."""
    if command:
        return command
    return ", ".join(paths)


def parse_options(raw: Any) -> list[dict[str, Any]]:
    """Options as ``{optionId, name, kind}`` dicts, leniently.

    An option with an unknown kind is kept (the UI can show it) but never
    picked by kind; entries without an id are dropped.
    """
    out: list[dict[str, Any]] = []
    if not isinstance(raw, list):
        return out
    for item in raw:
        if not isinstance(item, dict):
            continue
        oid = item.get("optionId")
        if not isinstance(oid, str):
            continue
        kind = item.get("kind")
        out.append(
            {
                "optionId": oid,
                "name": str(item.get("name") or oid),
                "kind": kind if kind in OPTION_KINDS else None,
                "rawKind": kind,
            }
        )
    return out


# -- the broker ---------------------------------------------------------------


def _take(kept: deque[str] | None, item: str) -> bool:
    """Use up one ``item`` of a session's grants, if it is there."""
    if not kept or item not in kept:
        return False
    kept.remove(item)
    return True


class Verdict(NamedTuple):
    """How a question the client asked for itself was settled."""

    allowed: bool
    #: "policy", "remembered", "user", "headless", "cancelled", "limit", "grant"
    by: str


class PermissionBroker:
    """Answers permission requests for every session of one client."""

    def __init__(self, host: Any, prompts: PendingPrompts | None = None) -> None:
        self.host = host
        self.prompts = prompts if prompts is not None else PendingPrompts()
        self._memory: dict[str, dict[tuple[str, str, tuple[str, ...]], str]] = {}
        self._grants: dict[str, deque[str]] = {}
        self._synthetic = itertools.count(1)
        #: Code a person allowed in the agent's own question (an MCP ``execute``), per
        #: session, for the notebook server's question about the same run.
        self._codes: dict[str, deque[str]] = {}
        self._code_always: set[str] = set()

    # The ACP handler.
    async def request_permission(self, params: Any) -> dict[str, Any]:
        from acp.schema import RequestPermissionRequest

        options = parse_options(params.get("options") if isinstance(params, dict) else None)
        if isinstance(params, dict):
            # Validate everything but the options' kinds (kept leniently above).
            clean = dict(params)
            clean["options"] = [
                {"optionId": o["optionId"], "name": o["name"], "kind": o["kind"] or "reject_once"} for o in options
            ]
            request = RequestPermissionRequest.model_validate(clean)
        else:
            request = RequestPermissionRequest.model_validate(params)
        ctx = self.host.session_context(request.session_id)
        tool_call = request.tool_call
        kind = tool_call.kind or ctx.tool_call_kind(tool_call.tool_call_id)
        raw_tool_call = params.get("toolCall") if isinstance(params, dict) else None
        raw = raw_tool_call if isinstance(raw_tool_call, dict) else {}
        command = command_line(raw.get("rawInput"))
        paths = touched_paths(raw.get("rawInput"), raw.get("locations"))
        answer, _ = await self.decide(
            ctx, request, options, kind, tool_call.tool_call_id, tool_call.title,
            command=command, paths=paths, grant=True, code=code_of(raw.get("rawInput")),
        )
        return answer

    async def decide(
        self,
        ctx: Any,
        request: Any,
        options: list[dict[str, Any]],
        kind: str | None,
        tool_call_id: str,
        title: str | None,
        *,
        policy: str | None = None,
        command: str = "",
        paths: tuple[str, ...] = (),
        cwd: str | None = None,
        grant: bool = False,
        code: str = "",
        hint: str | None = None,
    ) -> tuple[dict[str, Any], str]:
        """Policy "deny", remembered answers, policy "allow", then ask.

        Returns (the ACP answer, how it was decided). ``grant``: a person's
        allow of this request lets the next terminal of ``command`` run;
        ``code`` (the Python its ``rawInput`` names), the notebook server's run
        of it (:meth:`take_code_grant`). ``hint``: what would let it run, for the notice when nobody can answer.
        """
        sid = ctx.id
        if not options:
            ctx.emit(Notice("warning", f"permission request {title or tool_call_id!r} came with no options: cancelled", sid))
            ctx.emit(PermissionResolved(sid, tool_call_id, title, None, None, "cancelled"))
            return CANCELLED, "cancelled"

        def done(opt: dict[str, Any] | None, by: str) -> tuple[dict[str, Any], str]:
            ctx.emit(PermissionResolved(sid, tool_call_id, title, opt["optionId"] if opt else None, opt["kind"] if opt else None, by))
            return (selected(opt["optionId"]) if opt else CANCELLED), by

        decision = policy_decision(policy or ctx.settings.permissions, kind)
        if decision == "reject":  # "deny" beats anything remembered
            opt = pick(options, "reject")
            return done(opt, "policy")
        key = memory_key(kind, command, paths)
        remembered = self._memory.get(sid, {}).get(key) if key is not None else None
        if remembered is not None:
            opt = pick(options, remembered, always_first=True)
            if opt is not None:
                return done(opt, "remembered")
        if decision == "allow":
            opt = pick(options, "allow")
            if opt is not None:
                return done(opt, "policy")

        what = f"{title or tool_call_id!r}" + (f" [{describe_action(command, paths)}]" if command or paths else "")
        if not ctx.interactive:
            opt = pick(options, "reject")
            if hint is None:
                hint = ("Policy allow-reads (or allow-all) lets it run." if kind in READ_KINDS
                        else "Policy allow-all lets it run (%permissions allow-all, or --permissions).")
            why = (
                f"Permission for {what} ({kind or 'unknown kind'}) was "
                f"{'rejected' if opt else 'cancelled'}: nobody can answer here (not interactive). " + hint
            )
            ctx.emit(Notice("warning", why, sid))
            return done(opt, "headless")

        limit = ctx.settings.limits.pending_prompts
        if self.prompts.full(sid, limit):
            ctx.emit(Notice(
                "warning",
                f"Permission for {what} was cancelled at once: {self.prompts.count(sid)} questions already wait "
                f"for an answer in this session (limits.pending_prompts = {limit}; change it under "
                f'"limits" in the config file).',
                sid,
                kind="limit",
            ))
            return done(None, "limit")

        loop = asyncio.get_running_loop()
        prompt = PermissionPrompt(
            session_id=sid,
            request=request,
            options=options,
            kind=kind,
            future=loop.create_future(),
            loop=loop,
            title=title,
            command=describe_action(command, paths),
            cwd=cwd,
        )
        option_id = await prompt.ask(ctx, self.prompts)
        opt = next((o for o in options if o["optionId"] == option_id), None)
        if opt is None:
            return done(None, "cancelled")
        if opt["kind"] in ("allow_always", "reject_always") and key is not None:
            self._memory.setdefault(sid, {})[key] = opt["kind"].split("_")[0]
        if opt["kind"] in ("allow_once", "allow_always"):
            if grant and command:
                self._grants.setdefault(sid, deque(maxlen=GRANTS_KEPT)).append(command)
            if code:  # the notebook server's question about this very code is answered too
                self._codes.setdefault(sid, deque(maxlen=GRANTS_KEPT)).append(code)
                if opt["kind"] == "allow_always":
                    self._code_always.add(sid)
        return done(opt, "user")

    def take_grant(self, session_id: str, command: str) -> bool:
        """Use up a person's allow of exactly ``command`` (see the module docstring)."""
        return _take(self._grants.get(session_id), command)

    def take_code_grant(self, session_id: str, code: str) -> bool:
        """The person already allowed running exactly ``code`` when the agent asked
        for its tool call (once; every time after "allow always" for the session):
        the notebook server's ``execute`` asks no second question."""
        return session_id in self._code_always or _take(self._codes.get(session_id), code)

    async def authorize(
        self,
        ctx: Any,
        *,
        title: str,
        kind: str,
        command: str = "",
        locations: list[str] | None = None,
        cwd: str | None = None,
        raw_input: dict[str, Any] | None = None,
        policy: str | None = None,
        use_grant: bool = False,
        code: str = "",
        hint: str | None = None,
    ) -> Verdict:
        """A question on the client's own behalf (a terminal, a protected write...).

        Goes through the same policy, memory, headless and cap rules as an
        agent's request and the same prompt UI. ``policy``: None for the
        session's policy, or "ask" when the caller decided a person must
        answer whatever the policy (the agent-facing policy does not apply).
        ``use_grant``: a person's earlier allow of this exact ``command`` in
        the agent's own request counts (once) as the answer; ``code``: the
        Python this runs, which a person's allow of it in the agent's own
        request answers likewise (:meth:`take_code_grant`).
        """
        from acp.schema import RequestPermissionRequest

        if policy_decision(policy or ctx.settings.permissions, kind) != "reject":
            if (use_grant and command and self.take_grant(ctx.id, command)) or \
                    (code and self.take_code_grant(ctx.id, code)):
                return Verdict(True, "grant")
        tool_call_id = f"client-{next(self._synthetic)}"
        options = [
            {"optionId": "allow_once", "name": "Allow once", "kind": "allow_once"},
            {"optionId": "allow_always", "name": "Allow for this session", "kind": "allow_always"},
            {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"},
            {"optionId": "reject_always", "name": "Reject for this session", "kind": "reject_always"},
        ]
        tool_call: dict[str, Any] = {
            "toolCallId": tool_call_id,
            "title": title,
            "kind": kind,
            "locations": [{"path": p} for p in locations or ()],
        }
        if raw_input is not None:
            tool_call["rawInput"] = raw_input
        request = RequestPermissionRequest.model_validate(
            {
                "sessionId": ctx.id,
                "toolCall": tool_call,
                "options": [{k: o[k] for k in ("optionId", "name", "kind")} for o in options],
            }
        )
        opts = [dict(o, rawKind=o["kind"]) for o in options]
        paths = touched_paths(None, tool_call["locations"])
        answer, by = await self.decide(
            ctx, request, opts, kind, tool_call_id, title,
            policy=policy, command=command, paths=paths, cwd=cwd, hint=hint,
        )
        outcome = answer["outcome"]
        allowed = outcome.get("outcome") == "selected" and str(outcome.get("optionId", "")).startswith("allow")
        return Verdict(allowed, by)

    async def ask(self, ctx: Any, *, title: str, kind: str, locations: list[str] | None = None) -> bool:
        """Ask a person whatever the policy (a file outside the workspace...); True when allowed."""
        return (await self.authorize(ctx, title=title, kind=kind, locations=locations, policy="ask")).allowed

    def pending(self, session_id: str | None = None) -> list[PermissionPrompt]:
        return self.prompts.pending(session_id, PermissionPrompt)

    def cancel_all(self, session_id: str) -> int:
        """Answer every pending request of the session ``cancelled``."""
        return self.prompts.cancel_all(session_id, PermissionPrompt)

    def drop_grants(self, session_id: str) -> None:
        """A cancelled turn: allows given in it no longer let a terminal (or code) run unasked."""
        self._grants.pop(session_id, None)
        self._codes.pop(session_id, None)

    def forget(self, session_id: str) -> None:
        """Drop the session's remembered answers and grants (session closed)."""
        self._memory.pop(session_id, None)
        self._grants.pop(session_id, None)
        self._codes.pop(session_id, None)
        self._code_always.discard(session_id)

    def register(self, conn: Any) -> None:
        conn.on_request("session/request_permission", self.request_permission)
