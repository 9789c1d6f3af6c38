"""``elicitation/create``: the agent asks the user to fill a form, or to open a page.

Form mode: the service emits an :class:`~acp_kernel.services.events.ElicitationPrompt`
(message, fields, required names, a future) and answers with what the UI
resolves: ``accept`` (content), ``decline`` or ``cancel``. When nobody can
answer (``ctx.interactive`` False) it declines at once, with a notice.

URL mode (advertised only where a view can show a link: the notebook's turn
widget, see :func:`acp_kernel.services.client_capabilities`): the URL must
pass :func:`check_url` (http or https, a host, no ``user:pass@``, no spaces,
controls or backslashes), else it is declined with a notice and never shown.
The service emits an :class:`~acp_kernel.services.events.UrlElicitationPrompt`
naming the host; the view opens the page only on the user's click, which
answers ``accept`` (consent to open, the spec's meaning; not "done"). The
agent's ``elicitation/complete`` for an accepted id marks it completed
(:class:`~acp_kernel.services.events.ElicitationCompleted`); unknown, not
accepted or already completed ids are ignored, as the spec requires. Where no
such view is in front of the user (``ctx.links`` False: a console, nbclient,
the CLI), or no turn runs, it is declined with a notice.

Only session-scoped requests can be shown (they name the session whose cell
renders them). Request-scoped ones (no ``sessionId``) and unknown modes are
declined with a notice where there is a session to put it in.

Forms and pages count against ``limits.pending_prompts`` together with
permission questions (one shared :class:`~acp_kernel.services.events.PendingPrompts`);
one past the cap is answered ``cancel`` at once, with a notice. A cancelled
turn answers every pending one ``cancel``, and so does the end of the turn
for a page still waiting.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import unicodedata
from collections import OrderedDict
from typing import Any
from urllib.parse import urlsplit

from ..errors import RpcError
from .events import ElicitationCompleted, ElicitationPrompt, Notice, PendingPrompts, UrlElicitationPrompt

DECLINE: dict[str, Any] = {"action": "decline"}
CANCEL: dict[str, Any] = {"action": "cancel"}
#: Both kinds of elicitation prompt (a cancelled turn answers them all).
PROMPTS = (ElicitationPrompt, UrlElicitationPrompt)
#: Longest URL shown and opened.
MAX_URL = 8192
#: Accepted pages whose completion may still come (the oldest are forgotten past this).
MAX_OPENED = 64
#: A host name in ASCII (after IDNA): letters, digits, "-", "_" and dots.
_HOST = re.compile(r"[a-z0-9_-]+(\.[a-z0-9_-]+)*\.?")
#: Characters no URL shown to a person may hold: spaces, controls, invisible format
#: characters (bidi overrides, zero widths), surrogates, private use, unassigned.
_HIDDEN = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs"})


def schema_fields(schema: dict[str, Any]) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """(properties by name, required names) of a requested schema dict."""
    props = schema.get("properties") or {}
    fields = {str(k): (v if isinstance(v, dict) else {}) for k, v in props.items()} if isinstance(props, dict) else {}
    required = [str(r) for r in schema.get("required") or () if str(r) in fields]
    return fields, required


def _ipv4_like(label: str) -> bool:
    """A last label a browser reads as (part of) an IPv4 address: digits, or 0x hex."""
    return label.isdigit() or (label.startswith("0x") and all(c in "0123456789abcdef" for c in label[2:]))


def check_url(url: Any) -> tuple[str, str]:
    """(the host in ASCII, its Unicode form when that differs, else "") of a URL a
    click may open; ``ValueError`` saying why not.

    Only what a browser parses to the same host as this does: http(s), a host,
    no user name or password (``https://good.example@evil.example/``), no
    whitespace, controls or invisible characters (``evil.example\\n.com``), no
    backslash (read as ``/``), no percent-escapes in the host, an IPv4 address
    only in dotted decimal (``http://0x7f.1/`` is 127.0.0.1 to a browser).
    """
    if not isinstance(url, str) or not url:
        raise ValueError("it gave no URL")
    if len(url) > MAX_URL:
        raise ValueError(f"the URL is longer than {MAX_URL:,} characters")
    if any(c.isspace() or unicodedata.category(c) in _HIDDEN for c in url):
        raise ValueError("the URL holds spaces, control or invisible characters")
    if "\\" in url:
        raise ValueError("the URL holds a backslash (browsers read it as a slash)")
    try:
        parts = urlsplit(url)
    except ValueError:
        raise ValueError("the URL cannot be parsed") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise ValueError(f"only http and https pages are opened, not {scheme + ':' if scheme else 'an address without a scheme'}")
    if "@" in parts.netloc:
        raise ValueError("the URL has a user name or password before its host (user@host)")
    host = parts.hostname or ""
    if not host:
        raise ValueError("the URL names no host")
    try:
        parts.port  # noqa: B018 - raises for a port that is not a number in range
    except ValueError:
        raise ValueError("the URL's port is not a number from 0 to 65535") from None
    if parts.netloc.startswith("["):
        try:
            return f"[{ipaddress.IPv6Address(host).compressed}]", ""
        except ValueError:
            raise ValueError("the URL's host is not a valid IPv6 address") from None
    try:
        ascii_host = host.encode("idna").decode("ascii").lower()
    except UnicodeError:
        raise ValueError("the host name is not a valid international domain name") from None
    if len(ascii_host) > 253 or not _HOST.fullmatch(ascii_host):
        raise ValueError("the host name holds characters a host name cannot")
    if _ipv4_like(ascii_host.rstrip(".").rsplit(".", 1)[-1]):
        try:
            ipaddress.IPv4Address(ascii_host)
        except ValueError:
            raise ValueError("the host looks like an IP address but is not written as one (four numbers)") from None
    if ascii_host != host:
        return ascii_host, host
    if any(label.startswith("xn--") for label in ascii_host.split(".")):
        try:
            return ascii_host, ascii_host.encode("ascii").decode("idna")
        except UnicodeError:
            return ascii_host, ""
    return ascii_host, ""


class ElicitationService:
    def __init__(self, host: Any, prompts: PendingPrompts | None = None) -> None:
        self.host = host
        self.prompts = prompts if prompts is not None else PendingPrompts()
        #: Accepted pages by elicitation id, until the agent says they are complete.
        self._opened: OrderedDict[str, UrlElicitationPrompt] = OrderedDict()

    async def create(self, params: Any) -> dict[str, Any]:
        from ..protocol.schema import CreateFormSessionElicitationRequest  # lazy: start-up time

        if not isinstance(params, dict):
            raise RpcError(-32602, "elicitation/create: params must be an object")
        mode = params.get("mode")
        sid = params.get("sessionId")
        if mode == "url" and sid is not None:
            return await self._url(params)
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
        if self._full(ctx, req.session_id, f"for input ({req.message!r})"):
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

    def _full(self, ctx: Any, sid: str, what: str) -> bool:
        """True (said in a notice) when ``limits.pending_prompts`` questions already wait."""
        limit = ctx.settings.limits.pending_prompts
        if not self.prompts.full(sid, limit):
            return False
        ctx.emit(Notice(
            "warning",
            f"The agent asked {what}; cancelled at once: {self.prompts.count(sid)} "
            f"questions already wait for an answer in this session (limits.pending_prompts = {limit}; "
            f'change it under "limits" in the config file).',
            sid,
            kind="limit",
        ))
        return True

    async def _url(self, params: dict[str, Any]) -> dict[str, Any]:
        from ..protocol.schema import models  # lazy: start-up time

        sid = params["sessionId"]
        ctx = self.host.session_context(sid)
        message = params.get("message")
        asked = f"you to open a page ({message!r})" if isinstance(message, str) else "you to open a page"
        try:
            host, host_unicode = check_url(params.get("url"))
        except ValueError as exc:
            ctx.emit(Notice("warning", f"The agent asked {asked}; declined without showing it: {exc}.", sid))
            return DECLINE
        req = models.CreateUrlSessionElicitationRequest.model_validate(params)
        where = f"{asked} at {host}"
        if not (ctx.interactive and ctx.links):
            ctx.emit(Notice("warning", f"The agent asked {where}; declined: nobody can open a link here "
                            "(a notebook's turn output can; a console, a headless run or the CLI cannot).", sid))
            return DECLINE
        if not getattr(ctx, "turn_running", True):
            ctx.emit(Notice("warning", f"The agent asked {where} while no turn was running; declined.", sid))
            return DECLINE
        eid = req.elicitation_id
        if eid in self._opened or any(p.elicitation_id == eid for p in self.prompts.pending(sid, UrlElicitationPrompt)):
            ctx.emit(Notice("warning", f"The agent asked {where} with the id of one still open; declined.", sid))
            return DECLINE
        if self._full(ctx, sid, where):
            return CANCEL
        loop = asyncio.get_running_loop()
        prompt = UrlElicitationPrompt(
            session_id=sid, elicitation_id=eid, message=req.message, url=params["url"], host=host,
            future=loop.create_future(), loop=loop, host_unicode=host_unicode, tool_call_id=req.tool_call_id,
        )
        answer = await prompt.ask(ctx, self.prompts)
        if isinstance(answer, dict) and answer.get("action") == "accept":
            self._opened[eid] = prompt
            while len(self._opened) > MAX_OPENED:
                self._opened.popitem(last=False)
        return answer

    def complete(self, params: Any) -> None:
        """``elicitation/complete``: an accepted page is done; any other id is ignored."""
        eid = params.get("elicitationId") if isinstance(params, dict) else None
        prompt = self._opened.pop(eid, None) if isinstance(eid, str) else None
        if prompt is None:
            return
        prompt.completed = True
        try:
            ctx = self.host.session_context(prompt.session_id)
        except RpcError:
            return  # the session is gone
        ctx.emit(ElicitationCompleted(prompt.session_id, prompt.elicitation_id, prompt))

    def sessions_pending(self) -> list[str]:
        return self.prompts.sessions(PROMPTS)

    def cancel_all(self, session_id: str) -> int:
        return self.prompts.cancel_all(session_id, PROMPTS)

    def end_turn(self, session_id: str) -> int:
        """The turn ended: a page still waiting for a click is answered ``cancel``
        (its view is gone)."""
        return self.prompts.cancel_all(session_id, UrlElicitationPrompt)

    def forget(self, session_id: str) -> None:
        """The session is gone: its pages' completions no longer matter."""
        for eid in [e for e, p in self._opened.items() if p.session_id == session_id]:
            del self._opened[eid]

    def register(self, conn: Any) -> None:
        conn.on_request("elicitation/create", self.create)
        conn.on_notification("elicitation/complete", self.complete)
