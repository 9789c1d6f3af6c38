"""Where the ACP kernel's prompts go: the agent over ACP, or a passthrough terminal.

``%passthrough`` sends the next cells to a terminal running an agent's own
CLI until ``%passthrough off``. This is that choice and what a kernel
restart needs to take it up again (the CLI's name and the last prompt typed
into it), kept in the notebook's remembered state by
:class:`~acp_kernel.client.lifecycle.Lifecycle`. The terminals themselves
live above the client layer (:mod:`acp_kernel.passthrough`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Route:
    """The passthrough terminal that takes prompts now, if any."""

    #: While set, prompts are typed into this terminal.
    target: str | None = None
    #: The agent whose CLI ``target`` runs ("" for a ``--command`` terminal).
    agent: str = ""
    #: The last prompt typed into it (remembered for a resume).
    prompt: str = ""
    #: After a restart: (agent, last prompt) to reopen on the next prompt.
    resume: tuple[str, str] | None = None

    def remembered(self) -> tuple[str, str]:
        """(agent, last prompt) to keep across a restart; empty when prompts go over ACP."""
        return (self.agent, self.prompt) if self.target else ("", "")

    def restore(self, agent: str, prompt: str) -> None:
        """Cells went to the agent's own CLI before the restart: they still do
        (the CLI starts again with the next prompt)."""
        self.target = self.agent = agent
        self.prompt = prompt
        self.resume = (agent, prompt)

    def opened(self, name: str, agent: str) -> None:
        self.target, self.agent = name, agent
        self.prompt, self.resume = "", None

    def off(self) -> None:
        self.target = None

    def reopens(self, name: str) -> str | None:
        """The last prompt typed into ``name`` before a restart when it is to be
        reopened now (once), else None."""
        if self.resume is None or self.resume[0] != name:
            return None
        last = self.resume[1]
        self.resume = None
        return last

    def typed(self, name: str, prompt: str) -> bool:
        """A prompt went into terminal ``name``; True when it is worth remembering."""
        if name != self.target or not self.agent:
            return False
        self.prompt = prompt
        return True
