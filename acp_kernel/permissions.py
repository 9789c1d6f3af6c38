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
for the session, keyed by (tool kind, title): the *same* action is answered
the same way again, a different command or path is asked anew. (Keying by
kind alone would turn one "always" into a blanket grant for every shell
command.) Agents usually remember these themselves; this only saves a click
when one asks again.

When nobody can answer (``ctx.interactive`` False, e.g. nbclient) a reject
option is chosen and a notice says why; with no reject option the answer is
``cancelled``.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterable
from typing import Any

from .service_events import Notice, PermissionPrompt, PermissionResolved

OPTION_KINDS = ("allow_once", "allow_always", "reject_once", "reject_always")
READ_KINDS = frozenset({"read", "search", "fetch", "think"})
CANCELLED: dict[str, Any] = {"outcome": {"outcome": "cancelled"}}

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


def memory_key(kind: str | None, title: str | None) -> tuple[str, str]:
    return (kind or "?", title or "")


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


class PermissionBroker:
    """Answers permission requests for every session of one client."""

    def __init__(self, host: Any) -> None:
        self.host = host
        self._memory: dict[str, dict[tuple[str, str], str]] = {}
        self._pending: dict[str, set[PermissionPrompt]] = {}
        self._synthetic = itertools.count(1)

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
        return await self.decide(ctx, request, options, kind, tool_call.tool_call_id, tool_call.title)

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
    ) -> dict[str, Any]:
        """Policy "deny", remembered answers, policy "allow", then ask; returns the ACP answer."""
        sid = ctx.id
        if not options:
            ctx.emit(Notice("warning", f"permission request {title or tool_call_id!r} came with no options: cancelled", sid))
            ctx.emit(PermissionResolved(sid, tool_call_id, title, None, None, "cancelled"))
            return CANCELLED

        def done(opt: dict[str, Any] | None, by: str) -> dict[str, Any]:
            ctx.emit(PermissionResolved(sid, tool_call_id, title, opt["optionId"] if opt else None, opt["kind"] if opt else None, by))
            return selected(opt["optionId"]) if opt else CANCELLED

        decision = policy_decision(policy or ctx.settings.permissions, kind)
        if decision == "reject":  # "deny" beats anything remembered
            opt = pick(options, "reject")
            return done(opt, "policy")
        key = memory_key(kind, title)
        remembered = self._memory.get(sid, {}).get(key)
        if remembered is not None:
            opt = pick(options, remembered, always_first=True)
            if opt is not None:
                return done(opt, "remembered")
        if decision == "allow":
            opt = pick(options, "allow")
            if opt is not None:
                return done(opt, "policy")

        if not ctx.interactive:
            opt = pick(options, "reject")
            why = (
                f"Permission for {title or tool_call_id!r} ({kind or 'unknown kind'}) was "
                f"{'rejected' if opt else 'cancelled'}: nobody can answer here (not interactive). "
                + ("Policy allow-reads (or allow-all) lets it run." if kind in READ_KINDS
                   else "Policy allow-all lets it run (%permissions allow-all, or --permissions).")
            )
            ctx.emit(Notice("warning", why, sid))
            return done(opt, "headless")

        loop = asyncio.get_running_loop()
        prompt = PermissionPrompt(
            session_id=sid,
            request=request,
            options=options,
            kind=kind,
            future=loop.create_future(),
            loop=loop,
            title=title,
        )
        option_id = await prompt.ask(ctx, self._pending.setdefault(sid, set()))
        opt = next((o for o in options if o["optionId"] == option_id), None)
        if opt is None:
            return done(None, "cancelled")
        if opt["kind"] in ("allow_always", "reject_always"):
            self._memory.setdefault(sid, {})[key] = opt["kind"].split("_")[0]
        return done(opt, "user")

    async def ask(self, ctx: Any, *, title: str, kind: str, locations: list[str] | None = None) -> bool:
        """Ask on the client's own behalf (a file write outside the workspace...).

        Offers allow once / allow always / reject, through the same prompt,
        memory and headless rules as an agent's request. True when allowed.
        """
        from acp.schema import RequestPermissionRequest

        tool_call_id = f"client-{next(self._synthetic)}"
        options = [
            {"optionId": "allow_once", "name": "Allow once", "kind": "allow_once"},
            {"optionId": "allow_always", "name": "Allow for this session", "kind": "allow_always"},
            {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"},
        ]
        request = RequestPermissionRequest.model_validate(
            {
                "sessionId": ctx.id,
                "toolCall": {
                    "toolCallId": tool_call_id,
                    "title": title,
                    "kind": kind,
                    "locations": [{"path": p} for p in locations or ()],
                },
                "options": [{k: o[k] for k in ("optionId", "name", "kind")} for o in options],
            }
        )
        opts = [dict(o, rawKind=o["kind"]) for o in options]
        # The caller (the file policy) already decided a person must answer:
        # the agent-facing policy does not apply to the client's own questions.
        answer = await self.decide(ctx, request, opts, kind, tool_call_id, title, policy="ask")
        outcome = answer["outcome"]
        return outcome.get("outcome") == "selected" and str(outcome.get("optionId", "")).startswith("allow")

    def pending(self, session_id: str | None = None) -> list[PermissionPrompt]:
        if session_id is None:
            return [p for ps in self._pending.values() for p in ps]
        return list(self._pending.get(session_id, ()))

    def cancel_all(self, session_id: str) -> int:
        """Answer every pending request of the session ``cancelled``."""
        prompts = list(self._pending.get(session_id, ()))
        for prompt in prompts:
            prompt.cancel()
        return len(prompts)

    def forget(self, session_id: str) -> None:
        """Drop the session's remembered answers (session closed)."""
        self._memory.pop(session_id, None)

    def register(self, conn: Any) -> None:
        conn.on_request("session/request_permission", self.request_permission)
