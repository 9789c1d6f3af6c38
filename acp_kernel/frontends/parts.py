"""The :class:`~acp_kernel.client.parts.Parts` every front-end hands its controllers."""

from __future__ import annotations

import io
from typing import Any

from .. import notebook_mcp
from ..client.parts import Parts
from ..client.registry import AgentSpec, Config
from ..client.session import Session
from ..client.turn import Turn
from ..passthrough import ptycell
from ..safe import Markdown
from ..view import plaintext, transcript, view_for
from . import cli


class FrontendParts:
    """The package's own view, notebook MCP server, passthrough terminals and agents listing."""

    def message(self, md: Markdown, plain_text: Any = None) -> dict[str, Any]:
        return plaintext.message(md, plain_text)

    def view_for(self, turn: Turn, sink: Any, *, session: Session, rate_hz: float, widgets: bool,
                 frontend: Any, asker: Any) -> Any:
        return view_for(turn, sink, session=session, rate_hz=rate_hz, widgets=widgets,
                        frontend=frontend, asker=asker)

    def auth_markdown(self, methods: list[dict[str, Any]], program: list[str]) -> Markdown:
        return transcript.auth_markdown(methods, program)

    def offer_notebook(self, bridge: Any) -> dict[str, Any] | None:
        return notebook_mcp.offer(bridge)

    def withdraw_notebook(self, entry: dict[str, Any]) -> None:
        notebook_mcp.withdraw(entry)

    def notebook_started(self, entry: dict[str, Any]) -> bool:
        return notebook_mcp.started(entry)

    def resolve_terminal(self, words: list[str], config: Config, current: AgentSpec | None) -> Any:
        return ptycell.resolve(words, config, current)

    def login_target(self, spec: AgentSpec, method: dict[str, Any]) -> Any:
        return ptycell.login_target(spec, method)

    def opened_markdown(self, terminal: Any) -> Markdown:
        return ptycell.opened_markdown(terminal)

    def outcome_markdown(self, terminal: Any, reply: Any) -> Markdown | None:
        return ptycell.outcome_markdown(terminal, reply)

    async def reopen_terminal(self, terminals: Any, name: str, last_prompt: str, prompt: str,
                              config: Config, cwd: str) -> Any:
        return await ptycell.reopen(terminals, name, last_prompt, prompt, config, cwd)

    def resumed_reply(self, prompt: str, screen: str) -> Any:
        from ..passthrough.manager import Reply  # lazy: start-up time (the PTY side loads with its first use)

        return Reply(prompt, "", "idle", screen=screen, detail="resumed; typed before the restart", sent=False)

    def list_agents(self) -> tuple[str, bool]:
        out = io.StringIO()
        failed = cli.run_agents(out, out)
        return out.getvalue(), bool(failed)


#: The one every front-end passes (stateless).
PARTS: Parts = FrontendParts()
