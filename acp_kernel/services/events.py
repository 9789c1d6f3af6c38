"""What the client services tell the session layer, via ``ctx.emit(event)``.

Plain dataclasses: the session layer puts them into the current turn and the
renderer shows them. Prompts (permission, elicitation) carry a future the UI
resolves; their answer methods are safe to call from any thread, because
ipywidget callbacks may run on a kernel subshell thread.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:  # pragma: no cover
    from .terminals import ExitStatus, Terminal


@dataclass(slots=True)
class Notice:
    """Something a person should know: agent noise, a protocol problem, a decision.

    Repeated warnings are coalesced (:meth:`acp_kernel.client.turn.Turn.add`): after the first few of
    a kind, one summary notice stands for the rest. It has a stable ``key`` and
    a growing ``count``, and the same object is re-emitted to listeners (not
    re-added to ``events``) as it changes, so a view updates one display.
    """

    level: str  # "info", "warning" or "error"
    text: str
    session_id: Optional[str] = None
    #: What kind of report ("noise", "protocol", ...): repeats of a kind coalesce.
    kind: Optional[str] = None
    #: Set on a summary only: the same for every re-emission.
    key: Optional[str] = None
    #: On a summary: how many notices it stands for.
    count: int = 0


@dataclass
class TerminalStarted:
    """A terminal process is running. ``terminal`` streams its output live
    (``terminal.subscribe``) and keeps the final snapshot after release."""

    session_id: str
    terminal_id: str
    argv: tuple[str, ...]
    cwd: str
    via_shell: bool
    terminal: Terminal
    #: Why the argv differs from what the agent sent (shell fallback), or "".
    note: str = ""
    #: Bytes of output kept (the agent's ``outputByteLimit``, capped by
    #: ``limits.max_output_byte_limit``); 0 when not said.
    output_limit: int = 0


@dataclass
class TerminalExited:
    session_id: str
    terminal_id: str
    exit_status: ExitStatus
    #: "exited" on its own, "killed" by terminal/kill, "released" by release
    #: or shutdown, "timeout" for a timed-out Terminal.
    how: str = "exited"


@dataclass
class FileRead:
    session_id: str
    path: str
    line: int | None
    limit: int | None
    chars: int


@dataclass
class FileWritten:
    session_id: str
    path: str
    created: bool
    bytes: int
    sha256: str = ""  # of the bytes written (the turn's record keeps it)


@dataclass
class PermissionResolved:
    """How a permission request was answered without (or after) asking."""

    session_id: str
    tool_call_id: str
    title: str | None
    option_id: str | None  # None: cancelled
    option_kind: str | None
    #: "policy", "remembered", "user", "headless", "cancelled", or "limit"
    #: (too many questions already waiting: answered cancelled at once)
    by: str


class _Prompt:
    """A question with a future answer, answerable from any thread."""

    future: asyncio.Future[Any]
    loop: asyncio.AbstractEventLoop

    def _resolve(self, value: Any) -> None:
        def settle() -> None:
            if not self.future.done():
                self.future.set_result(value)

        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self.loop:
            settle()
        elif not self.loop.is_closed():
            self.loop.call_soon_threadsafe(settle)
        # A closed loop: the client is gone and nobody awaits the answer.

    @property
    def done(self) -> bool:
        return self.future.done()

    async def ask(self, ctx: Any, pending: Any) -> Any:
        """Show this prompt (``ctx.emit``) and wait for the answer, tracked in
        ``pending`` (a :class:`PendingPrompts`, or any set) meanwhile so a
        cancel can answer it."""
        pending.add(self)
        try:
            ctx.emit(self)
            return await self.future
        finally:
            pending.discard(self)
            if not self.future.done():
                self.future.cancel()


class PendingPrompts:
    """Questions waiting for an answer, per session, under one cap.

    The permission broker and the form service share one instance (see
    :func:`acp_kernel.services.install`), so ``limits.pending_prompts``
    counts every question a session has open. A cancelled turn answers them
    all at once (:meth:`cancel_all`). Sessions with nothing pending are
    dropped, so the map stays as small as what waits.
    """

    def __init__(self) -> None:
        self._by_session: dict[Any, set[_Prompt]] = {}

    def add(self, prompt: _Prompt) -> None:
        self._by_session.setdefault(getattr(prompt, "session_id", None), set()).add(prompt)

    def discard(self, prompt: _Prompt) -> None:
        sid = getattr(prompt, "session_id", None)
        group = self._by_session.get(sid)
        if group is not None:
            group.discard(prompt)
            if not group:
                del self._by_session[sid]

    def count(self, session_id: Any) -> int:
        return len(self._by_session.get(session_id, ()))

    def full(self, session_id: Any, limit: int) -> bool:
        """True when ``limit`` questions of the session already wait."""
        return self.count(session_id) >= limit

    def pending(self, session_id: Any = None, kind: type | tuple[type, ...] | None = None) -> list[Any]:
        """Waiting prompts (of one session, of one prompt class), any order."""
        groups = self._by_session.values() if session_id is None else [self._by_session.get(session_id, set())]
        return [p for g in groups for p in g if kind is None or isinstance(p, kind)]

    def sessions(self, kind: type | tuple[type, ...] | None = None) -> list[Any]:
        return [sid for sid in self._by_session if self.pending(sid, kind)]

    def cancel_all(self, session_id: Any, kind: type | tuple[type, ...] | None = None) -> int:
        """Answer every waiting prompt of the session (of ``kind``) cancelled."""
        prompts = self.pending(session_id, kind)
        for prompt in prompts:
            prompt.cancel()
        return len(prompts)


@dataclass(eq=False)
class PermissionPrompt(_Prompt):
    """The agent asks permission; the UI answers with one of ``options``.

    ``request`` is the validated ``acp.schema.RequestPermissionRequest``;
    ``options`` are dicts ``{optionId, name, kind}`` (unknown kinds kept, so
    they can be shown, but never picked automatically).
    """

    session_id: str
    request: Any
    options: list[dict[str, Any]]
    kind: str | None
    future: asyncio.Future[Any]
    loop: asyncio.AbstractEventLoop
    title: str | None = None
    #: What actually runs or is touched, as plain text (a command line, the
    #: paths), identified from ``rawInput``/``locations`` or given by the
    #: client for its own questions; "" when nothing concrete was named.
    #: Show this next to the agent's title: the title is the agent's word.
    command: str = ""
    #: The working directory of ``command``, when known.
    cwd: str | None = None

    def answer(self, option_id: str) -> None:
        """Select an option by its id (as the agent sent it)."""
        if not any(o["optionId"] == option_id for o in self.options):
            raise ValueError(f"no option {option_id!r}; options are {[o['optionId'] for o in self.options]}")
        self._resolve(option_id)

    def _by_kind(self, kinds: tuple[str, ...]) -> str | None:
        for kind in kinds:
            for o in self.options:
                if o.get("kind") == kind:
                    return o["optionId"]
        return None

    def allow(self, *, always: bool = False) -> None:
        """Allow (once, or always when asked and offered); else cancel."""
        kinds = ("allow_always", "allow_once") if always else ("allow_once", "allow_always")
        self._resolve(self._by_kind(kinds))

    def reject(self, *, always: bool = False) -> None:
        """Reject (once, or always); with no reject option, cancel."""
        kinds = ("reject_always", "reject_once") if always else ("reject_once", "reject_always")
        self._resolve(self._by_kind(kinds))

    def cancel(self) -> None:
        self._resolve(None)


@dataclass(eq=False)
class ElicitationPrompt(_Prompt):
    """The agent asks the user to fill a form (``elicitation/create``, form mode).

    ``fields`` maps property names to their JSON-schema dicts; ``required``
    lists the names that must be answered.
    """

    session_id: str | None
    message: str
    schema: dict[str, Any]
    fields: dict[str, dict[str, Any]]
    required: list[str]
    future: asyncio.Future[Any]
    loop: asyncio.AbstractEventLoop
    request: Any = None
    tool_call_id: str | None = None
    errors: list[str] = field(default_factory=list)

    def accept(self, content: dict[str, Any]) -> None:
        missing = [name for name in self.required if name not in content or content[name] in (None, "")]
        if missing:
            raise ValueError(f"required field(s) missing: {', '.join(missing)}")
        unknown = [name for name in content if name not in self.fields]
        if unknown and self.fields:
            raise ValueError(f"unknown field(s): {', '.join(unknown)}")
        self._resolve({"action": "accept", "content": dict(content)})

    def decline(self) -> None:
        self._resolve({"action": "decline"})

    def cancel(self) -> None:
        self._resolve({"action": "cancel"})


@dataclass(eq=False)
class UrlElicitationPrompt(_Prompt):
    """The agent asks the user to open a page (``elicitation/create``, URL mode),
    e.g. to sign in somewhere; the client never opens it by itself.

    ``url`` passed :func:`acp_kernel.services.elicitation.check_url` (http or
    https, a host, no credentials, no spaces or controls) and is exactly what
    a click opens; ``host`` is its host in ASCII (an IDN as punycode: what the
    user should read), ``host_unicode`` its Unicode form when that differs.
    ``message`` is the agent's text: show it escaped, never as markdown.

    Per the spec, ``accept`` means the user consented to open the page (the
    view opens it on the same click), not that the page's work is done: the
    agent says that with ``elicitation/complete``, which sets ``completed``
    (only after an accept) and emits :class:`ElicitationCompleted`.
    """

    session_id: str
    elicitation_id: str
    message: str
    url: str
    host: str
    future: asyncio.Future[Any]
    loop: asyncio.AbstractEventLoop
    host_unicode: str = ""
    tool_call_id: str | None = None
    completed: bool = False

    def open(self) -> None:
        """The user clicked to open the page: consent (``accept``)."""
        self._resolve({"action": "accept"})

    def decline(self) -> None:
        self._resolve({"action": "decline"})

    def cancel(self) -> None:
        self._resolve({"action": "cancel"})


@dataclass
class ElicitationCompleted:
    """The agent said (``elicitation/complete``) that the page the user opened
    for ``prompt`` is done with."""

    session_id: str
    elicitation_id: str
    prompt: UrlElicitationPrompt


#: Every event the services emit into a turn, in one list. A turn's whole list
#: is :data:`acp_kernel.client.turn.TURN_EVENTS` (the update events, then
#: these); each renderer is a table keyed by it (tests/view/test_event_kinds.py
#: fails when a table lacks a kind). A new event: its class here, and its name here.
SERVICE_EVENTS: tuple[type, ...] = (
    Notice, TerminalStarted, TerminalExited, FileRead, FileWritten,
    PermissionResolved, PermissionPrompt, ElicitationPrompt, UrlElicitationPrompt, ElicitationCompleted,
)
