"""Client and sessions: one agent process, its connection, its sessions and turns.

Data flows one way: ``Session.prompt`` -> ``Connection`` -> agent; the
agent's updates come back through ``Client._on_update`` -> ``Session`` ->
``Turn`` -> whoever subscribed (a view, the CLI printer, a test).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Optional

from .._version import VERSION
from . import content
from ..protocol.scope import Scope
from ..protocol import framing
from ..protocol.connection import Connection
from .content import embedded_resource, resource_link, text_block  # noqa: F401 (re-exported: front-ends build prompts)
from ..errors import AUTH_REQUIRED, INVALID_PARAMS, AcpError, AuthRequired, ConnectionClosed, RpcError
from .host import ClientSettings
from .registry import AgentSpec
from .trace import trace_meta
from ..protocol.transport import ProcessTransport
from ..protocol.warm import schema_imported, schema_in_background
from .record import Provenance
from .turn import STOP_REASONS, Notice, Turn
from .. import services as services_mod

log = logging.getLogger(__name__)

__version__ = VERSION

#: How long a cancelled turn may take to end before the client stops waiting.
CANCEL_GRACE = 1.0
#: How long :meth:`Client.start` waits, after ``initialize``, for the schema import it
#: began (:mod:`..protocol.warm`) before it calls the client started without it.
SCHEMA_WAIT = 30.0
#: Distinct unknown session ids whose updates are kept (the total count of
#: updates kept is ``Limits.unknown_session_updates``).
EARLY_SESSIONS = 8


@dataclass(frozen=True)
class Choice:
    """One mode or model the agent offers, whichever way it offers it.

    ``config_id`` names the session config option it is a value of
    (``session/set_config_option``), or is None when it comes from the
    session's ``modes`` / ``models`` state (``session/set_mode`` /
    ``session/set_model``). All strings are the agent's: escape them to show.
    """

    id: str
    name: str
    description: Optional[str] = None
    current: bool = False
    config_id: Optional[str] = None
    #: The option group's name, for a config option with grouped values.
    group: Optional[str] = None


def _opt_str(value: Any) -> Optional[str]:
    return value if type(value) is str else None


def config_choices(option: dict[str, Any]) -> list[Choice]:
    """The values of a ``select`` config option (flat or grouped) as choices."""
    config_id = option.get("id")
    values = option.get("options")
    if type(config_id) is not str or type(values) is not list:
        return []
    current = option.get("currentValue")
    out: list[Choice] = []

    def add(value: Any, group: Optional[str]) -> None:
        if type(value) is dict and type(value.get("value")) is str:
            vid = value["value"]
            out.append(Choice(vid, _opt_str(value.get("name")) or vid, _opt_str(value.get("description")),
                              vid == current, config_id, group))

    for item in values:
        if type(item) is dict and type(item.get("options")) is list and "value" not in item:
            group = _opt_str(item.get("name")) or _opt_str(item.get("group"))
            for value in item["options"]:
                add(value, group)
        else:
            add(item, None)
    return out


def state_choices(state: Any, list_key: str, id_key: str, current_key: str) -> list[Choice]:
    """Choices from a ``modes`` (``availableModes``/``id``) or ``models``
    (``availableModels``/``modelId``) state object."""
    if type(state) is not dict or type(state.get(list_key)) is not list:
        return []
    current = state.get(current_key)
    return [
        Choice(item[id_key], _opt_str(item.get("name")) or item[id_key], _opt_str(item.get("description")),
               item[id_key] == current)
        for item in state[list_key]
        if type(item) is dict and type(item.get(id_key)) is str
    ]


def merge_choices(from_config: list[Choice], from_state: list[Choice]) -> list[Choice]:
    """Config option values first (the protocol's newer way, which clients
    should prefer), then state-only ones. The current one is the config
    option's when there is one."""
    if not from_config:
        return from_state
    ids = {c.id for c in from_config}
    extra = [Choice(c.id, c.name, c.description, False, None, c.group) for c in from_state if c.id not in ids]
    return from_config + extra


def pick(choices: list[Choice], wanted: str) -> Optional[Choice]:
    """The choice named ``wanted``: by id, else by id or name ignoring case."""
    for c in choices:
        if c.id == wanted:
            return c
    folded = wanted.casefold()
    for c in choices:
        if c.id.casefold() == folded or c.name.casefold() == folded:
            return c
    return None


