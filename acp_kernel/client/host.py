"""The seam between the client services and the session layer.

Services (terminals, files, permissions, elicitation) answer agent->client
requests. They never import the session module: they see a :class:`Host`
that maps a ``sessionId`` to a :class:`SessionContext`. The real one is the
client; tests plug in a small fake right here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

PermissionPolicy = Literal["ask", "allow-reads", "allow-all", "deny"]
POLICIES: tuple[str, ...] = ("ask", "allow-reads", "allow-all", "deny")


@dataclass
class Limits:
    """Bounds on what an agent can make the client hold or wait for.

    Each is enforced where the resource is handed out (the service edge),
    with a JSON-RPC error naming the limit and a notice in the cell. Change
    them under ``"limits"`` in the config file.
    """

    #: Live (not yet released) terminals one session may hold.
    terminals_per_session: int = 16
    #: The largest ``outputByteLimit`` an agent may ask for (larger asks are capped).
    max_output_byte_limit: int = 16 * 1024 * 1024
    #: Bytes one ``fs/read_text_file`` may return; larger files are refused.
    file_read_bytes: int = 8 * 1024 * 1024
    #: Bytes one ``fs/read_text_file`` with ``line`` may read past to reach its
    #: first line (streamed, not kept); a start further in is refused.
    file_scan_bytes: int = 256 * 1024 * 1024
    #: Permission (and form) questions that may wait for an answer at once, per session.
    pending_prompts: int = 8
    #: Updates kept for session ids the client does not know (yet).
    unknown_session_updates: int = 1000
    #: Deepest JSON nesting accepted in one message from the agent.
    json_depth: int = 64
    #: Characters of a tool call's command output kept (``_meta.terminal_output``,
    #: ``rawOutput``): the last ones; the count of the rest is kept.
    tool_output_chars: int = 256 * 1024
    #: Finished turns whose every event is kept; older turns keep only their
    #: final text and tool-call state.
    detailed_turns: int = 4
    #: Bytes queued for the agent's stdin before writes wait (backpressure).
    write_buffer_bytes: int = 4 * 1024 * 1024
    #: How long a write may wait on an agent that stopped reading its stdin.
    write_stall_seconds: float = 30.0
    #: Timeout for ``initialize`` (generous: ``npx`` may download the agent first).
    initialize_seconds: float = 180.0
    #: Timeout for every other request that is not ``session/prompt``.
    request_seconds: float = 60.0
    #: After ``session/load`` answers, how long the agent's history replay must
    #: stay quiet before the load counts as done (Gemini CLI answers first and
    #: replays after); waited at most ``request_seconds`` in all.
    replay_quiet_seconds: float = 0.5
    #: How long ``session/close`` may take (``%new``, another agent, shutdown, the
    #: CLI's end): short, so shutting down never waits long on an agent.
    close_seconds: float = 2.0


LIMIT_NAMES: tuple[str, ...] = tuple(Limits.__dataclass_fields__)


@dataclass
class ClientSettings:
    """What the user chose for how the client serves the agent."""

    permissions: PermissionPolicy = "ask"
    #: Run ``terminal/create`` requests that pack a shell line into ``command``
    #: (no ``args``) through the shell, as real agents need. False = strict.
    shell_fallback: bool = True
    #: Workspace roots besides the cwd for new sessions (config ``extra_roots``,
    #: ``%cwd add``): sent as ``additionalDirectories`` to an agent that takes them.
    extra_roots: list[str] = field(default_factory=list)
    #: Default ``outputByteLimit`` when the agent gives none.
    terminal_output_limit: int = 1024 * 1024
    #: Can this client run an agent's ``terminal`` login method in a terminal
    #: the user sees (the ACP kernel can: a passthrough terminal)?
    terminal_auth: bool = False
    #: Can this client show the agent's pages to open (URL-mode elicitation)?
    #: The kernel and the magics can (the turn widget); the CLI cannot.
    url_elicitation: bool = False
    #: What an agent can make the client hold or wait for.
    limits: Limits = field(default_factory=Limits)
    #: The notebooks open in this client's front-end (absolute paths): an agent's
    #: ``fs/write_text_file`` to one is refused (the editor holds the document).
    open_notebooks: Callable[[], list[str]] = field(default=list)


class SessionContext(Protocol):
    """One ACP session as services see it."""

    id: str
    cwd: str
    #: The other workspace roots the agent was given (``additionalDirectories``):
    #: with ``cwd``, exactly the roots the file policy treats as inside.
    additional_directories: list[str]
    settings: ClientSettings
    #: True while someone (a widget, a terminal prompt) can answer a question.
    interactive: bool
    #: True while the cell's view can show a page to open, opened on a click
    #: (the notebook's turn widget; not a console, nbclient or the CLI).
    links: bool

    def emit(self, event: Any) -> None:
        """Add an event to the current turn (or the session log between turns)."""
        ...

    def tool_call_kind(self, tool_call_id: str) -> str | None:
        """The kind announced for a tool call, if any (permission requests may omit it)."""
        ...

    def tool_call_input(self, tool_call_id: str) -> tuple[Any, Any]:
        """The ``rawInput`` and ``content`` announced for a tool call, (None, None)
        if unknown (a permission request may carry neither)."""
        ...


class Host(Protocol):
    def session_context(self, session_id: Any) -> SessionContext:
        """The session, or raise ``RpcError(INVALID_PARAMS, ...)`` naming the bad id."""
        ...
