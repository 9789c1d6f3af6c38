"""A prompt's way into a passthrough CLI, read off the rendered screen: pure logic.

Typing a prompt and pressing Enter proves nothing: a CLI still starting may
ignore the Enter or empty its input box, a cancel may put the old prompt back
into the box, a slow CLI may read the paste and the Enter as one burst (the
Enter then a newline). So each step is checked on the screen, as a person
would: the input box (the agent's ``input_pattern``) is empty before typing,
shows the text after the paste, and the submit counts once the text has left
the box and the CLI went busy or echoed the prompt above it.

How long to wait for each is scaled to what the CLI shows of its own pace
(:class:`Pace`): on a loaded machine a key's echo can take seconds.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass

#: The least time a step waits to see its effect on the screen (a key's echo, a submit).
CONFIRM_MIN = 3.0
#: Times the slowest echo seen, for the same.
CONFIRM_FACTOR = 8.0
#: The quiet window is at least this many times the slowest echo seen.
QUIET_FACTOR = 3.0
#: A submitted prompt that shows no reply yet (no busy pattern, nothing new) ends its cell
#: only after the screen has been the same this long (or QUIET_FACTOR quiet windows, if longer).
NO_REPLY_QUIET = 15.0
#: Characters of a prompt's first line that identify its echo above the input box.
SAMPLE = 24

_SPACE = re.compile(r"\s+")


def _flat(text: str) -> str:
    return _SPACE.sub(" ", text).strip()


@dataclass(frozen=True)
class InputBox:
    """Where the CLI's input box is on the screen and what it holds (registry data)."""

    pattern: str
    placeholder: str = ""

    def find(self, screen: str) -> re.Match[str] | None:
        """The last match on the screen (the input box sits below the transcript)."""
        found = None
        for found in re.finditer(self.pattern, screen, re.MULTILINE):  # noqa: B007 - the last one
            continue
        return found

    def raw(self, screen: str) -> str | None:
        """The box's rows as drawn (a change of them is a key's effect), None: no box."""
        found = self.find(screen)
        if found is None:
            return None
        return (found.group(1) if found.re.groups else found.group(0)) or ""

    def text(self, screen: str) -> str | None:
        """What is typed in the box (each line stripped, blank lines dropped), "" when
        it is empty or shows its placeholder, None when no box is on the screen."""
        raw = self.raw(screen)
        if raw is None:
            return None
        lines = [ln.strip() for ln in raw.splitlines() if ln.strip()]
        typed = "\n".join(lines)
        if self.placeholder and re.fullmatch(self.placeholder, _flat(typed)):
            return ""
        return typed

    def outside(self, screen: str) -> str:
        """The screen without the input box (to look for the prompt's echo)."""
        found = self.find(screen)
        return screen if found is None else screen[:found.start()] + screen[found.end():]


#: A dialog box's frame: its borders and rules, left out of the dialog's text.
_FRAME = "│┃║╭╮╰╯┌┐└┘─━═ "


def dialog_text(screen: str, pattern: str) -> str:
    """The question a CLI asks in its own TUI (the last match of its ``dialog_pattern``;
    group 1, else the whole match), without the box's frame and blank lines; "" none."""
    if not pattern:
        return ""
    found = None
    for found in re.finditer(pattern, screen, re.MULTILINE):  # noqa: B007 - the last one
        continue
    if found is None:
        return ""
    raw = (found.group(1) if found.re.groups else found.group(0)) or ""
    lines = (line.strip(_FRAME) for line in raw.splitlines())
    return "\n".join(line for line in lines if line)


_NOT_WORD = re.compile(r"[\W_]+")


def words(text: str) -> str:
    """The text's words only (a box may draw a line break as ``⏎`` or wrap with indents)."""
    return _NOT_WORD.sub(" ", text).strip()


def extra(held: str, prompt: str) -> str:
    """The words of an input box holding ``held`` when it shows more than ``prompt`` ("" when
    it shows the prompt, a part of it, or nothing of it, e.g. a CLI's "[Pasted text]" summary)."""
    h, want = words(held), words(prompt)
    if not h or h in want or words(sample(prompt)) not in h:
        return ""
    return h


def sample(prompt: str) -> str:
    """The start of the prompt's first non-blank line, spaces made one."""
    for line in prompt.splitlines():
        if line.strip():
            return _flat(line)[:SAMPLE]
    return ""


def echoes(lines: list[str] | tuple[str, ...], prompt: str) -> int:
    """How many of ``lines`` show the start of ``prompt`` (its echo in a transcript)."""
    want = sample(prompt)
    return sum(want in _flat(line) for line in lines) if want else 0


class Pace:
    """How fast the CLI shows what it is sent: the time from a key written to the
    next change of the screen, the slowest of the last few. Waits scale with it,
    so a loaded machine gets longer windows and an idle one keeps them short."""

    def __init__(self, idle_seconds: float, keep: int = 5) -> None:
        self.idle_seconds = idle_seconds
        self._seen: deque[float] = deque(maxlen=keep)

    def observe(self, seconds: float) -> None:
        if seconds >= 0:
            self._seen.append(seconds)

    @property
    def latency(self) -> float:
        return max(self._seen, default=0.0)

    def quiet(self) -> float:
        """The screen unchanged this long (and not busy): ready, or the reply has ended."""
        return max(self.idle_seconds, QUIET_FACTOR * self.latency)

    def confirm(self) -> float:
        """How long a step waits to see its effect before it counts as not taken."""
        return max(CONFIRM_MIN, CONFIRM_FACTOR * self.latency, 2 * self.quiet())

    def no_reply_quiet(self) -> float:
        return max(NO_REPLY_QUIET, QUIET_FACTOR * self.quiet())
