"""One passthrough cell's own exchange, as text: the prompt typed and the reply.

A prompt cell shows the live terminal while it is the newest one; once the
session moves on, its output becomes this text (markdown and text/plain), so
every cell keeps what it asked and what came back, and a saved notebook holds
it for readers without widgets. The reply is what the terminal showed (the
emulated screen where the passthrough layer has one). Pure: no widgets, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..safe import Markdown, Plain, block, bundle, code, plain, text

#: Longest reply kept as text in a cell (the terminal itself keeps more).
REPLY_CHARS = 64 * 1024

_OUTCOMES = {"interrupted": "interrupted", "exited": "the program exited", "error": "not sent"}


@dataclass
class Exchange:
    """What one cell typed into a terminal and what it got back (``outcome`` is empty while it runs)."""

    name: str
    prompt: str
    reply: str = ""
    outcome: str = ""
    #: A question the program asks in its own terminal meanwhile (its dialog's text; "" none).
    asking: str = ""

    @property
    def done(self) -> bool:
        return bool(self.outcome)

    def _reply(self) -> str:
        text = self.reply.strip("\n")
        return text if len(text) <= REPLY_CHARS else "…" + text[-REPLY_CHARS:]

    def _note(self) -> str:
        if not self.done:
            return "waiting for the reply"
        return _OUTCOMES.get(self.outcome, "")

    def markdown(self) -> Markdown:
        parts = [Markdown("Typed into {}:").format(code(self.name)), block(self.prompt)]
        reply = self._reply()
        if reply:
            parts += [Markdown("Reply:"), block(reply)]
        note = self._note()
        if note:
            parts.append(Markdown("*{}*").format(text(note)))
        if self.asking and not self.done:
            parts += [Markdown("**{} asks in its own terminal; answer it there (the cell waits for the answer):**")
                      .format(code(self.name)), block(self.asking)]
        return Markdown("\n\n").join(parts)

    def plain(self) -> Plain:
        lines = self.prompt.split("\n")
        text = "\n".join([f"› {lines[0]}", *(f"  {line}" for line in lines[1:])])
        reply = self._reply()
        if reply:
            text += "\n\n" + reply
        note = self._note()
        if note:
            text += f"\n\n({note})"
        if self.asking and not self.done:
            text += f"\n\n{self.name} asks in its own terminal; answer it there (the cell waits for the answer):\n"
            text += self.asking
        return plain(text)

    def bundle(self, extra: dict | None = None) -> dict:
        return bundle(self.markdown(), self.plain(), extra=extra)


def screen_bundle(name: str, screen: str, status: str) -> dict:
    """What a terminal's output becomes once a later cell shows it: its screen at that moment."""
    head = Markdown("Terminal {} ({}):").format(code(name), text(status))
    shown = screen.strip("\n")
    md = head + (Markdown("\n\n") + block(shown) if shown else Markdown(""))
    return bundle(md, plain(f"[terminal {name} ({status})]\n{shown}".rstrip("\n")))