def describe_auth(methods: list[dict[str, Any]], spec: AgentSpec | None = None) -> str:
    """The agent's ``authMethods`` in plain words, one line each."""
    if not methods:
        return "The agent requires authentication but lists no methods; see its documentation."
    lines = ["The agent needs you to log in. Ways it offers:"]
    for m in methods:
        if not isinstance(m, dict):
            continue
        name = m.get("name") or m.get("id")
        desc = f" ({m['description']})" if m.get("description") else ""
        kind = m.get("type") or "agent"
        if kind == "env_var":
            names = ", ".join(v.get("name", "?") for v in m.get("vars") or [] if isinstance(v, dict))
            link = f"; get one at {m['link']}" if m.get("link") else ""
            lines.append(f"- {name}{desc}: set {names} in the environment and restart{link}")
        elif kind == "terminal":
            program = " ".join(spec.command) if spec else "<agent>"
            command = " ".join([program, *(str(a) for a in m.get("args") or [])])
            lines.append(f"- {name}{desc}: run `{command}` in a terminal and follow it")
        else:
            lines.append(f"- {name}{desc}: let the agent do it (authenticate with method id {m.get('id')!r})")
    return "\n".join(lines)


def absolute_roots(paths: list[str]) -> list[str]:
    """Workspace roots as the agent is given them: absolute (``~`` expanded), each once."""
    return list(dict.fromkeys(os.path.abspath(os.path.expanduser(r)) for r in paths if r))


