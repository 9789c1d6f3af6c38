"""The client services, installed on a connection in one call.

The session layer calls :func:`install` once per connection, advertises
:func:`client_capabilities` in ``initialize``, calls
:meth:`Services.cancel_pending` when a turn is cancelled and
:meth:`Services.shutdown` when the connection closes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .elicitation import ElicitationService
from .files import FileService
from .permissions import PermissionBroker
from .events import PendingPrompts
from .terminals import TerminalService


def client_capabilities(*, elicitation: bool = True, terminal_auth: bool = False, url_elicitation: bool = False) -> dict[str, Any]:
    """The ``clientCapabilities`` for ``initialize``: exactly what is served.
    ``url_elicitation``: a view can show a link to open (the kernel and the
    magics; a cell where none can declines each request, with a notice)."""
    caps: dict[str, Any] = {
        "fs": {"readTextFile": True, "writeTextFile": True},
        "terminal": True,
        # codex-acp and claude-agent-acp stream a command's output in
        # ``_meta.terminal_output`` only when the client says it reads it
        # (turn.ToolCall.output); without it codex-acp re-sends the whole
        # fenced output on every delta.
        "_meta": {"terminal_output": True},
    }
    if elicitation:
        caps["elicitation"] = {"form": {}, "url": {}} if url_elicitation else {"form": {}}
    if terminal_auth:
        caps["auth"] = {"terminal": True}
    return caps


@dataclass
class Services:
    terminals: TerminalService
    files: FileService
    permissions: PermissionBroker
    elicitation: ElicitationService | None

    def cancel_pending(self, session_id: str) -> int:
        """Answer every pending question of the session ``cancelled`` (turn cancelled).

        Terminals keep running: agents release them themselves on cancel.
        A person's allows from the cancelled turn no longer stand for a
        terminal's question.
        """
        self.permissions.drop_grants(session_id)
        n = self.permissions.cancel_all(session_id)
        if self.elicitation is not None:
            n += self.elicitation.cancel_all(session_id)
        return n

    def end_turn(self, session_id: str) -> int:
        """The session's turn ended: permission questions and pages to open still
        pending are answered ``cancelled`` and one-time allows given in the turn end."""
        n = self.permissions.end_turn(session_id)
        if self.elicitation is not None:
            n += self.elicitation.end_turn(session_id)
        return n

    async def close_session(self, session_id: str) -> None:
        """The session is gone: cancel its questions, end its terminals."""
        self.cancel_pending(session_id)
        self.permissions.forget(session_id)
        if self.elicitation is not None:
            self.elicitation.forget(session_id)
        await self.terminals.release_session(session_id)

    async def shutdown(self) -> None:
        """The connection is closing: no question stays open, no process survives."""
        sids = {p.session_id for p in self.permissions.pending()}
        if self.elicitation is not None:
            sids |= set(self.elicitation.sessions_pending())
        for sid in sids:
            self.cancel_pending(sid)
        await self.terminals.shutdown()


def install(conn: Any, host: Any, *, elicitation: bool = True) -> Services:
    """Register every agent->client request handler on ``conn``.

    One broker asks for files and terminals alike; permission questions and
    forms share one :class:`PendingPrompts`, so ``limits.pending_prompts``
    counts every question a session has open.
    """
    prompts = PendingPrompts()
    broker = PermissionBroker(host, prompts)
    services = Services(
        terminals=TerminalService(host, broker),
        files=FileService(host, broker),
        permissions=broker,
        elicitation=ElicitationService(host, prompts) if elicitation else None,
    )
    services.terminals.register(conn)
    services.files.register(conn)
    broker.register(conn)
    if services.elicitation is not None:
        services.elicitation.register(conn)
    return services
