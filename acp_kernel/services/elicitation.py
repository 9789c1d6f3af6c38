"""``elicitation/create`` in form mode: the agent asks the user to fill a form.

The service emits an :class:`~acp_kernel.services.events.ElicitationPrompt`
(message, fields, required names, a future) and answers with what the UI
resolves: ``accept`` (content), ``decline`` or ``cancel``. When nobody can
answer (``ctx.interactive`` False) it declines at once, with a notice.

Only session-scoped form requests can be shown (they name the session whose
cell renders the form). Request-scoped ones (no ``sessionId``) and URL mode,
which this client does not advertise, are declined with a notice where
there is a session to put it in.

Forms count against ``limits.pending_prompts`` together with permission
questions (one shared :class:`~acp_kernel.services.events.PendingPrompts`);
one past the cap is answered ``cancel`` at once, with a notice.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ..errors import RpcError
from .events import ElicitationPrompt, Notice, PendingPrompts

DECLINE: dict[str, Any] = {"action": "decline"}
CANCEL: dict[str, Any] = {"action": "cancel"}


def schema_fields(schema: dict[str, Any]) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """(properties by name, required names) of a requested schema dict."""
    props = schema.get("properties") or {}
    fields = {str(k): (v if isinstance(v, dict) else {}) for k, v in props.items()} if isinstance(props, dict) else {}
    required = [str(r) for r in schema.get("required") or () if str(r) in fields]
    return fields, required


class ElicitationService:
    def __init__(self, host: Any, prompts: PendingPrompts | None = None) -> None:
        self.host = host
        self.prompts = prompts if prompts is not None else PendingPrompts()

    async def create(self, params: Any) -> dict[str, Any]:
        from ..protocol.schema import CreateFormSessionElicitationRequest  # lazy: start-up time

        if not isinstance(params, dict):
            raise RpcError(-32602, "elicitation/create: params must be an object")
        mode = params.get("mode")
        sid = params.get("sessionId")
        if mode != "form" or sid is None:
            if sid is not None:
                ctx = self.host.session_context(sid)
                what = f"{mode!r} mode" if mode != "form" else "this request"
                ctx.emit(Notice("warning", f"The agent asked for input in {what}, which this client cannot show; declined.", sid))
            return DECLINE
        req = CreateFormSessionElicitationRequest.model_validate(params)
        ctx = self.host.session_context(req.session_id)
        schema = req.requested_schema.model_dump(by_alias=True, exclude_none=True)
        raw_schema = params["requestedSchema"] if isinstance(params.get("requestedSchema"), dict) else schema
        fields, required = schema_fields(raw_schema)
        if not ctx.interactive:
            ctx.emit(Notice("warning", f"The agent asked for input ({req.message!r}); declined: nobody can answer here (not interactive).", req.session_id))
            return DECLINE
        limit = ctx.settings.limits.pending_prompts
        if self.prompts.full(req.session_id, limit):
            ctx.emit(Notice(
                "warning",
                f"The agent asked for input ({req.message!r}); cancelled at once: {self.prompts.count(req.session_id)} "
                f"questions already wait for an answer in this session (limits.pending_prompts = {limit}; "
                f'change it under "limits" in the config file).',
                req.session_id,
                kind="limit",
            ))
            return CANCEL
        loop = asyncio.get_running_loop()
        prompt = ElicitationPrompt(
            session_id=req.session_id,
            message=req.message,
            schema=raw_schema,
            fields=fields,
            required=required,
            future=loop.create_future(),
            loop=loop,
            request=req,
            tool_call_id=req.tool_call_id,
        )
        return await prompt.ask(ctx, self.prompts)

    def sessions_pending(self) -> list[str]:
        return self.prompts.sessions(ElicitationPrompt)

    def cancel_all(self, session_id: str) -> int:
        return self.prompts.cancel_all(session_id, ElicitationPrompt)

    def register(self, conn: Any) -> None:
        conn.on_request("elicitation/create", self.create)