@dataclass
class Session:
    """One ACP session. Implements the services' ``SessionContext``."""

    client: "Client"
    id: str
    cwd: str
    settings: ClientSettings
    interactive: bool = False
    #: The cell's view can show a page to open (set per turn by the controller).
    links: bool = False
    #: The other workspace roots the agent was given (``additionalDirectories``).
    additional_directories: list[str] = field(default_factory=list)
    modes: Optional[dict[str, Any]] = None
    models: Optional[dict[str, Any]] = None
    config_options: list[dict[str, Any]] = field(default_factory=list)
    commands: list[dict[str, Any]] = field(default_factory=list)
    #: From the agent's ``session_info_update`` (its text: escape it to show).
    title: Optional[str] = None
    #: ISO 8601 time of the session's last activity, as the agent last said it.
    updated_at: Optional[str] = None
    usage: Optional[dict[str, Any]] = None
    turns: list[Turn] = field(default_factory=list)
    #: Updates outside any turn (before the first prompt, history replay).
    background: Turn = field(init=False)
    _active: Optional[Turn] = field(default=None, repr=False)
    _prompt_future: Optional[asyncio.Future[Any]] = field(default=None, repr=False)
    #: When the last update outside a turn arrived (time.monotonic): a replay's pace.
    _between_at: float = field(default=0.0, repr=False)

    def __post_init__(self) -> None:
        self.background = self._new_turn()

    def _new_turn(self, prompt: Any = None) -> Turn:
        return Turn(self.id, prompt=prompt, tool_output_limit=self.settings.limits.tool_output_chars)

    # -- SessionContext -----------------------------------------------------

    @property
    def turn(self) -> Turn:
        """The turn events go to now: the active one, else the last, else background."""
        if self._active is not None:
            return self._active
        return self.turns[-1] if self.turns else self.background

    @property
    def turn_running(self) -> bool:
        """A prompt of this session is running (questions belong to their turn)."""
        return self._active is not None

    def emit(self, event: Any) -> None:
        self.turn.add(event)

    def tool_call_kind(self, tool_call_id: str) -> str | None:
        for turn in (self._active, *reversed(self.turns), self.background):
            if turn is not None:
                call = turn.tool_calls.get(tool_call_id)
                if call is not None and call.kind:
                    return call.kind
        return None

    def tool_call_input(self, tool_call_id: str) -> tuple[Any, Any]:
        # The running turn only: a question is about a call of its own turn.
        call = self._active.tool_calls.get(tool_call_id) if self._active is not None else None
        return (call.raw_input, call.content) if call is not None else (None, None)

    # -- modes and models, whichever way the agent offers them ------------------

    def option_of(self, category: str) -> dict[str, Any] | None:
        """The first ``select`` config option of this category ("mode", "model")."""
        for opt in self.config_options:
            if opt.get("category") == category and opt.get("type", "select") == "select" and type(opt.get("id")) is str:
                return opt
        return None

    def model_option(self) -> dict[str, Any] | None:
        return self.option_of("model")

    def available_modes(self) -> list[Choice]:
        """Modes from a config option of category "mode" (OpenCode offers
        them only so) and from the session's ``modes`` state, merged."""
        opt = self.option_of("mode")
        return merge_choices(config_choices(opt) if opt else [],
                             state_choices(self.modes, "availableModes", "id", "currentModeId"))

    def available_models(self) -> list[Choice]:
        """Models from a config option of category "model" and from the
        unstable ``models`` state (``availableModels``), merged."""
        opt = self.option_of("model")
        return merge_choices(config_choices(opt) if opt else [],
                             state_choices(self.models, "availableModels", "modelId", "currentModelId"))

    @property
    def current_mode(self) -> str | None:
        """The current mode's id: the mode config option's value, else ``modes.currentModeId``."""
        return self._current("mode", self.modes, "currentModeId")

    @property
    def current_model(self) -> str | None:
        """The current model's id: the model config option's value, else ``models.currentModelId``."""
        return self._current("model", self.models, "currentModelId")

    def _current(self, category: str, state: dict[str, Any] | None, key: str) -> str | None:
        opt = self.option_of(category)
        if opt is not None and type(opt.get("currentValue")) is str:
            return opt["currentValue"]
        value = (state or {}).get(key)
        return value if type(value) is str else None

    def _note_current(self, category: str, value: str, *, config: bool = True) -> None:
        """Keep both sources in step after a change through either (the
        config options only when ``config``: an agent's own answer to
        ``session/set_config_option`` is not overridden)."""
        if config:
            opts = []
            for opt in self.config_options:
                if opt.get("category") == category and opt.get("currentValue") != value and any(
                    c.id == value for c in config_choices(opt)
                ):
                    opt = {**opt, "currentValue": value}
                opts.append(opt)
            self.config_options = opts
        state, key = (self.modes, "currentModeId") if category == "mode" else (self.models, "currentModelId")
        if isinstance(state, dict):
            state = {**state, key: value}
            if category == "mode":
                self.modes = state
            else:
                self.models = state

    # -- updates ------------------------------------------------------------

    def apply(self, update: Any) -> None:
        if self._active is None:
            self._between_at = time.monotonic()
        if type(update) is dict:
            kind = update.get("sessionUpdate")
            if kind not in ("agent_message_chunk", "agent_thought_chunk", "tool_call", "tool_call_update"):
                self._apply_state(kind, update)
        self.turn.apply_update(update)

    def apply_tools(self, run: list[tuple[str, framing.ToolUpdate, bytes]], start: int, stop: int) -> None:
        """:meth:`apply` of ``run[start:stop]``, tool call updates read typed (no session
        state to update)."""
        if self._active is None:
            self._between_at = time.monotonic()
        self.turn.apply_tools(run, start, stop)

    def apply_texts(self, kind: str, texts: list[str], message_id: str | None = None) -> None:
        """:meth:`apply` of a run of chunks that are only text (and maybe one message id; no
        session state to update)."""
        if self._active is None:
            self._between_at = time.monotonic()
        self.turn.apply_texts(kind, texts, message_id)

    async def replay_settled(self) -> bool:
        """Wait until updates outside a turn (a load's replay) have been quiet for
        ``limits.replay_quiet_seconds`` (counted from the call at the earliest: a
        replay may start after the answer), at most ``limits.request_seconds``;
        False when the agent was still replaying then."""
        limits = self.settings.limits
        start = time.monotonic()
        end = start + limits.request_seconds
        while True:
            now = time.monotonic()
            left = max(self._between_at, start) + limits.replay_quiet_seconds - now
            if left <= 0:
                return True
            if now >= end:
                return False
            await asyncio.sleep(min(left, end - now))

    def _apply_state(self, kind: Any, update: dict[str, Any]) -> None:
        if kind == "available_commands_update":
            cmds = update.get("availableCommands")
            self.commands = [c for c in cmds if isinstance(c, dict)] if isinstance(cmds, list) else []
        elif kind == "current_mode_update":
            mode = update.get("currentModeId")
            if isinstance(mode, str):
                self.modes = {**(self.modes or {}), "currentModeId": mode}
                self._note_current("mode", mode)
        elif kind == "config_option_update":
            self._take_config_options(update.get("configOptions"))
        elif kind == "session_info_update":
            # Only the fields sent change; null clears; a value of another type is dropped.
            for key, attr in (("title", "title"), ("updatedAt", "updated_at")):
                if key in update:
                    value = update[key]
                    setattr(self, attr, value if type(value) is str else None)
        elif kind == "usage_update":
            self.usage = update

    def _adopt(self, result: dict[str, Any]) -> None:
        modes = result.get("modes")
        if isinstance(modes, dict):
            self.modes = modes
        models = result.get("models")
        if isinstance(models, dict):
            self.models = models
        self._take_config_options(result.get("configOptions"))

    def _take_config_options(self, opts: Any) -> bool:
        """Adopt the ``configOptions`` an agent sent (its non-objects dropped);
        False when it sent no list."""
        if not isinstance(opts, list):
            return False
        self.config_options = [o for o in opts if isinstance(o, dict)]
        return True

    # -- prompting ----------------------------------------------------------

    def begin(self, prompt: Any) -> Turn:
        """Start a turn and send the prompt; await :meth:`finish` for the end.

        Split from :meth:`prompt` so a kernel can attach its view to the turn
        before the first update can arrive.
        """
        if self._active is not None:
            raise AcpError("a turn is already running in this session; cancel it or wait")
        blocks = [text_block(prompt)] if isinstance(prompt, str) else list(prompt)
        # What this agent cannot take is rewritten or refused (ContentRefused) before a turn exists.
        gated = content.gate(blocks, content.prompt_capabilities(self.client.capabilities))
        blocks = gated.blocks
        self._compact_history(self.settings.limits.detailed_turns)
        turn = self._new_turn(blocks)
        turn.provenance = Provenance(agent=self.client.spec.name, info=self.client.agent_info, session=self.id,
                                     model=self.current_model, mode=self.current_mode, policy=self.settings.permissions)
        for note in gated.notes:
            turn.add(Notice("info", note))
        self._active = turn
        self.turns.append(turn)
        try:
            params: dict[str, Any] = {"sessionId": self.id, "prompt": blocks}
            if self.client.meta:
                params["_meta"] = dict(self.client.meta)
            _, self._prompt_future = self.client.conn.send_request(
                "session/prompt",
                params,
                on_settle=lambda outcome: self._settle(turn, outcome),
            )
        except ConnectionClosed as exc:
            self._end(turn, None, error=exc.explain())
        return turn

    def _settle(self, turn: Turn, outcome: Any) -> None:
        """The agent answered the prompt (or went away): end the turn right
        here in the stream, so updates after the answer count as late."""
        if turn.done:
            return
        if isinstance(outcome, RpcError):
            self._end(turn, None, error=f"the agent answered the prompt with an error: {outcome.message} (code {outcome.code})")
        elif isinstance(outcome, ConnectionClosed):
            self._end(turn, None, error=outcome.explain())
        elif isinstance(outcome, BaseException):
            self._end(turn, None, error=f"{type(outcome).__name__}: {outcome}")
        else:
            stop = outcome.get("stopReason") if isinstance(outcome, dict) else None
            if isinstance(outcome, dict) and isinstance(outcome.get("usage"), dict):
                turn.usage = {**(turn.usage or {}), **outcome["usage"]}
            if not isinstance(stop, str):
                self._end(turn, "end_turn", note=f"the agent's prompt result has no stopReason: {outcome!r:.200}")
            elif stop not in STOP_REASONS:
                self._end(turn, stop, note=f"unknown stop reason {stop!r}")
            else:
                self._end(turn, stop)

    async def finish(self, turn: Turn) -> Turn:
        """Wait for the agent to end ``turn``; never raises for agent failures."""
        fut = self._prompt_future if self._active is turn else None
        if turn.done or fut is None:
            return turn
        try:
            await asyncio.shield(fut)
        except (RpcError, ConnectionClosed):
            pass  # _settle already ended the turn with the message
        if not turn.done:  # pragma: no cover - _settle always ends it
            self._end(turn, None, error="the prompt ended without an answer")
        return turn

    async def prompt(self, prompt: Any) -> Turn:
        """Send a prompt and wait for the turn to end. Cancelling this await
        cancels the turn per the protocol."""
        turn = self.begin(prompt)
        try:
            return await self.finish(turn)
        except asyncio.CancelledError:
            await asyncio.shield(self.cancel())
            raise

    def _end(self, turn: Turn, stop: str | None, *, error: str | None = None, note: str | None = None, forced: bool = False) -> None:
        if note:
            turn.add(Notice("warning", note))
        if error:
            turn.add(Notice("error", error))
        if self._active is turn:
            self._active = None
            self._prompt_future = None
            # A question belongs to its turn: none stays pending after it, and
            # a one-time allow given in it ends with it.
            services = getattr(self.client, "services", None)
            if services is not None:
                services.end_turn(self.id)
        turn.finish(stop, error=error, forced=forced)
        # The turn that just ended stays whole until the next prompt (its
        # readers may still be reading it), even with detailed_turns 0.
        self._compact_history(max(1, self.settings.limits.detailed_turns))

    def _compact_history(self, keep: int) -> None:
        """Compact every finished turn but the newest ``keep``
        (``limits.detailed_turns``): old turns keep their final text and
        tool-call state, not every event."""
        finished = 0
        for turn in reversed(self.turns):
            if not turn.done:
                continue
            finished += 1
            if finished <= keep:
                continue
            if turn.compacted:
                break  # older ones were compacted before
            turn.compact()

    async def cancel(self, grace: float = CANCEL_GRACE) -> None:
        """Cancel the running turn per the spec: ``session/cancel``, answer
        pending permission requests ``cancelled``, keep taking updates. If the
        agent does not end the turn within ``grace`` seconds, end it here and
        mark the client for restart."""
        waiting = self.cancel_soon(grace)
        if waiting is not None:
            await waiting

    def cancel_soon(self, grace: float = CANCEL_GRACE) -> asyncio.Task | None:
        """:meth:`cancel` for a signal handler: ``session/cancel`` is written
        before this returns (so it reaches the agent before whatever else the
        interrupt causes, e.g. a notebook tool's "interrupted" answer); the
        wait for the turn to end is the returned task (None: no turn runs)."""
        turn, fut = self._active, self._prompt_future
        if turn is None:
            return None
        turn.add(Notice("info", "cancelling...", key="cancelling"))
        try:
            self.client.conn.notify("session/cancel", {"sessionId": self.id})
        except ConnectionClosed:
            pass
        self.client.services.cancel_pending(self.id)
        return asyncio.ensure_future(self._end_cancelled(turn, fut, grace))

    async def _end_cancelled(self, turn: Turn, fut: asyncio.Future | None, grace: float) -> None:
        if fut is not None and not fut.done():
            await asyncio.wait({fut}, timeout=grace)
        if turn.done:
            return
        self.client.needs_restart = True
        self._end(
            turn,
            "cancelled",
            note=f"the agent did not end the turn within {grace:g} s of the cancel; "
            "it will be restarted before the next prompt",
            forced=True,
        )
        if fut is not None and not fut.done():
            # Release whoever awaits the prompt; a late answer finds it done.
            fut.set_result({"stopReason": "cancelled"})

    # -- session settings ---------------------------------------------------

    async def set_mode(self, mode_id: str) -> Choice | None:
        """Switch mode by id (or name): ``session/set_config_option`` when the
        mode is a config option's value, else ``session/set_mode``. A mode the
        agent does not offer is refused here when it lists any."""
        choice = self._resolve("mode", self.available_modes(), mode_id)
        wanted = choice.id if choice is not None else mode_id
        by_config = choice is not None and choice.config_id is not None
        if by_config:
            await self.set_config_option(choice.config_id, wanted)  # type: ignore[union-attr,arg-type]
        else:
            await self.client.request("session/set_mode", {"sessionId": self.id, "modeId": wanted})
            self.modes = {**(self.modes or {}), "currentModeId": wanted}
        self._note_current("mode", wanted, config=not by_config)
        return choice

    async def set_model(self, model_id: str) -> Choice | None:
        """Switch model by id (or name): ``session/set_config_option`` for a
        model config option's value, else the unstable ``session/set_model``."""
        choice = self._resolve("model", self.available_models(), model_id)
        wanted = choice.id if choice is not None else model_id
        by_config = choice is not None and choice.config_id is not None
        if by_config:
            await self.set_config_option(choice.config_id, wanted)  # type: ignore[union-attr,arg-type]
        else:
            await self.client.request("session/set_model", {"sessionId": self.id, "modelId": wanted})
        self._note_current("model", wanted, config=not by_config)
        return choice

    @staticmethod
    def _resolve(what: str, choices: list[Choice], wanted: str) -> Choice | None:
        if not choices:
            return None  # the agent lists none: let it judge
        choice = pick(choices, wanted)
        if choice is None:
            offered = ", ".join(c.id for c in choices[:30]) + (", ..." if len(choices) > 30 else "")
            raise AcpError(f"the agent offers no {what} {wanted!r}; it offers: {offered}")
        return choice

    async def set_config_option(self, config_id: str, value: Any) -> list[dict[str, Any]]:
        params: dict[str, Any] = {"sessionId": self.id, "configId": config_id, "value": value}
        if type(value) is bool:
            params["type"] = "boolean"
        result = await self.client.request("session/set_config_option", params)
        if not (isinstance(result, dict) and self._take_config_options(result.get("configOptions"))):
            # No options in the answer: assume the agent took the value.
            self.config_options = [
                {**o, "currentValue": value} if o.get("id") == config_id else o for o in self.config_options
            ]
        return self.config_options


