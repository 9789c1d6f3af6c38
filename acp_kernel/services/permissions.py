"""Answering ``session/request_permission``: policy first, then the person.

Options are agent data. They are chosen by their ``kind`` (allow_once,
allow_always, reject_once, reject_always), never by id or name: real agents
name them ``allow``, ``allow-once``, ``approve``, ``proceed_once``, ``abort``,
``reject``... and a hostile one may name an ``allow_once`` option "Reject".
So a shown option's words come from its kind (:func:`option_label`), the
agent's name stands beside them as its wording, and a request whose option
ids repeat is malformed: refused (JSON-RPC ``-32602``) with a notice, never
answered by "the first match".

What a question shows is the payload that will run (:class:`Action`, from
``rawInput`` and ``locations``: code, command line, cwd, env, paths and the
rest of the input), whole (:meth:`Action.text`): the agent's title and kind
are its own words. A request with no ``rawInput`` is read through the input
its tool call announced earlier (its ``rawInput``, or its content text when
that is one JSON object: Kimi streams an MCP call's arguments so) or through
its own content text (Gemini CLI sends an MCP call's arguments as JSON text)
(:func:`request_input`); the question says so. What was read is all that a
grant covers, so a wrong reading can only cost a second question.

Policies (``ClientSettings.permissions``):

- ``ask``: the UI decides (a :class:`PermissionPrompt` event);
- ``allow-reads``: tool kinds read, search, fetch and think are allowed, the
  rest asked;
- ``allow-all``: allowed (the agent still gets told which option);
- ``deny``: rejected.

A grant covers what was shown, and only for its action class:

- An ``allow_always``/``reject_always`` answer from the person is remembered
  for the session, keyed by (action class, command line, paths, code hash)
  (:func:`memory_key`); the title is not part of the key. A request that names
  nothing concrete is not remembered: "always" then only tells the agent.
- A person's one-time allow of an agent request that names a command (or
  code) lets exactly one later run of exactly that command line (the next
  ``terminal/create``) or code (the ``notebook`` MCP server's ``execute``)
  go without a second question, in the same turn: the grant is used up by
  that run and dropped when the turn ends (:meth:`PermissionBroker.end_turn`).
  "Allow always" of code allows exactly that code for the session.
- A command is the same command when the agent adds one of the marker
  variables in :data:`AGENT_MARKERS` to its environment (claude-code-acp's
  ``terminal/create`` adds ``CLAUDECODE=1``); any other variable is part of
  what was allowed.
- A grant of one class never covers another: an allowed "read" whose
  ``rawInput`` holds code does not let the server's ``execute`` run it. An
  execute is covered by a grant of class ``execute``, or of no class
  (``other`` or none sent: Claude Code asks so for MCP tools), since the
  question showed the code or command either way (:func:`covers`).
- A policy "allow" grants nothing of the kind: the agent chooses the kind, and
  ``allow-reads`` must not turn a "read" that names ``curl ... | sh`` into a run.

Questions belong to their turn: a request that arrives while no prompt runs
in its session is not asked (nobody is watching a cell for it); policy and
remembered answers still apply, anything else is rejected, and a notice says
the agent asked while no turn was running. The end of a turn answers any
question still pending ``cancelled``.

Questions waiting at once are capped per session (``limits.pending_prompts``,
shared with forms); one past the cap is answered ``cancelled`` at once, with
a notice.

When nobody can answer (``ctx.interactive`` False, e.g. nbclient) a reject
option is chosen and a notice says why; with no reject option the answer is
``cancelled``.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import os
import shlex
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

from ..errors import INVALID_PARAMS, RpcError
from .events import Notice, PendingPrompts, PermissionPrompt, PermissionResolved

OPTION_KINDS = ("allow_once", "allow_always", "reject_once", "reject_always")
READ_KINDS = frozenset({"read", "search", "fetch", "think"})
#: Action classes that say nothing about what runs: a grant of one of these
#: (the question showed the payload) covers an execute of that payload.
UNCLASSIFIED = frozenset({"other", "?"})
CANCELLED: dict[str, Any] = {"outcome": {"outcome": "cancelled"}}
#: One-time allows a person gave, kept per session until used or the turn ends
#: (oldest dropped first).
GRANTS_KEPT = 16
#: Characters of a payload shown; past it an explicit "N more characters" line.
PAYLOAD_SHOWN = 200_000
#: Characters of a command line inside an option's words ("Always allow `...`").
LABEL_SCOPE = 60
BETWEEN_TURNS = "the agent asked while no turn was running"
#: Characters of a tool call's content text read as its input (Gemini CLI sends at
#: most 500); longer text is not parsed.
CONTENT_INPUT_CHARS = 100_000
#: Environment variables (name, value) that agents add to every command to say
#: who runs it: they name no program, path or library, so an allow of a command
#: covers it run with them. Exact name and value only.
AGENT_MARKERS: frozenset[tuple[str, str]] = frozenset({("CLAUDECODE", "1")})

# -- pure ---------------------------------------------------------------------


def selected(option_id: str) -> dict[str, Any]:
    return {"outcome": {"outcome": "selected", "optionId": option_id}}


def pick(options: Iterable[dict[str, Any]], want: str, *, always_first: bool = False) -> dict[str, Any] | None:
    """The option of the wanted sense ("allow" or "reject"), by kind.

    ``*_once`` first (an automatic decision should not grant more than one
    action), unless ``always_first`` (repeating a remembered "always").
    """
    if want not in ("allow", "reject"):
        raise ValueError(want)
    order = (f"{want}_always", f"{want}_once") if always_first else (f"{want}_once", f"{want}_always")
    options = list(options)
    for kind in order:
        for opt in options:
            if opt.get("kind") == kind:
                return opt
    return None


def policy_kind(kind: str | None, *, command: str = "", code: str = "") -> str | None:
    """The kind a policy judges: what runs, not what the agent calls it. A request
    of a read kind whose payload names a command or code would run it, so
    ``allow-reads`` must not let it through as a read."""
    if kind in READ_KINDS and (command or code):
        return "execute"
    return kind


def policy_decision(policy: str, kind: str | None) -> str:
    """"allow", "reject" or "ask" for a tool kind under a policy."""
    if policy == "allow-all":
        return "allow"
    if policy == "deny":
        return "reject"
    if policy == "allow-reads" and kind in READ_KINDS:
        return "allow"
    return "ask"


def covers(granted: str | None, wanted: str | None) -> bool:
    """Whether a grant of action class ``granted`` covers an action of class ``wanted``."""
    granted, wanted = granted or "?", wanted or "?"
    return granted == wanted or (wanted == "execute" and granted in UNCLASSIFIED)


def command_line(raw_input: Any) -> str:
    """The command line a tool call's ``rawInput`` names, or "".

    ``{"command": "ls -la"}`` (a shell line), ``{"command": ["ls", "-la"]}``,
    ``{"command": "ls", "args": ["-la"]}`` and ``{"cmd": ...}``: argv forms are
    joined with :func:`shlex.join`, so the same argv always gives the same text
    and a shell line equal to it means the same run.
    """
    if not isinstance(raw_input, dict):
        return ""
    cmd = raw_input.get("command")
    if cmd is None:
        cmd = raw_input.get("cmd")
    args = raw_input.get("args")
    if isinstance(cmd, list) and cmd and all(isinstance(c, str) for c in cmd):
        return shlex.join(cmd)
    if isinstance(cmd, str) and cmd.strip():
        if isinstance(args, list) and args and all(isinstance(a, str) for a in args):
            return shlex.join([cmd, *args])
        return cmd
    return ""


def _code_places(raw_input: dict[str, Any]) -> Iterable[Any]:
    yield raw_input
    for key in ("arguments", "input", "args"):
        yield raw_input.get(key)
    # codex-acp: {"request": {"_meta": {"tool_params": {...}}}}
    request = raw_input.get("request")
    meta = request.get("_meta") if isinstance(request, dict) else None
    yield meta.get("tool_params") if isinstance(meta, dict) else None


def code_of(raw_input: Any) -> str:
    """The Python a tool call would run in the notebook: the ``code`` argument of the
    ``notebook`` MCP server's ``execute``, at the top of ``rawInput``, one level
    down (agents wrap an MCP call's arguments as ``arguments`` or ``input``), or
    where codex-acp puts it (``request._meta.tool_params``); ""."""
    if not isinstance(raw_input, dict):
        return ""
    for where in _code_places(raw_input):
        if isinstance(where, dict) and isinstance(where.get("code"), str) and where["code"].strip():
            return where["code"]
    return ""


def input_from_content(content: Any) -> dict[str, Any] | None:
    """The first text item of a tool call's ``content`` that is one JSON object
    (at most :data:`CONTENT_INPUT_CHARS`), or None."""
    for item in content[:100] if isinstance(content, list) else ():
        inner = item.get("content") if isinstance(item, dict) and item.get("type") == "content" else None
        text = inner.get("text") if isinstance(inner, dict) and inner.get("type") == "text" else None
        if not isinstance(text, str) or len(text) > CONTENT_INPUT_CHARS or not text.lstrip().startswith("{"):
            continue
        try:
            value = json.loads(text)
        except (ValueError, RecursionError):
            continue
        if isinstance(value, dict):
            return value
    return None


def request_input(raw_tool_call: dict[str, Any], announced: tuple[Any, Any]) -> tuple[Any, str]:
    """What a permission request asks to run: (input, where it was read).

    Its ``rawInput``; else the ``rawInput`` its tool call announced earlier
    (``announced``: that call's rawInput and content); else the first content
    text that is one JSON object, the request's own and then the announced
    call's. "" names ``rawInput`` itself, else a note for the question."""
    if raw_tool_call.get("rawInput") is not None:
        return raw_tool_call["rawInput"], ""
    known_input, known_content = announced
    if known_input is not None:
        return known_input, "read from the input its tool call announced (the question sent none)"
    for content in (raw_tool_call.get("content"), known_content):
        found = input_from_content(content)
        if found is not None:
            return found, "read from the tool call's text (the agent sent no rawInput)"
    return None, ""


def without_markers(env: Any) -> dict[str, str]:
    """``env`` (a mapping) without the :data:`AGENT_MARKERS` pairs."""
    return {k: v for k, v in env.items() if (k, v) not in AGENT_MARKERS}


def code_hash(code: str) -> str:
    return hashlib.sha256(code.encode("utf-8", "surrogatepass")).hexdigest() if code else ""


PATH_KEYS = ("path", "file_path", "filePath", "notebook_path", "abs_path", "paths")


def touched_paths(raw_input: Any, locations: Any = None) -> tuple[str, ...]:
    """The paths a tool call names in ``rawInput`` and ``locations``, normalized, sorted."""
    found: set[str] = set()

    def add(value: Any) -> None:
        if isinstance(value, str) and value.strip():
            found.add(os.path.normpath(value))
        elif isinstance(value, list):
            for v in value[:1000]:
                if isinstance(v, str) and v.strip():
                    found.add(os.path.normpath(v))

    if isinstance(raw_input, dict):
        for key in PATH_KEYS:
            add(raw_input.get(key))
    for loc in locations if isinstance(locations, list) else ():
        path = loc.get("path") if isinstance(loc, dict) else getattr(loc, "path", None)
        add(path)
    return tuple(sorted(found))


def memory_key(kind: str | None, command: str, paths: tuple[str, ...], code: str = "") -> tuple[str, ...] | None:
    """What an "always" answer is remembered by: the action class and what is
    shown (command line, paths, the code's hash); None when nothing concrete is named."""
    if not command and not paths and not code:
        return None
    return (kind or "?", command, paths, code_hash(code))  # type: ignore[return-value]


def describe_action(command: str, paths: tuple[str, ...]) -> str:
    """One plain line for a notice: the command, else the paths."""
    if command:
        return command
    return ", ".join(paths)


def env_pairs(env: Any) -> tuple[tuple[str, str], ...]:
    """``env`` as ACP sends it (``[{name, value}]``) or as a mapping."""
    pairs: list[tuple[str, str]] = []
    if isinstance(env, dict):
        pairs = [(str(k), str(v)) for k, v in env.items()]
    elif isinstance(env, list):
        for e in env:
            if isinstance(e, dict) and "name" in e:
                pairs.append((str(e.get("name")), str(e.get("value", ""))))
    return tuple(pairs)


_SHOWN_KEYS = frozenset({"command", "cmd", "args", "code", "cwd", "env", *PATH_KEYS})


@dataclass(frozen=True)
class Action:
    """What a request would really run or touch, from ``rawInput`` and
    ``locations`` (raw text: each front-end escapes it for its output)."""

    kind: str | None = None
    command: str = ""
    code: str = ""
    cwd: str = ""
    env: tuple[tuple[str, str], ...] = ()
    paths: tuple[str, ...] = ()
    #: The rest of ``rawInput`` as JSON (an edit's old and new text...), or "".
    rest: str = ""
    #: Where the input was read when not from the request's ``rawInput``, or "".
    source: str = ""

    @classmethod
    def of(cls, kind: str | None, raw_input: Any, locations: Any = None, source: str = "") -> Action:
        rest = ""
        cwd = ""
        env: tuple[tuple[str, str], ...] = ()
        if isinstance(raw_input, dict):
            cwd = raw_input["cwd"] if isinstance(raw_input.get("cwd"), str) else ""
            env = env_pairs(raw_input.get("env"))
            code = code_of(raw_input)
            others = without_code(raw_input, code)
            others = {k: v for k, v in others.items() if k not in _SHOWN_KEYS}
            if others:
                rest = json.dumps(others, ensure_ascii=False, indent=1, default=repr)
        elif raw_input is not None:
            rest = json.dumps(raw_input, ensure_ascii=False, default=repr)
        return cls(kind, command_line(raw_input), code_of(raw_input), cwd, env, touched_paths(raw_input, locations), rest,
                   source)

    def text(self) -> str:
        """The whole payload as plain text (a command alone: just its line; paths
        alone: one per line, as the question's detail always showed them). Longer than
        ``PAYLOAD_SHOWN``: cut with an explicit count of what is left out."""
        runs = bool(self.code or self.command)
        mislabelled = runs and self.kind in READ_KINDS | {"edit", "delete", "move", "switch_mode"}
        bare = not (self.code or self.cwd or self.env or self.rest or mislabelled or self.source)
        if bare and self.command and not self.paths:
            return _bounded(self.command)
        if bare and self.paths and not self.command:
            return _bounded("\n".join(self.paths))
        lines: list[str] = []
        if self.code:
            lines += ["Python code to run:", self.code.rstrip("\n")]
        if self.command:
            lines.append(f"command: {self.command}")
        if self.cwd:
            lines.append(f"cwd: {self.cwd}")
        for name, value in self.env:
            lines.append(f"env: {name}={value}")
        for path in self.paths:
            lines.append(f"path: {path}")
        if self.rest:
            lines.append(f"other input: {self.rest}")
        if mislabelled:
            lines.append(f"note: the agent calls this a {self.kind!r}, but it names "
                         f"{'code' if self.code else 'a command'} to run")
        if self.source:
            lines.append(f"note: {self.source}")
        return _bounded("\n".join(lines))

    def scope(self) -> str:
        """What "always" covers, in words: "`npm test`", "this exact code"..."""
        if self.command:
            cmd = " ⏎ ".join(self.command.splitlines()) or self.command
            return f"`{cmd if len(cmd) <= LABEL_SCOPE else cmd[:LABEL_SCOPE - 1] + '…'}`"
        if self.code:
            return "this exact code"
        if self.paths:
            names = ", ".join(self.paths)
            # A path's end names the file: keep it, cut the start (the whole list is in the payload).
            names = names if len(names) <= LABEL_SCOPE else "…" + names[-(LABEL_SCOPE - 1):]
            return f"{self.kind or 'access'} of {names}"
        return ""


def without_code(raw_input: dict[str, Any], code: str) -> dict[str, Any]:
    """``rawInput`` with the ``code`` found by :func:`code_of` taken out of its
    wrapper (it is shown as code; the wrapper's other keys stay shown)."""
    if not code or raw_input.get("code") == code:
        return raw_input
    out = json.loads(json.dumps(raw_input, default=repr))
    for where in _code_places(out):
        if isinstance(where, dict) and where.get("code") == code:
            del where["code"]
            break
    return out


def _bounded(text: str) -> str:
    if len(text) <= PAYLOAD_SHOWN:
        return text
    return text[:PAYLOAD_SHOWN] + f"\n… {len(text) - PAYLOAD_SHOWN:,} more characters not shown"


KIND_WORDS = {"allow_once": "Allow once", "reject_once": "Reject"}


def option_label(kind: str | None, raw_kind: Any, action: Action | None = None) -> str:
    """An option's words, from its kind alone (the agent's name is shown beside them)."""
    if kind in KIND_WORDS:
        return KIND_WORDS[kind]
    if kind in ("allow_always", "reject_always"):
        verb = "allow" if kind == "allow_always" else "reject"
        if action is None:  # not known here (a question the broker did not make)
            return f"Always {verb}"
        scope = action.scope()
        if scope:
            return f"Always {verb} {scope} in this session"
        return f"Always {verb} (the agent's own rule: this request names nothing to hold it to)"
    return f"Unknown answer (kind {str(raw_kind)[:40]!r})"


def label_options(options: list[dict[str, Any]], action: Action | None, *, agent_words: bool = True) -> None:
    """Set each option's shown ``name`` from its kind; the agent's own name
    stays as ``agentName`` and, where it says something else, beside the words."""
    for o in options:
        agent = str(o.get("agentName", o.get("name") or ""))
        label = option_label(o.get("kind"), o.get("rawKind"), action)
        o["label"] = label
        o["agentName"] = agent if agent_words else ""
        differs = agent_words and agent.strip() and agent.strip().casefold() != label.casefold()
        o["name"] = f"{label} — the agent's words: “{agent}”" if differs else label


def parse_options(raw: Any) -> list[dict[str, Any]]:
    """Options as ``{optionId, name, kind}`` dicts, leniently.

    An option with an unknown kind is kept (the UI can show it) but never
    picked by kind; entries without an id are dropped.
    """
    out: list[dict[str, Any]] = []
    if not isinstance(raw, list):
        return out
    for item in raw:
        if not isinstance(item, dict):
            continue
        oid = item.get("optionId")
        if not isinstance(oid, str):
            continue
        kind = item.get("kind")
        out.append(
            {
                "optionId": oid,
                "name": str(item.get("name") or oid),
                "kind": kind if kind in OPTION_KINDS else None,
                "rawKind": kind,
            }
        )
    return out


def duplicate_ids(options: list[dict[str, Any]]) -> list[str]:
    """Option ids that appear more than once (a malformed request)."""
    seen: set[str] = set()
    dup: list[str] = []
    for o in options:
        oid = o["optionId"]
        if oid in seen and oid not in dup:
            dup.append(oid)
        seen.add(oid)
    return dup


# -- the broker ---------------------------------------------------------------


@dataclass(frozen=True)
class Grant:
    """A person's one-time allow: the action class and exactly what was shown."""

    kind: str
    #: ("command", the command line) or ("code", the code's hash)
    what: tuple[str, str]


def _take(kept: deque[Grant] | None, what: tuple[str, str], kind: str) -> bool:
    """Use up one grant of ``what`` whose class covers ``kind``, if there is one."""
    for grant in kept or ():
        if grant.what == what and covers(grant.kind, kind):
            kept.remove(grant)  # type: ignore[union-attr]
            return True
    return False


class Verdict(NamedTuple):
    """How a question the client asked for itself was settled."""

    allowed: bool
    #: "policy", "remembered", "user", "headless", "cancelled", "limit", "grant", "between-turns"
    by: str


class PermissionBroker:
    """Answers permission requests for every session of one client."""

    def __init__(self, host: Any, prompts: PendingPrompts | None = None) -> None:
        self.host = host
        self.prompts = prompts if prompts is not None else PendingPrompts()
        #: "always" answers per session: memory key -> "allow" / "reject"
        self._memory: dict[str, dict[tuple[str, ...], str]] = {}
        #: one-time allows per session, until used or the turn ends
        self._grants: dict[str, deque[Grant]] = {}
        self._synthetic = itertools.count(1)

    # The ACP handler.
    async def request_permission(self, params: Any) -> dict[str, Any]:
        from ..protocol.schema import RequestPermissionRequest  # lazy: start-up time

        options = parse_options(params.get("options") if isinstance(params, dict) else None)
        if isinstance(params, dict):
            # Validate everything but the options' kinds (kept leniently above).
            clean = dict(params)
            clean["options"] = [
                {"optionId": o["optionId"], "name": o["name"], "kind": o["kind"] or "reject_once"} for o in options
            ]
            request = RequestPermissionRequest.model_validate(clean)
        else:
            request = RequestPermissionRequest.model_validate(params)
        ctx = self.host.session_context(request.session_id)
        tool_call = request.tool_call
        kind = tool_call.kind or ctx.tool_call_kind(tool_call.tool_call_id)
        raw_tool_call = params.get("toolCall") if isinstance(params, dict) else None
        raw = raw_tool_call if isinstance(raw_tool_call, dict) else {}
        dup = duplicate_ids(options)
        if dup:
            why = (f"permission request {tool_call.title or tool_call.tool_call_id!r} was refused: it is malformed, "
                   f"option id(s) {', '.join(repr(d) for d in dup)} appear more than once, so an answer could not "
                   f"say which option was meant")
            ctx.emit(Notice("warning", why, ctx.id))
            ctx.emit(PermissionResolved(ctx.id, tool_call.tool_call_id, tool_call.title, None, None, "malformed"))
            raise RpcError(INVALID_PARAMS, why)
        raw_input, source = request_input(raw, ctx.tool_call_input(tool_call.tool_call_id))
        action = Action.of(kind, raw_input, raw.get("locations"), source)
        label_options(options, action)
        answer, _ = await self.decide(
            ctx, request, options, kind, tool_call.tool_call_id, tool_call.title,
            command=action.command, paths=action.paths, grant=True, code=action.code, action=action,
        )
        return answer

    def _remembered(self, sid: str, key: tuple[str, ...] | None) -> str | None:
        """A remembered "always" for ``key``: its own class, or (for an execute)
        an unclassified one that showed the same thing."""
        if key is None:
            return None
        memory = self._memory.get(sid, {})
        for cls in (key[0], *(sorted(UNCLASSIFIED) if key[0] == "execute" else ())):
            got = memory.get((cls, *key[1:]))
            if got is not None:
                return got
        return None

    async def decide(
        self,
        ctx: Any,
        request: Any,
        options: list[dict[str, Any]],
        kind: str | None,
        tool_call_id: str,
        title: str | None,
        *,
        policy: str | None = None,
        command: str = "",
        paths: tuple[str, ...] = (),
        cwd: str | None = None,
        grant: bool = False,
        code: str = "",
        hint: str | None = None,
        action: Action | None = None,
    ) -> tuple[dict[str, Any], str]:
        """Policy "deny", remembered answers, policy "allow", then ask.

        Returns (the ACP answer, how it was decided). ``grant``: a person's
        allow of this request lets the next terminal of ``command`` run;
        ``code`` (the Python its ``rawInput`` names), the notebook server's run
        of it (:meth:`take_code_grant`). ``hint``: what would let it run, for
        the notice when nobody can answer. ``action``: what is shown.
        """
        sid = ctx.id
        if action is None:
            action = Action(kind, command=command, code=code, paths=paths)
        if not options:
            ctx.emit(Notice("warning", f"permission request {title or tool_call_id!r} came with no options: cancelled", sid))
            ctx.emit(PermissionResolved(sid, tool_call_id, title, None, None, "cancelled"))
            return CANCELLED, "cancelled"
        between = not getattr(ctx, "turn_running", True)

        def done(opt: dict[str, Any] | None, by: str) -> tuple[dict[str, Any], str]:
            if between:
                ctx.emit(Notice("warning", f"Between turns: {BETWEEN_TURNS} ({what}); "
                                f"{'answered ' + (opt['kind'] or '?') if opt else 'cancelled'} ({by}).", sid,
                                kind="between-turns"))
            ctx.emit(PermissionResolved(sid, tool_call_id, title, opt["optionId"] if opt else None, opt["kind"] if opt else None, by))
            return (selected(opt["optionId"]) if opt else CANCELLED), by

        what = f"{title or tool_call_id!r}" + (f" [{describe_action(command, paths)}]" if command or paths else "")
        decision = policy_decision(policy or ctx.settings.permissions,
                                   policy_kind(kind, command=action.command, code=action.code))
        if decision == "reject":  # "deny" beats anything remembered
            opt = pick(options, "reject")
            return done(opt, "policy")
        key = memory_key(kind, command, paths, code)
        remembered = self._remembered(sid, key)
        if remembered is not None:
            opt = pick(options, remembered, always_first=True)
            if opt is not None:
                return done(opt, "remembered")
        if decision == "allow":
            opt = pick(options, "allow")
            if opt is not None:
                return done(opt, "policy")
        if between:  # nobody watches a cell for it: never asked, never left pending
            return done(pick(options, "reject"), "between-turns")

        if not ctx.interactive:
            opt = pick(options, "reject")
            if hint is None:
                hint = ("Policy allow-reads (or allow-all) lets it run." if kind in READ_KINDS
                        else "Policy allow-all lets it run (%permissions allow-all, or --permissions).")
            why = (
                f"Permission for {what} ({kind or 'unknown kind'}) was "
                f"{'rejected' if opt else 'cancelled'}: nobody can answer here (not interactive). " + hint
            )
            ctx.emit(Notice("warning", why, sid))
            return done(opt, "headless")

        limit = ctx.settings.limits.pending_prompts
        if self.prompts.full(sid, limit):
            ctx.emit(Notice(
                "warning",
                f"Permission for {what} was cancelled at once: {self.prompts.count(sid)} questions already wait "
                f"for an answer in this session (limits.pending_prompts = {limit}; change it under "
                f'"limits" in the config file).',
                sid,
                kind="limit",
            ))
            return done(None, "limit")

        loop = asyncio.get_running_loop()
        prompt = PermissionPrompt(
            session_id=sid,
            request=request,
            options=options,
            kind=kind,
            future=loop.create_future(),
            loop=loop,
            title=title,
            command=action.text(),
            cwd=cwd,
        )
        option_id = await prompt.ask(ctx, self.prompts)
        opt = next((o for o in options if o["optionId"] == option_id), None)
        if opt is None:
            return done(None, "cancelled")
        if opt["kind"] in ("allow_always", "reject_always") and key is not None:
            self._memory.setdefault(sid, {})[key] = opt["kind"].split("_")[0]
        if opt["kind"] == "allow_once" or (opt["kind"] == "allow_always" and key is None):
            # ("always" with a key is remembered above, and covers every run of what was shown)
            kept = self._grants.setdefault(sid, deque(maxlen=GRANTS_KEPT))
            if grant and command:
                kept.append(Grant(kind or "?", ("command", command)))
            if code:  # the notebook server's question about this very code is answered too
                kept.append(Grant(kind or "?", ("code", code_hash(code))))
        return done(opt, "user")

    def take_grant(self, session_id: str, command: str, kind: str = "execute") -> bool:
        """Use up a person's one-time allow of exactly ``command`` (see the module docstring)."""
        return _take(self._grants.get(session_id), ("command", command), kind)

    def take_code_grant(self, session_id: str, code: str, kind: str = "execute") -> bool:
        """The person already allowed running exactly ``code`` when the agent asked
        for its tool call, in a question of a class that covers ``kind`` (once in
        this turn; every time after "allow always" for the session): the notebook
        server's ``execute`` asks no second question."""
        if not code:
            return False
        if self._remembered(session_id, memory_key(kind, "", (), code)) == "allow":
            return True
        return _take(self._grants.get(session_id), ("code", code_hash(code)), kind)

    async def authorize(
        self,
        ctx: Any,
        *,
        title: str,
        kind: str,
        command: str = "",
        locations: list[str] | None = None,
        cwd: str | None = None,
        raw_input: dict[str, Any] | None = None,
        policy: str | None = None,
        use_grant: bool = False,
        code: str = "",
        hint: str | None = None,
    ) -> Verdict:
        """A question on the client's own behalf (a terminal, a protected write...).

        Goes through the same policy, memory, headless and cap rules as an
        agent's request and the same prompt UI. ``policy``: None for the
        session's policy, or "ask" when the caller decided a person must
        answer whatever the policy (the agent-facing policy does not apply).
        ``use_grant``: a person's earlier allow of this exact ``command`` in
        the agent's own request counts (once) as the answer; ``code``: the
        Python this runs, which a person's allow of it in the agent's own
        request answers likewise (:meth:`take_code_grant`); it is shown whole.
        """
        from ..protocol.schema import RequestPermissionRequest  # lazy: start-up time

        if policy_decision(policy or ctx.settings.permissions, kind) != "reject" and getattr(ctx, "turn_running", True):
            if (use_grant and command and self.take_grant(ctx.id, command, kind)) or \
                    (code and self.take_code_grant(ctx.id, code, kind)):
                return Verdict(True, "grant")
        tool_call_id = f"client-{next(self._synthetic)}"
        options = [
            {"optionId": "allow_once", "name": "Allow once", "kind": "allow_once"},
            {"optionId": "allow_always", "name": "Allow for this session", "kind": "allow_always"},
            {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"},
            {"optionId": "reject_always", "name": "Reject for this session", "kind": "reject_always"},
        ]
        tool_call: dict[str, Any] = {
            "toolCallId": tool_call_id,
            "title": title,
            "kind": kind,
            "locations": [{"path": p} for p in locations or ()],
        }
        if raw_input is not None:
            tool_call["rawInput"] = raw_input
        request = RequestPermissionRequest.model_validate(
            {
                "sessionId": ctx.id,
                "toolCall": tool_call,
                "options": [{k: o[k] for k in ("optionId", "name", "kind")} for o in options],
            }
        )
        opts = [dict(o, rawKind=o["kind"]) for o in options]
        paths = touched_paths(None, tool_call["locations"])
        action = Action(kind, command=command, code=code, paths=paths)
        label_options(opts, action, agent_words=False)
        answer, by = await self.decide(
            ctx, request, opts, kind, tool_call_id, title,
            policy=policy, command=command, paths=paths, cwd=cwd, hint=hint, code=code, action=action,
        )
        outcome = answer["outcome"]
        allowed = outcome.get("outcome") == "selected" and str(outcome.get("optionId", "")).startswith("allow")
        return Verdict(allowed, by)

    async def ask(self, ctx: Any, *, title: str, kind: str, locations: list[str] | None = None) -> bool:
        """Ask a person whatever the policy (a file outside the workspace...); True when allowed."""
        return (await self.authorize(ctx, title=title, kind=kind, locations=locations, policy="ask")).allowed

    def pending(self, session_id: str | None = None) -> list[PermissionPrompt]:
        return self.prompts.pending(session_id, PermissionPrompt)

    def cancel_all(self, session_id: str) -> int:
        """Answer every pending request of the session ``cancelled``."""
        return self.prompts.cancel_all(session_id, PermissionPrompt)

    def drop_grants(self, session_id: str) -> None:
        """A turn ended (or was cancelled): one-time allows given in it no longer
        let a terminal (or code) run unasked; "always" answers stay."""
        self._grants.pop(session_id, None)

    def end_turn(self, session_id: str) -> int:
        """The session's turn ended: its one-time allows end with it and every
        question still pending is answered ``cancelled``."""
        self.drop_grants(session_id)
        return self.cancel_all(session_id)

    def forget(self, session_id: str) -> None:
        """Drop the session's remembered answers and grants (session closed)."""
        self._memory.pop(session_id, None)
        self._grants.pop(session_id, None)

    def register(self, conn: Any) -> None:
        conn.on_request("session/request_permission", self.request_permission)
