"""Questions through stdin, for frontends without widgets.

A terminal frontend (``jupyter console``, qtconsole, terminal IPython) cannot
click a button, but it answers ``input_request`` (the kernel's ``raw_input``;
IPython's ``input()``). The dialogs here ask a permission request or a form
through any ``input(prompt) -> str`` callable:

- a permission request shows the agent's title *and* what really runs or is
  touched (code, command line, cwd, env, paths and the rest of ``rawInput``,
  whole), then the options, numbered, in words from their kinds with the
  agent's own name beside; the answer is a number or those words ("allow",
  "always allow", "reject", "always reject"), never the agent's name;
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
import json
import logging
import os
import re
import shlex
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..services.permissions import PAYLOAD_SHOWN, READ_KINDS, Action, code_of, env_pairs, option_label, without_code
from ..termsafe import clean, line
from ..errors import Abandoned  # re-exported: its old home

log = logging.getLogger(__name__)

#: Invalid answers asked again before the question counts as unanswered.
RETRIES = 3
#: What jupyter console sends for Ctrl-D at an input prompt.
EOF_CHAR = "\x04"

Input = Callable[[str], str]


# -- pure: what a permission question shows ------------------------------------

_COMMAND_KEYS = ("command", "cmd", "commandLine", "command_line", "argv", "script", "shell")
_PATH_KEYS = ("path", "file_path", "filePath", "abs_path", "absPath", "paths", "file", "files",
              "notebook_path", "source", "destination", "target", "old_path", "new_path",
              "directory", "dir", "cwd", "url", "uri")
#: Characters of ``rawInput`` shown in all (a huge write's content...); past it an
#: explicit count of what is left out. Commands, code and paths are shown whole.
RAW_INPUT_SHOWN = PAYLOAD_SHOWN


def _argv_text(value: Any, args: Any = None) -> str | None:
    """A command as one shell-quoted line (lists are argvs), or None."""
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return shlex.join(value)
    if isinstance(value, str):
        if isinstance(args, list) and args:
            return shlex.join([value, *(str(a) for a in args)])
        return value
    return None


def action_details(raw_input: Any, locations: Any = None) -> list[tuple[str, str]]:
    """(label, value) pairs naming what an action really runs or touches.

    Read from the tool call's ``rawInput`` (command line, argv, paths, URLs)
    and ``locations``: an agent's title is its own words, these are what
    happens. Values are raw (not cleaned) here; the caller cleans them.
    """
    out: list[tuple[str, str]] = []
    used: set[str] = set()
    if isinstance(raw_input, str):
        out.append(("input", raw_input))
    elif isinstance(raw_input, dict):
        code = code_of(raw_input)
        if code:
            out.append(("code", code))
            if raw_input.get("code") == code:
                used.add("code")
            else:  # nested (an MCP call's arguments): the wrapper's other keys stay shown
                raw_input = without_code(raw_input, code)
        env = raw_input.get("env")
        if isinstance(env, (dict, list)):
            for name, value in env_pairs(env):
                out.append(("env", f"{name}={value}"))
            used.add("env")
        for key in _COMMAND_KEYS:
            text = _argv_text(raw_input.get(key), raw_input.get("args"))
            if text is not None:
                out.append(("command", text))
                used.add(key)
                if key == "command" and isinstance(raw_input.get("args"), list):
                    used.add("args")
        for key in _PATH_KEYS:
            value = raw_input.get(key)
            values = value if isinstance(value, list) else [value]
            texts = [v for v in values if isinstance(v, str)]
            if texts:
                label = "cwd" if key == "cwd" else "url" if key in ("url", "uri") else "path"
                out.extend((label, t) for t in texts)
                used.add(key)
        rest = {k: v for k, v in raw_input.items() if k not in used}
        if rest:
            text = json.dumps(rest, ensure_ascii=False, default=repr)
            if len(text) > RAW_INPUT_SHOWN:
                text = text[:RAW_INPUT_SHOWN] + f"... ({len(text) - RAW_INPUT_SHOWN:,} more characters not shown)"
            out.append(("input" if used else "raw input", text))
    elif raw_input is not None:
        text = json.dumps(raw_input, ensure_ascii=False, default=repr)
        if len(text) > RAW_INPUT_SHOWN:
            text = text[:RAW_INPUT_SHOWN] + f"... ({len(text) - RAW_INPUT_SHOWN:,} more characters not shown)"
        out.append(("raw input", text))
    if isinstance(locations, list):
        for loc in locations:
            path = loc.get("path") if isinstance(loc, dict) else getattr(loc, "path", None)
            if isinstance(path, str) and ("path", path) not in out:
                row = loc.get("line") if isinstance(loc, dict) else getattr(loc, "line", None)
                out.append(("path", path + (f":{row}" if isinstance(row, int) else "")))
    return out


def _field_lines(label: str, value: str) -> list[str]:
    """One detail, cleaned; a multi-line value keeps its lines, each marked."""
    parts = clean(value).split("\n")
    if len(parts) == 1:
        return [f"  {label}: {parts[0]}"]
    return [f"  {label}:"] + [f"    | {p}" for p in parts]


def option_words(opt: dict[str, Any]) -> tuple[str, str]:
    """(our words from the option's kind, the agent's own name for it, or "" when the same)."""
    label = opt.get("label")
    if isinstance(label, str):
        agent = str(opt.get("agentName") or "")
    else:  # not labelled by the broker (a server's own question)
        label, agent = option_label(opt.get("kind"), opt.get("rawKind")), str(opt.get("name") or "")
    return label, "" if agent.strip().casefold() == label.casefold() else agent


def permission_question(prompt: Any, call: Any = None) -> str:
    """The text of a permission question: the agent's title *and* what will
    really run or be touched (``rawInput``, locations: whole), then the
    options in words from their kinds, the agent's name for each beside.

    ``call`` is the turn's :class:`~acp_kernel.client.turn.ToolCall` of the same id,
    whose ``rawInput``/locations count when the request itself carries none.
    """
    tool_call = getattr(getattr(prompt, "request", None), "tool_call", None)
    raw_input = getattr(tool_call, "raw_input", None)
    locations = getattr(tool_call, "locations", None)
    if raw_input is None and call is not None:
        raw_input = call.raw_input
    if not locations and call is not None:
        locations = call.locations
    tcid = getattr(tool_call, "tool_call_id", None)
    lines = [
        "",
        f"[permission] the agent asks: {line(prompt.title or 'permission')}",
        f"  kind: {line(prompt.kind or 'unknown')}" + (f"   tool call: {line(tcid)}" if tcid else ""),
    ]
    details = action_details(raw_input, locations)
    # What the client itself identified (its own questions, e.g. before a terminal runs).
    named = getattr(prompt, "command", "")
    shown = {value for _, value in details}
    shown |= {os.path.normpath(re.sub(r":\d+$", "", v)) for label, v in details if label == "path"}
    derived = Action.of(prompt.kind, raw_input, locations).text()
    if isinstance(named, str) and named and named != derived and named not in shown and not all(
            part in shown for part in named.split("\n")):
        details.append(("action", named))
    cwd = getattr(prompt, "cwd", None)
    if isinstance(cwd, str) and cwd and ("cwd", cwd) not in details:
        details.append(("cwd", cwd))
    for label, value in details:
        lines.extend(_field_lines(label, value))
    if not details:
        lines.append("  (the agent sent no command or path for this, nor code: only its title says what it does)")
    runs = any(label in ("code", "command") for label, _ in details)
    if runs and prompt.kind in READ_KINDS | {"edit", "delete", "move", "switch_mode"}:
        lines.append(f"  note: the agent calls this a {line(repr(prompt.kind))}, but it names code or a command to run")
    for i, opt in enumerate(prompt.options, 1):
        label, agent = option_words(opt)
        row = f"  {i}. {line(label)} [{line(opt.get('kind') or opt.get('rawKind'))}]"
        if agent:
            row += f"   (the agent's words: \u201c{line(agent)}\u201d)"
        lines.append(row)
    return "\n".join(lines) + "\n"


# -- pure: form answers typed on a terminal ---------------------------------------


def parse_answer(schema: dict[str, Any], text: str) -> Any:
    """A typed line as a form value of ``schema``'s kind; raises ValueError.

    Empty means "unset" (the schema's default, if any); choices are picked by
    number or by value; booleans are y/yes/true/1 or n/no/false/0.
    """
    from ..view.form import UNSET, choices, field_kind  # lazy: start-up time (the CLI imports this module)

    text = text.strip()
    kind = field_kind(schema)
    if not text:
        return schema["default"] if "default" in schema else UNSET
    if kind in ("choice", "multi"):
        opts = choices(schema if kind == "choice" else schema["items"]) or []
        picked = []
        for part in text.split(",") if kind == "multi" else [text]:
            part = part.strip()
            if part.isdigit() and 1 <= int(part) <= len(opts):
                picked.append(opts[int(part) - 1][1])
                continue
            match = [v for label, v in opts if part in (label, str(v))]
            if not match:
                raise ValueError(f"choose a number from 1 to {len(opts)}")
            picked.append(match[0])
        return picked if kind == "multi" else picked[0]
    if kind == "boolean":
        low = text.lower()
        if low in ("y", "yes", "true", "1"):
            return True
        if low in ("n", "no", "false", "0"):
            return False
        raise ValueError("answer y or n")
    if kind == "integer":
        try:
            return int(text)
        except ValueError:
            raise ValueError("a whole number is needed") from None
    if kind == "number":
        try:
            value = float(text)
        except ValueError:
            raise ValueError("a number is needed") from None
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError("a finite number is needed")
        return value
    return text


def check_answer(name: str, schema: dict[str, Any], required: bool, text: str) -> tuple[Any, list[str]]:
    """A typed line as the value of one form field, and what is wrong with it
    (nothing: an empty list). Shared by the stdin and the CLI questions."""
    from ..view.form import UNSET, validate  # lazy: start-up time (the CLI imports this module)

    try:
        value = parse_answer(schema, text)
        _, problems = validate({name: schema}, [name] if required else [], {name: value})
    except ValueError as exc:
        return UNSET, [str(exc)]
    return value, problems


def field_question(name: str, schema: dict[str, Any], required: bool) -> str:
    """How one form field is asked: label, kind, description, default, choices."""
    from ..view.form import choices, field_kind, field_label  # lazy: start-up time (the CLI imports this module)

    kind = field_kind(schema)
    head = f"  {line(field_label(name, schema, required))} ({kind})"
    if schema.get("description"):
        head += f": {line(schema['description'])}"
    if "default" in schema:
        head += f" [default: {line(json.dumps(schema['default'], ensure_ascii=False))}]"
    opts = choices(schema if kind != "multi" else schema.get("items") or {}) if kind in ("choice", "multi") else None
    rows = [head]
    for i, (label, _) in enumerate(opts or [], 1):
        rows.append(f"     {i}. {line(label)}")
    hint = "numbers, comma-separated" if kind == "multi" else "a number" if kind == "choice" else "y/n" if kind == "boolean" else ""
    rows.append(f"  > {'(' + hint + ') ' if hint else ''}")
    return "\n".join(rows)


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


#: Words a person may type for an answer, by the option kind they mean.
ANSWER_WORDS = {
    "allow": "allow_once", "allow once": "allow_once", "yes": "allow_once", "y": "allow_once",
    "always allow": "allow_always", "allow always": "allow_always", "always": "allow_always",
    "reject": "reject_once", "no": "reject_once", "n": "reject_once", "deny": "reject_once",
    "always reject": "reject_always", "reject always": "reject_always", "never": "reject_always",
}


def pick_option(options: list[dict[str, Any]], answer: str) -> str | None:
    """The option an answer names: its number, or words for its kind ("allow",
    "always allow", "reject", "always reject"); never the agent's name or id,
    which may say the opposite of the kind. None when nothing matches."""
    text = answer.strip()
    if text.isdigit():
        i = int(text)
        return options[i - 1]["optionId"] if 1 <= i <= len(options) else None
    kind = ANSWER_WORDS.get(" ".join(text.lower().split()))
    for opt in options:
        if kind is not None and opt.get("kind") == kind:
            return opt["optionId"]
    return None


def permission_dialog(prompt: Any, input_fn: Input, call: Any = None, *, retries: int = RETRIES) -> PermissionAnswer:
    """Ask one permission request; ``call`` is the turn's tool call of the
    same id (its rawInput counts when the request carries none)."""
    options = prompt.options
    question = permission_question(prompt, call).lstrip("\n")
    ask = question + f"Choose 1-{len(options)} (empty = reject): "
    for _attempt in range(retries + 1):
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
    from ..view.form import UNSET, validate  # lazy: start-up time (the CLI imports this module)

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
        for _attempt in range(retries + 1):
            text = _read(input_fn, ask)
            if text is None:
                return {"action": "cancel"}
            value, problems = check_answer(name, schema, required, text)
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

        work: asyncio.Future[Any]
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
