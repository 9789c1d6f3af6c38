"""The ``notebook`` MCP server's side of a controller: which tools a session
gets, who allows an ``execute``, and where its run is shown.

A front-end says what it can serve (:class:`NotebookSide`: the ACP kernel has
no Python namespace, so only the document's tools, :data:`DOCUMENT_TOOLS`; a
python3 kernel with the magics has them all); :class:`SessionBridge` answers the server
(:mod:`acp_kernel.notebook_mcp`) for the controller's *current* session: the
permission question goes through the same broker and turn view as the
agent's own tool calls, and the run is a tool call of the running turn.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass, field
from typing import Any, Callable

#: The title of the tool call an ``execute`` shows in the turn (ours, not the agent's).
EXECUTE_TITLE = "Run Python in this notebook's kernel"
#: The question about a new cell where no page of ours shows proposals (``set_next_input``).
INSERT_TITLE = "Put the agent's new cell below this one when the turn ends"
#: The notebook server's tools, in its listing order (notebook_mcp.wire.TOOLS, which this layer does not import).
NOTEBOOK_TOOLS = ("execute", "variables", "cells", "insert_cell", "edit_cell", "delete_cell", "run_cell")
ALL_TOOLS = frozenset(NOTEBOOK_TOOLS)
#: The tools a front-end without a Python namespace serves (the ACP kernel).
DOCUMENT_TOOLS = frozenset({"cells", "insert_cell", "edit_cell", "delete_cell"})
_ids = itertools.count(1)


@dataclass(frozen=True)
class Origin:
    """The notebook request a turn runs for: the ``execute_request``'s message id and
    the cell id the front-end sent in its metadata (JupyterLab and Notebook 7 send
    ``cellId``). The page groups a turn's proposals under that cell; either may be ""."""

    request: str = ""
    cell: str = ""

    @classmethod
    def of(cls, parent: dict[str, Any] | None) -> "Origin":
        """From a kernel's parent message (``Kernel.get_parent("shell")``)."""
        parent = parent if isinstance(parent, dict) else {}
        header, metadata = parent.get("header"), parent.get("metadata")
        header = header if isinstance(header, dict) else {}
        metadata = metadata if isinstance(metadata, dict) else {}
        if header.get("msg_type") != "execute_request":
            return cls()
        return cls(str(header.get("msg_id") or "")[:200], str(metadata.get("cellId") or "")[:200])


NO_ORIGIN = Origin()


def _no_namespace() -> dict[str, Any] | None:
    return None


@dataclass
class NotebookSide:
    """What a front-end can give the server: its tools and where their data is."""

    tools: frozenset[str]
    namespace: Callable[[], dict[str, Any] | None] = _no_namespace
    history: Callable[[], list[str]] = field(default=list)


def typed_history(ip: Any) -> list[str]:
    """The cells an IPython shell ran, as typed (``In`` holds IPython's rewrite
    of magics: ``get_ipython().run_line_magic(...)``)."""
    hm = getattr(ip, "history_manager", None)
    raw = getattr(hm, "input_hist_raw", None) or ip.user_ns.get("In") or []
    return [str(s) for s in raw[1:]]


def ipython_side(ip: Any) -> NotebookSide:
    """All of the server's tools, on this IPython kernel's namespace."""
    return NotebookSide(ALL_TOOLS, namespace=lambda: ip.user_ns, history=lambda: typed_history(ip))


def known_notebook(namespace: dict[str, Any] | None = None) -> str | None:
    """The .ipynb this kernel runs, when the frontend said: VS Code puts
    ``__vsc_ipynb_file__`` in the namespace, Jupyter Server sets
    ``JPY_SESSION_NAME`` (the absolute path, or a path relative to the
    kernel's directory). None when neither names an existing notebook."""
    for candidate in ((namespace or {}).get("__vsc_ipynb_file__"), os.environ.get("JPY_SESSION_NAME")):
        if not isinstance(candidate, str) or not candidate.endswith(".ipynb"):
            continue
        for path in (candidate, os.path.join(os.getcwd(), os.path.basename(candidate))):
            if os.path.isabs(path) and os.path.isfile(path):
                return path
    return None


def reason_refused(by: str, outcome: str = "the code did not run") -> str:
    """What the agent is told when an ``execute`` (or a new cell: ``outcome``) was not
    allowed (``Verdict.by``)."""
    return {
        "policy": f"refused by the permission policy (deny): {outcome}",
        "remembered": f"the user refused this for the session: {outcome}",
        "user": f"the user refused: {outcome}",
        "headless": f"refused: nobody can answer a permission question here (a headless run); {outcome}",
        "limit": f"refused: too many questions already wait for the user; {outcome}",
        "between-turns": f"refused: no turn was running in this session; {outcome}",
    }.get(by, f"the question was cancelled: {outcome}")


