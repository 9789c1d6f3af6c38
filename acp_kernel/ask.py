"""Questions through stdin, for frontends without widgets.

A terminal frontend (``jupyter console``, qtconsole, terminal IPython) cannot
click a button, but it answers ``input_request`` (the kernel's ``raw_input``;
IPython's ``input()``). The dialogs here ask a permission request or a form
through any ``input(prompt) -> str`` callable:

- a permission request shows the agent's title *and* what really runs or is
  touched (the command or paths from ``rawInput``, as the CLI shows them),
  then the options, numbered; the answer is a number or an option's name;
- a form asks whether to answer it, then each field (choices by number);
- end of input (``EOFError``, or jupyter console's ``\\x04``) or an empty
  answer rejects (a permission) or cancels/declines (a form); an invalid
  answer is asked again, at most ``RETRIES`` times, then it counts as empty.

Every string from the agent is cleaned for a terminal (:mod:`.termsafe`)
before it is part of a prompt. The dialogs are pure (tested with a list of
answers); :class:`StdinQuestions` runs them one at a time off the event
loop (``input`` blocks) and stops waiting when the question is answered
elsewhere (a cancelled turn).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .cli import field_question, parse_answer, permission_question
from .termsafe import line
from .view.form import UNSET, validate

log = logging.getLogger(__name__)

#: Invalid answers asked again before the question counts as unanswered.
RETRIES = 3
#: What jupyter console sends for Ctrl-D at an input prompt.
EOF_CHAR = "\x04"

Input = Callable[[str], str]


class Abandoned(Exception):
    """The question was answered elsewhere while the person was asked."""


def _read(input_fn: Input, prompt: str) -> str | None:
    """One answer, or None at end of input."""
    try:
        answer = input_fn(prompt)
    except EOFError:
        return None
    if answer is None or EOF_CHAR in answer:
        return None
    return answer


@dataclass
class PermissionAnswer:
    """The outcome of a permission dialog: an option id, or None (reject)."""

    option_id: str | None
    #: What to tell the person afterwards (one line).
    note: str


def pick_option(options: list[dict[str, Any]], answer: str) -> str | None:
    """The option an answer names: its number, its id or its name (any case); else None."""
    text = answer.strip()
    if text.isdigit():
        i = int(text)
        return options[i - 1]["optionId"] if 1 <= i <= len(options) else None
    low = text.lower()
    for opt in options:
        if low in (str(opt.get("optionId", "")).lower(), str(opt.get("name", "")).lower()):
            return opt["optionId"]
    return None


def permission_dialog(prompt: Any, input_fn: Input, call: Any = None, *, retries: int = RETRIES) -> PermissionAnswer:
    """Ask one permission request; ``call`` is the turn's tool call of the
    same id (its rawInput counts when the request carries none)."""
    options = prompt.options
    question = permission_question(prompt, call).lstrip("\n")
    ask = question + f"Choose 1-{len(options)} (empty = reject): "
    for attempt in range(retries + 1):
        answer = _read(input_fn, ask)
        if answer is None:
            return PermissionAnswer(None, "end of input: rejected")
        if not answer.strip():
            return PermissionAnswer(None, "no answer: rejected")
        picked = pick_option(options, answer)
        if picked is not None:
            return PermissionAnswer(picked, "")
        ask = f"{line(answer)!s} is not one of the options. Choose 1-{len(options)} (empty = reject): "
    return PermissionAnswer(None, "no valid answer: rejected")


def form_dialog(prompt: Any, input_fn: Input, *, retries: int = RETRIES) -> dict[str, Any]:
    """Ask one form; returns the outcome to send (``{"action": ...}``)."""
    head = f"The agent asks: {line(prompt.message)}\n"
    if prompt.fields:
        head += "Fields: " + ", ".join(line(n) + ("*" if n in prompt.required else "") for n in prompt.fields) + "\n"
    first = _read(input_fn, head + "Answer it? [y/N] ")
    if first is None:
        return {"action": "cancel"}
    if first.strip().lower() not in ("y", "yes"):
        return {"action": "decline"}
    values: dict[str, Any] = {}
    for name, schema in prompt.fields.items():
        required = name in prompt.required
        ask = field_question(name, schema, required).lstrip() + " "
        for attempt in range(retries + 1):
            text = _read(input_fn, ask)
            if text is None:
                return {"action": "cancel"}
            try:
                value = parse_answer(schema, text)
                _, problems = validate({name: schema}, [name] if required else [], {name: value})
            except ValueError as exc:
                problems = [str(exc)]
            if not problems:
                break
            ask = "  ! " + line("; ".join(problems)) + "\n" + field_question(name, schema, required).lstrip() + " "
        else:
            return {"action": "decline"}
        if value is not UNSET:
            values[name] = value
    content, problems = validate(prompt.fields, prompt.required, values)
    if problems:  # cannot happen field by field; never send a bad answer
        return {"action": "decline"}
    return {"action": "accept", "content": content}


def apply_form_outcome(prompt: Any, outcome: dict[str, Any]) -> None:
    action = outcome.get("action")
    if action == "accept":
        try:
            prompt.accept(outcome.get("content", {}))
        except ValueError:
            prompt.decline()
    elif action == "decline":
        prompt.decline()
    else:
        prompt.cancel()


def is_permission(prompt: Any) -> bool:
    return type(prompt).__name__ == "PermissionPrompt"


class StdinQuestions:
    """Asks the prompts it is given, one at a time, through ``read``.

    ``read(prompt_text, stop)`` blocks until a line is typed and returns it,
    raises ``EOFError`` at end of input, or raises :class:`Abandoned` soon
    after ``stop`` (a :class:`threading.Event`) is set. It runs in a worker
    thread. A plain ``input`` works too (``StdinQuestions.from_input``),
    except that it cannot stop waiting early.
    """

    def __init__(self, read: Callable[[str, threading.Event], str]) -> None:
        self.read = read
        self._queue: list[tuple[Any, Any]] = []
        self._task: asyncio.Task[None] | None = None
        self.asked = 0

    @classmethod
    def from_input(cls, input_fn: Input) -> StdinQuestions:
        def read(prompt: str, stop: threading.Event) -> str:
            if stop.is_set():
                raise Abandoned
            return input_fn(prompt)

        return cls(read)

    def __call__(self, prompt: Any, call: Any = None) -> None:
        """Queue a question (loop thread); it is asked when the ones before
        are done. Any other event is ignored, so this can also listen to a
        whole turn (``turn.subscribe``)."""
        if type(prompt).__name__ not in ("PermissionPrompt", "ElicitationPrompt"):
            return
        self._queue.append((prompt, call))
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._work())

    async def wait(self) -> None:
        """Until every queued question is settled."""
        while self._task is not None and not self._task.done():
            await asyncio.shield(self._task)

    def close(self) -> None:
        """Stop asking: the questions left are cancelled."""
        if self._task is not None:
            self._task.cancel()
        for prompt, _ in self._queue:
            prompt.cancel()
        self._queue.clear()

    async def _work(self) -> None:
        while self._queue:
            prompt, call = self._queue.pop(0)
            if prompt.done:
                continue
            try:
                await self._ask(prompt, call)
            except Exception:  # noqa: BLE001 - a broken frontend must not leave the agent waiting
                log.exception("asking through stdin failed")
            finally:
                if not prompt.done:
                    prompt.cancel()

    async def _ask(self, prompt: Any, call: Any) -> None:
        stop = threading.Event()

        def input_fn(text: str) -> str:
            return self.read(text, stop)

        if is_permission(prompt):
            work = asyncio.ensure_future(asyncio.to_thread(permission_dialog, prompt, input_fn, call))
        else:
            work = asyncio.ensure_future(asyncio.to_thread(form_dialog, prompt, input_fn))
        self.asked += 1
        try:
            await asyncio.wait({work, prompt.future}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.set()
        if prompt.done or not work.done():
            # Answered elsewhere (a cancel): the reader stops soon; don't wait for a person.
            work.add_done_callback(lambda f: f.cancelled() or f.exception())
            return
        exc = work.exception()
        if isinstance(exc, Abandoned):
            return
        if exc is not None:
            raise exc
        result = work.result()
        if isinstance(result, PermissionAnswer):
            if result.option_id is None:
                prompt.reject()
            else:
                prompt.answer(result.option_id)
        else:
            apply_form_outcome(prompt, result)
