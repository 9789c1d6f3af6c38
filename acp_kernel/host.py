"""The seam between the client services and the session layer.

Services (terminals, files, permissions, elicitation) answer agent->client
requests. They never import the session module: they see a :class:`Host`
that maps a ``sessionId`` to a :class:`SessionContext`. The real one is the
client; tests plug in a small fake right here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

PermissionPolicy = Literal["ask", "allow-reads", "allow-all", "deny"]
POLICIES: tuple[str, ...] = ("ask", "allow-reads", "allow-all", "deny")


@dataclass
class ClientSettings:
    """What the user chose for how the client serves the agent."""

    permissions: PermissionPolicy = "ask"
    #: Run ``terminal/create`` requests that pack a shell line into ``command``
    #: (no ``args``) through the shell, as real agents need. False = strict.
    shell_fallback: bool = True
    #: Extra directories (besides each session's cwd) the agent may use.
    extra_roots: list[str] = field(default_factory=list)
    #: Default ``outputByteLimit`` when the agent gives none.
    terminal_output_limit: int = 1024 * 1024
    #: Can this client run an agent's ``terminal`` login method in a terminal
    #: the user sees (the ACP kernel can: a passthrough terminal)?
    terminal_auth: bool = False


class SessionContext(Protocol):
    """One ACP session as services see it."""

    id: str
    cwd: str
    settings: ClientSettings
    #: True while someone (a widget, a terminal prompt) can answer a question.
    interactive: bool

    def emit(self, event: Any) -> None:
        """Add an event to the current turn (or the session log between turns)."""
        ...

    def tool_call_kind(self, tool_call_id: str) -> str | None:
        """The kind announced for a tool call, if any (permission requests may omit it)."""
        ...


class Host(Protocol):
    def session_context(self, session_id: Any) -> SessionContext:
        """The session, or raise ``RpcError(INVALID_PARAMS, ...)`` naming the bad id."""
        ...
