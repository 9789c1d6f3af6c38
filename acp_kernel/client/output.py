"""The controller's own lines in the cell: messages, progress lines, the status list.

Kept apart from what the lines are about, so the agent's lifecycle, the
verbs and the passthrough route all say things the same way, and a front-end
that prints instead of displaying only has to give another :class:`Frontend`.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any, Callable

from ..safe import Markdown, block, bundle, code, text
from .frontend import Frontend, Shows
from .notebook import NOTEBOOK_TOOLS
from .parts import Parts
from .session import absolute_roots

if TYPE_CHECKING:  # pragma: no cover
    from .lifecycle import Lifecycle


class Output:
    """Messages and progress lines in the running cell."""

    def __init__(self, frontend: Frontend, parts: Parts) -> None:
        self.frontend = frontend
        self.parts = parts
        #: Why the config file was not read; said once, before anything runs.
        self.config_error: str | None = None

    def say(self, md: Markdown, plain_text: Any = None) -> None:
        """A message in the cell (``md`` from our templates, agent strings
        escaped); its text/plain is the rendered text (a console prints it),
        not the markdown source with its escapes."""
        self.frontend.sink().display(self.parts.message(md, plain_text))

    def progress(self, md: Markdown) -> Callable[[], None]:
        """A line shown while something slow runs; the returned callable
        blanks it where the frontend applies updates (a console would print
        the blank again)."""
        sink = self.frontend.sink()
        display_id = f"acp-progress-{uuid.uuid4().hex[:12]}"
        sink.display(self.parts.message(md), display_id=display_id)
        if not self.shows().updates:
            return lambda: None
        return lambda: sink.update(bundle(Markdown(""), ""), display_id=display_id)

    def shows(self) -> Shows:
        """What the cell's frontend shows (widgets, in-place updates, who answers)."""
        return self.frontend.frontend()

    def notes(self) -> None:
        """Say once what the user should know before anything runs."""
        if self.config_error:
            self.say(Markdown("**Configuration problem** (built-in agents only until it is fixed):\n\n")
                     + block(self.config_error))
            self.config_error = None


def status_lines(life: Lifecycle, name: Markdown, pty_target: str | None) -> list[Markdown]:
    """``%status``: the agent, its process, the session and what was chosen for it."""
    M = Markdown
    spec, client, session = life.spec, life.client, life.session
    lines = [M("- agent: {} ({})").format(name, code(" ".join(spec.command)))]
    if client is not None and client.alive:
        info = client.agent_info
        lines.append(M("- running: {} {}, pid {}").format(
            text(str(info.get("title") or info.get("name") or "?")), text(str(info.get("version") or "")),
            str(client.transport.pid if client.transport else "?")))
    else:
        lines.append(M("- not running (starts with the next prompt)"))
    if session is not None:
        lines.append(M("- session: {} in {}").format(code(session.id), code(session.cwd)))
        if session.current_mode:
            lines.append(M("- mode: {}").format(code(session.current_mode)))
        model = session.current_model
        if model:
            lines.append(M("- model: {}").format(code(model)))
        if session.usage:
            lines.append(M("- usage: {}/{} tokens").format(
                text(str(session.usage.get("used"))), text(str(session.usage.get("size")))))
    if pty_target is not None:
        lines.append(M("- prompts go to the passthrough terminal {}").format(code(pty_target)))
    lines.append(M("- permissions: {}").format(text(life.settings.permissions)))
    offered = life.notebook_tools()
    if offered is not None:
        tools = [t for t in NOTEBOOK_TOOLS if t in offered]
        line = M("- notebook MCP server: {}").format(text(", ".join(tools) or "no tools"))
        if life.notebook_started():
            line += M(" (the agent started it)")
        elif client is not None and client.alive:
            line += M(" offered; the agent has not started it (yet)")
            if spec.mcp_note:
                line += M(": {}").format(text(spec.mcp_note))
        lines.append(line)
    elif not life.notebook_mcp:
        lines.append(M("- notebook MCP server: off"))
    lines.append(M("- working directory: {}").format(code(life.cwd)))
    lines += roots_lines(life.settings.extra_roots, session, client)
    return lines


def roots_lines(wanted: list[str], session: Any, client: Any) -> list[Markdown]:
    """The workspace roots besides the cwd: those the session's agent was given
    (the file policy's), and those it was not (yet, or ever)."""
    M, given = Markdown, session.additional_directories if session is not None else []
    lines = [M("- additional directories: {}").format(M(", ").join(code(r) for r in given))] if given else []
    left = [r for r in absolute_roots(wanted) if r not in given]
    if left:
        why = ("the agent takes none" if client is not None and client.alive and not client.can("additionalDirectories")
               else "for new sessions")
        lines.append(M("- additional directories not given to the agent ({}): {}").format(
            text(why), M(", ").join(code(r) for r in left)))
    return lines