class _Run:
    """One ``execute`` as a tool call of the running turn (the session applies
    our updates as it applies the agent's, so the same view shows them)."""

    def __init__(self, session: Any, code: str) -> None:
        self.session = session
        self.id = f"notebook-execute-{next(_ids)}"
        self._tail = ""  # the end of what was written (a failed run's last line is there already)
        session.apply({
            "sessionUpdate": "tool_call", "toolCallId": self.id, "title": EXECUTE_TITLE, "kind": "execute",
            "status": "in_progress", "rawInput": {"code": code},
            # The code as text: the view shows tool text verbatim, the transcript fences it.
            "content": [{"type": "content", "content": {"type": "text", "text": code}}],
            "_meta": {"terminal_info": {"terminal_id": self.id}},
        })

    def write(self, name: str, text: str) -> None:
        if text:
            self._tail = (self._tail + text)[-500:]
            self.session.apply({"sessionUpdate": "tool_call_update", "toolCallId": self.id,
                                "_meta": {"terminal_output": {"terminal_id": self.id, "data": text}}})

    def done(self, ok: bool, summary: str) -> None:
        """The end: the value's repr as ``Out:``, or the error's line (status and
        exit code say the rest; a run with nothing to show adds no line)."""
        if (ok and summary == "done") or (not ok and summary and summary.strip() in self._tail):
            summary = ""
        elif ok and summary:
            summary = f"Out: {summary}"
        tail = f"{summary}\n" if summary and not summary.endswith("\n") else summary
        meta: dict[str, Any] = {"terminal_exit": {"terminal_id": self.id, "exit_code": 0 if ok else 1}}
        if tail:
            meta["terminal_output"] = {"terminal_id": self.id, "data": tail}
        self.session.apply({"sessionUpdate": "tool_call_update", "toolCallId": self.id,
                            "status": "completed" if ok else "failed", "_meta": meta})


class SessionBridge:
    """The server's view of one controller (duck-typed ``NotebookBridge``)."""

    def __init__(self, controller: Any, side: NotebookSide) -> None:
        self.controller = controller
        self.side = side
        self.tools = frozenset(side.tools) & ALL_TOOLS
        self._below: Any = None  # the last turn that put a cell below its own (one per turn)

    def namespace(self) -> dict[str, Any] | None:
        return self.side.namespace()

    def notebook_path(self) -> str | None:
        return known_notebook(self.namespace())

    def policy(self) -> str:
        return str(self.controller.settings.permissions)

    def history(self) -> list[str]:
        return [str(s) for s in self.side.history() if str(s).strip()]

    def _turn_session(self) -> Any:
        session = self.controller.session
        return session if session is not None and session._active is not None else None

    def origin(self) -> Origin:
        """The notebook request of the turn running now (its proposals are grouped there)."""
        session = self._turn_session()
        return session._active.origin if session is not None else NO_ORIGIN

    async def authorize(self, code: str, title: str = EXECUTE_TITLE, kind: str = "execute") -> tuple[bool, str]:
        """The same broker, policy and question UI as the agent's tool calls."""
        session = self._turn_session()
        if session is None:
            return False, "refused: no notebook cell is running a prompt of this session, so nobody can see the code"
        # code=: shown whole; a person who just allowed exactly this code, in the agent's own question
        # of a class that covers an execute, is not asked again (once; "always": for the session).
        verdict = await session.client.services.permissions.authorize(
            session, title=title, kind=kind, raw_input={"code": code}, code=code,
            hint="%permissions allow-all (or --permissions allow-all) lets it run.")
        outcome = "the code did not run" if kind == "execute" else "the notebook was not changed"
        return verdict.allowed, "" if verdict.allowed else reason_refused(verdict.by, outcome)

    def show(self, title: str, text: str) -> None:
        """A row of ours in the running turn: ``text`` shown verbatim under ``title``."""
        session = self._turn_session()
        if session is None:
            return
        session.apply({
            "sessionUpdate": "tool_call", "toolCallId": f"notebook-proposal-{next(_ids)}", "title": title,
            "kind": "edit", "status": "failed",
            "content": [{"type": "content", "content": {"type": "text", "text": text}}],
        })

    def next_input(self, text: str) -> str:
        """A new cell below the running one when it ends (``set_next_input``), one per turn;
        "" when it will be, else why not (said to the agent)."""
        session = self._turn_session()
        if session is None:
            return "no cell is running a prompt of this session"
        if session._active is self._below:
            return "one new cell per turn goes below the turn's cell, and this turn has one"
        if not self.controller.frontend.next_input(text):
            return "this front-end takes no new cell from the kernel (a headless run: nobody would see it)"
        self._below = session._active
        return ""

    def started(self, code: str) -> _Run:
        session = self._turn_session() or self.controller.session
        return _Run(session, code)

    def interrupted(self) -> None:
        """The user interrupted the code: the turn stops too (one interrupt stops everything)."""
        self.controller.interrupt()