class Client:
    """One agent process and everything that talks to it."""

    def __init__(
        self,
        spec: AgentSpec,
        *,
        cwd: str | None = None,
        settings: ClientSettings | None = None,
        mcp_servers: list[dict[str, Any]] | None = None,
        interactive: bool = False,
        max_line: int | None = None,
        warm_schema: bool = True,
    ) -> None:
        self.spec = spec
        #: Import the schema models while the agent starts and be started only when they are
        #: (:mod:`..protocol.warm`): for long-lived front-ends. A one-shot run passes False, so
        #: it pays the import only if the agent asks something that needs the models.
        self.warm_schema = warm_schema
        self.cwd = os.path.abspath(cwd or os.getcwd())
        self.settings = settings or ClientSettings()
        self.mcp_servers = mcp_servers or []
        self.interactive = interactive
        #: W3C trace context from the environment, sent in ``_meta`` with each session set-up and prompt.
        self.meta = trace_meta(os.environ)
        self.max_line = max_line
        self.sessions: dict[str, Session] = {}
        #: Sessions this client is done with: their late updates and requests are refused.
        self._closed: set[str] = set()
        self.needs_restart = False
        self.init: dict[str, Any] = {}
        self.reports: list[Notice] = []
        #: Updates for session ids not known yet (they may precede the
        #: session/new answer), bounded in total and in distinct ids.
        self._early: dict[str, list[Any]] = {}
        self._early_count = 0
        #: Updates dropped because that buffer was full (reported once per overflow).
        self.early_dropped = 0
        self._early_reported = False
        self.transport: ProcessTransport | None = None
        self.conn: Connection = None  # type: ignore[assignment]
        self.services: Any = None
        #: The agent and every terminal it asks for: nothing in it outlives :meth:`close`.
        self.scope = Scope("session")

    # -- lifecycle ----------------------------------------------------------

    async def start(self, *, meanwhile: Callable[[], object] | None = None) -> "Client":
        """Start the agent's process and ``initialize`` it. ``meanwhile()`` runs once the process
        is spawned, while the agent starts (time this client is idle): the text CLI imports its
        tool call renderers there, not in the first tool call."""
        limits = self.settings.limits
        if self.warm_schema:
            schema_in_background()  # while the agent starts: its first question then waits for nothing
        self.transport = ProcessTransport(
            self.spec.command, env=self.spec.env, cwd=self.cwd, hint=self.spec.install,
            write_buffer_bytes=limits.write_buffer_bytes, write_stall_seconds=limits.write_stall_seconds,
            scope=self.scope.child("agent"),
        )
        kwargs = {"max_line": self.max_line} if self.max_line else {}
        self.conn = Connection(self.transport, name=f"agent {self.spec.name!r}", max_depth=limits.json_depth, **kwargs)
        self.conn.on_report = self._on_report
        self.conn.on_notification("session/update", self._on_update)
        self.conn.on_text_chunk = self._on_text_chunk
        self.conn.on_tool_update = self._on_tool_update
        self.services = services_mod.install(self.conn, self)
        await self.conn.start()
        try:  # until it returns, nobody else holds this client: it closes what it started
            if meanwhile is not None:
                meanwhile()
            self.init = await self.request(
                "initialize",
                {
                    "protocolVersion": 1,
                    "clientCapabilities": services_mod.client_capabilities(
                        terminal_auth=self.settings.terminal_auth, url_elicitation=self.settings.url_elicitation),
                    "clientInfo": {"name": "acp-kernel", "title": "acp-kernel (Jupyter)", "version": __version__},
                },
            ) or {}
            if not isinstance(self.init, dict):
                self.init = {}
            version_ = self.init.get("protocolVersion")
            if version_ not in (1, None):
                self._on_report("protocol", f"the agent speaks protocol version {version_!r}; this client speaks 1")
            # Started means ready to stream: an import still running would take every other
            # 5 ms slice of the GIL from the first turn (an agent that answers ``initialize``
            # sooner than the import takes, as fast agents do, waits the rest here).
            if self.warm_schema:
                await schema_imported(SCHEMA_WAIT)
        except BaseException:
            await self.close()
            raise
        return self

    async def request(self, method: str, params: Any = None) -> Any:
        """Every request but ``session/prompt`` goes here: it has a timeout
        (``limits.initialize_seconds`` for ``initialize``, generous since
        ``npx`` may download the agent first; ``limits.request_seconds`` for
        the rest). A turn has none: cancelling it is the user's call."""
        limits = self.settings.limits
        if method == "initialize":
            seconds, setting = limits.initialize_seconds, "initialize_seconds"
        else:
            seconds, setting = limits.request_seconds, "request_seconds"
        return await self.conn.request(method, params, timeout=seconds if seconds > 0 else None, setting=setting)

    async def close(self) -> None:
        """Close every session (``session/close`` where offered, bounded), end every
        terminal, close stdin, give the agent a moment, end its tree."""
        try:
            await asyncio.gather(*(self.close_session(sid) for sid in list(self.sessions)))
            if self.services is not None:
                await self.services.shutdown()
            if self.conn is not None:
                await self.conn.close()
        finally:
            await self.scope.end()  # whatever escaped its terminal or agent

    def kill_now(self) -> None:
        """Synchronous last resort (interpreter exit, a close that failed):
        SIGKILL every terminal's tree and the agent's."""
        self.scope.kill_now()

    @property
    def alive(self) -> bool:
        return self.conn is not None and not self.conn.closed

    # -- what the agent said about itself -------------------------------------

    @property
    def agent_info(self) -> dict[str, Any]:
        info = self.init.get("agentInfo")
        return info if isinstance(info, dict) else {}

    @property
    def capabilities(self) -> dict[str, Any]:
        caps = self.init.get("agentCapabilities")
        return caps if isinstance(caps, dict) else {}

    @property
    def auth_methods(self) -> list[dict[str, Any]]:
        methods = self.init.get("authMethods")
        return [m for m in methods if isinstance(m, dict)] if isinstance(methods, list) else []

    def can(self, feature: str) -> bool:
        """What the agent advertised: ``load``, ``logout`` (``auth.logout``) and the
        ``sessionCapabilities``: ``list``, ``resume``, ``close``, ``delete``,
        ``additionalDirectories``."""
        caps = self.capabilities
        if feature == "load":
            return bool(caps.get("loadSession"))
        group = caps.get("auth") if feature == "logout" else caps.get("sessionCapabilities")
        return isinstance(group, dict) and group.get(feature) is not None

    # -- sessions -----------------------------------------------------------

    def _session(self, session_id: str, cwd: str, roots: list[str]) -> Session:
        session = Session(self, session_id, cwd, self.settings, interactive=self.interactive,
                          additional_directories=roots)
        self.sessions[session_id] = session
        self._closed.discard(session_id)
        early = self._early.pop(session_id, ())
        self._early_count -= len(early)
        if not self._early:
            self._early_reported = False  # a later overflow is reported again
        for update in early:
            session.apply(update)
        return session

    async def _call_session(self, method: str, params: dict[str, Any]) -> Any:
        try:
            return await self.request(method, params)
        except RpcError as exc:
            if exc.code == AUTH_REQUIRED:
                raise AuthRequired(self.auth_methods, describe_auth(self.auth_methods, self.spec)) from exc
            raise

    def roots(self) -> list[str]:
        """The ``additionalDirectories`` a session opened now is given: the
        settings' extra roots, or none where the agent does not take them."""
        return absolute_roots(self.settings.extra_roots) if self.can("additionalDirectories") else []

    def _setup(self, cwd: str, roots: list[str], mcp_servers: list[dict[str, Any]]) -> dict[str, Any]:
        """The params every session set-up shares (new, load, resume)."""
        params: dict[str, Any] = {"cwd": cwd, "mcpServers": mcp_servers}
        if roots:
            params["additionalDirectories"] = roots
        if self.meta:
            params["_meta"] = dict(self.meta)
        return params

    async def new_session(self, cwd: str | None = None, mcp_servers: list[dict[str, Any]] | None = None) -> Session:
        cwd, roots = os.path.abspath(cwd or self.cwd), self.roots()
        result = await self._call_session(
            "session/new", self._setup(cwd, roots, self.mcp_servers if mcp_servers is None else mcp_servers))
        sid = result.get("sessionId") if isinstance(result, dict) else None
        if not isinstance(sid, str) or not sid:
            raise AcpError(f"the agent's session/new result has no sessionId: {result!r:.200}")
        session = self._session(sid, cwd, roots)
        session._adopt(result)
        return session

    async def load_session(self, session_id: str, cwd: str | None = None, *, resume: bool | None = None) -> Session:
        """Reopen a session: ``session/resume`` (no replay) where the agent
        offers it and ``resume`` is not False, else ``session/load``, whose
        history replay lands in ``session.background``."""
        cwd, roots = os.path.abspath(cwd or self.cwd), self.roots()
        use_resume = self.can("resume") if resume is None else resume
        if not use_resume and not self.can("load"):
            raise AcpError("this agent cannot reopen sessions (it advertises neither load nor resume)")
        session = self._session(session_id, cwd, roots)
        method = "session/resume" if use_resume else "session/load"
        try:
            result = await self._call_session(
                method, {"sessionId": session_id, **self._setup(cwd, roots, self.mcp_servers)})
        except BaseException:
            self.sessions.pop(session_id, None)
            raise
        if isinstance(result, dict):
            session._adopt(result)
        if method == "session/load":  # some agents answer first and replay after
            await session.replay_settled()
        return session

    async def list_sessions(self, cwd: str | None = None) -> list[dict[str, Any]]:
        if not self.can("list"):
            raise AcpError("this agent does not list sessions")
        params: dict[str, Any] = {}
        if cwd:
            params["cwd"] = os.path.abspath(cwd)
        result = await self.request("session/list", params)
        sessions = result.get("sessions") if isinstance(result, dict) else None
        return [s for s in sessions if isinstance(s, dict)] if isinstance(sessions, list) else []

    async def authenticate(self, method_id: str) -> Any:
        return await self.request("authenticate", {"methodId": method_id})

    async def logout(self) -> None:
        """``logout``, where the agent offers it (``auth.logout``); new sessions
        need a login again."""
        if not self.can("logout"):
            raise AcpError(f"{self.spec.display_name()} does not offer logout (no agentCapabilities.auth.logout)")
        await self.request("logout", {})

    async def close_session(self, session_id: str) -> str | None:
        """The client is done with a session (``%new``, another agent, shutdown,
        the CLI's end): its questions and terminals end, and the agent is sent
        ``session/close`` where it offers it, waited on at most
        ``limits.close_seconds``. Never raises for the agent: returns why its
        close failed (None: closed, or nothing to send), for a note."""
        self.sessions.pop(session_id, None)
        self._closed.add(session_id)
        if self.services is not None:
            await self.services.close_session(session_id)
        if not self.alive or self.needs_restart or not self.can("close"):
            return None
        seconds = self.settings.limits.close_seconds
        try:
            await asyncio.wait_for(self.conn.request("session/close", {"sessionId": session_id}),
                                   seconds if seconds > 0 else None)
        except asyncio.TimeoutError:
            return f"no answer to session/close within {seconds:g} s (limits.close_seconds)"
        except (AcpError, OSError) as exc:
            return f"session/close failed: {exc}"
        return None

    async def delete_session(self, session_id: str) -> None:
        """``session/delete``, where the agent offers it: the session leaves its
        ``session/list``. The session this client has open is refused (close it first)."""
        if not self.can("delete"):
            raise AcpError(f"{self.spec.display_name()} does not delete sessions "
                           "(no agentCapabilities.sessionCapabilities.delete)")
        if session_id in self.sessions:
            raise AcpError(f"session {session_id} is open here; start another one first")
        await self.request("session/delete", {"sessionId": session_id})

    # -- Host (for services) --------------------------------------------------

    def session_context(self, session_id: Any) -> Session:
        session = self.sessions.get(session_id) if isinstance(session_id, str) else None
        if session is None:
            closed = " (closed by the client)" if type(session_id) is str and session_id in self._closed else ""
            raise RpcError(INVALID_PARAMS, f"unknown session id {session_id!r}{closed}")
        return session

    # -- incoming -------------------------------------------------------------

    def _on_update(self, params: Any) -> None:
        if type(params) is not dict:
            self._on_report("protocol", f"session/update without params object: {params!r:.200}")
            return
        sid = params.get("sessionId")
        session = self.sessions.get(sid) if type(sid) is str else None
        if session is not None:
            session.apply(params.get("update"))
            return
        if type(sid) is str and sid in self._closed:
            return  # a closed session's last words: nobody shows them
        self._keep_early(sid if type(sid) is str else "", params.get("update"))

    def _on_text_chunk(self, sid: str, kind: str, texts: list[str], message_id: str | None = None) -> None:
        """:meth:`_on_update` of a run of plain text chunks (of one message id, or none), read
        typed (``Connection.on_text_chunk``): an open session's turn takes the run
        (:meth:`.Turn.apply_texts`); any other session, one update each."""
        session = self.sessions.get(sid)
        if session is not None:
            session.apply_texts(kind, texts, message_id)
            return
        for text in texts:
            update: dict[str, Any] = {"sessionUpdate": kind, "content": {"type": "text", "text": text}}
            if message_id is not None:
                update["messageId"] = message_id
            self._on_update({"sessionId": sid, "update": update})

    def _on_tool_update(self, run: list[tuple[str, framing.ToolUpdate, bytes]]) -> None:
        """:meth:`_on_update` of a run of tool call updates read typed
        (``Connection.on_tool_update``): an open session's turn takes its stretch of the run
        as it is; any other session, each as the dict it would have been. A failure is raised
        once the whole run has been taken."""
        sessions, end, failed = self.sessions, len(run), None
        start = 0
        while start < end:
            sid = run[start][0]
            stop = start + 1
            while stop < end and run[stop][0] == sid:
                stop += 1
            session = sessions.get(sid)
            try:
                if session is not None:
                    session.apply_tools(run, start, stop)
                else:
                    for i in range(start, stop):
                        self._on_update({"sessionId": sid, "update": framing.update_of(run[i][2])})
            except Exception as exc:
                failed = failed or exc
            start = stop
        if failed is not None:
            raise failed

    def _keep_early(self, sid: str, update: Any) -> None:
        """Keep an update for a session id not known (yet): at most
        ``limits.unknown_session_updates`` in all, for at most
        ``EARLY_SESSIONS`` ids; the overflow is dropped with one report."""
        early = self._early.get(sid)
        limit = self.settings.limits.unknown_session_updates
        if self._early_count < limit and (early is not None or len(self._early) < EARLY_SESSIONS):
            if early is None:
                early = self._early[sid] = []
            early.append(update)
            self._early_count += 1
            return
        self.early_dropped += 1
        if not self._early_reported:
            self._early_reported = True
            why = (f"{limit:,} updates (limits.unknown_session_updates)" if self._early_count >= limit
                   else f"{EARLY_SESSIONS} distinct unknown session ids")
            self._on_report(
                "protocol",
                f"updates for unknown session ids: keeping at most {why}; dropping the rest "
                f"(first dropped: session {sid!r:.80})",
            )

    def _on_report(self, kind: str, text: str) -> None:
        if kind == "stalled":
            self.needs_restart = True
        # Repeats coalesce by kind; noise and handler errors by their reason
        # ("not JSON", "invalid UTF-8", the method), so each reason shows once.
        group = f"{kind}: {text.split(':', 1)[0]}" if kind in ("noise", "handler-error") else kind
        notice = Notice("warning", f"{kind}: {text}", kind=group)
        self.reports.append(notice)
        del self.reports[:-200]
        for session in self.sessions.values():
            if session._active is not None:
                session._active.add(notice)


async def connect(
    spec: AgentSpec,
    *,
    cwd: str | None = None,
    settings: ClientSettings | None = None,
    **kwargs: Any,
) -> Client:
    """Start an agent and initialize it."""
    return await Client(spec, cwd=cwd, settings=settings, **kwargs).start()
