"""What the controller uses from the layers above the client, passed in.

The client layer imports nothing above it (the import-linter contracts in
``pyproject.toml``). The controller still shows turns, offers the notebook MCP
server, opens passthrough terminals and lists agents: a front-end hands it a
:class:`Parts` (every front-end passes :data:`acp_kernel.frontends.parts.PARTS`;
a test may pass its own).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from ..safe import Markdown

if TYPE_CHECKING:  # pragma: no cover
    from .registry import AgentSpec, Config
    from .session import Session
    from .turn import Turn


class Terminals(Protocol):
    """The front-end's passthrough terminals by name
    (:class:`~acp_kernel.passthrough.ptycell.Terminals`): each a panel whose
    ``terminal`` runs a CLI under a PTY."""

    @property
    def panels(self) -> Mapping[str, Any]: ...

    def open(self, target: Any, cwd: str, *, reuse: bool = True) -> Any:
        """Start ``target`` in a terminal (or take the running one); its panel."""
        ...

    def get(self, name: str) -> Any:
        """The panel of terminal ``name``; ``PassthroughError`` when there is none."""
        ...

    async def prompt(self, name: str, prompt: str, sink: Any) -> Any:
        """Type ``prompt`` into terminal ``name`` shown in this cell; the ``Reply``."""
        ...

    async def close(self, name: str) -> None: ...

    def note(self, name: str) -> Markdown | None:
        """Why the notebook MCP server is off for this terminal, if it is."""
        ...

    def listing(self) -> Markdown: ...


class Parts(Protocol):
    """The view, the notebook MCP server, passthrough terminals and the agents listing."""

    # -- the view ---------------------------------------------------------------

    def message(self, md: Markdown, plain_text: Any = None) -> dict[str, Any]:
        """A display bundle: ``md`` and its rendered text as ``text/plain``."""
        ...

    def view_for(self, turn: Turn, sink: Any, *, session: Session, rate_hz: float, widgets: bool,
                 frontend: Any, asker: Any) -> Any:
        """The live view of ``turn`` in this cell (closed with ``view.close()``)."""
        ...

    def auth_markdown(self, methods: list[dict[str, Any]], program: list[str]) -> Markdown:
        """An agent's ``authMethods`` as a list a person can read."""
        ...

    # -- the notebook MCP server --------------------------------------------------

    def offer_notebook(self, bridge: Any) -> dict[str, Any] | None:
        """Register ``bridge``; the ``McpServerStdio`` entry for the agent, or None outside a kernel."""
        ...

    def withdraw_notebook(self, entry: dict[str, Any]) -> None:
        ...

    def notebook_started(self, entry: dict[str, Any]) -> bool:
        """Whether the agent started a server from ``entry`` (it connected at least once)."""
        ...

    # -- passthrough terminals ------------------------------------------------------

    def resolve_terminal(self, words: list[str], config: Config, current: AgentSpec | None) -> Any:
        """The terminal target ``%passthrough WORDS`` names."""
        ...

    def login_target(self, spec: AgentSpec, method: dict[str, Any]) -> Any:
        """The terminal target that runs an agent's terminal login."""
        ...

    def opened_markdown(self, terminal: Any) -> Markdown:
        ...

    def outcome_markdown(self, terminal: Any, reply: Any) -> Markdown | None:
        ...

    async def reopen_terminal(self, terminals: Terminals, name: str, last_prompt: str, prompt: str,
                              config: Config, cwd: str) -> Any:
        """After a kernel restart: the remembered CLI again (a ``Reopened``)."""
        ...

    def resumed_reply(self, prompt: str, screen: str) -> Any:
        """The reply of a prompt that was typed before the restart (not typed again)."""
        ...

    # -- the CLI --------------------------------------------------------------------

    def list_agents(self) -> tuple[str, bool]:
        """``acp-kernel agents``' text, and whether it failed."""
        ...
