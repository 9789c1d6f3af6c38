"""What the frontend of a cell can show, and how the kernel tells.

Three kinds of frontend run ACP cells:

- **a notebook with a widget manager** (JupyterLab, Notebook 7, VS Code):
  shows widgets, applies ``update_display_data`` in place, answers questions
  with buttons;
- **a terminal frontend** (``jupyter console``, qtconsole, terminal IPython,
  a notebook page without the widget extension): prints ``text/plain`` of
  each ``display_data`` and *ignores* ``update_display_data`` (jupyter
  console 6 and qtconsole have no handler for it; terminal IPython prints
  every update again), so the view must only append, and questions go
  through stdin (``input_request``);
- **headless** (nbclient, nbconvert, papermill): applies updates and stores
  widget state in the saved notebook, but nobody can answer a question
  (``allow_stdin`` is False in its ``execute_request``).

How a kernel tells: ipywidgets 8's widget manager (``@jupyter-widgets/base``
``ManagerBase._loadFromKernel``, used by jupyterlab_widgets 3 for every
notebook and console it tracks, on every kernel connection) opens a comm to
the target ``jupyter.widget.control``; older managers, and the fallback when
that comm is closed, send a ``comm_info_request`` for ``jupyter.widget``.
jupyter console, qtconsole and nbclient send neither. ``allow_stdin`` is
True for notebooks and consoles alike, so it only separates headless runs.
The widget manager's messages carry its client's session id in their
header, the same id as that client's ``execute_request``: so the rule holds
per client even when a console and a notebook share one kernel.

Pure: :func:`frontend_for` is the rule, :class:`WidgetClients` remembers who
announced a widget manager (fed each shell message by the kernel).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

#: Comm targets a widget manager opens or asks about when it connects.
WIDGET_TARGETS = frozenset({"jupyter.widget.control", "jupyter.widget"})
#: Client sessions remembered (a page reload makes a new one; old ones are dropped first).
MAX_CLIENTS = 64

Ask = Literal["widgets", "stdin", "none"]


@dataclass(frozen=True)
class Frontend:
    """What a cell's output can rely on."""

    #: Render widgets (tool call rows, buttons); their bundles still carry text.
    widgets: bool = True
    #: The frontend replaces an output on ``update_display_data``. False: append only.
    updates: bool = True
    #: Who answers questions: buttons, a typed line (``input_request``), or nobody.
    ask: Ask = "widgets"


NOTEBOOK = Frontend(widgets=True, updates=True, ask="widgets")
TERMINAL = Frontend(widgets=False, updates=False, ask="stdin")
HEADLESS = Frontend(widgets=True, updates=True, ask="none")


def frontend_for(*, widget_manager: bool, allow_stdin: bool) -> Frontend:
    """The rule: a widget manager means a notebook; otherwise a client that
    can answer ``input_request`` is a terminal frontend, and one that cannot
    is headless (which still gets widgets: nbclient saves their state)."""
    if widget_manager:
        return NOTEBOOK
    return TERMINAL if allow_stdin else HEADLESS


def _session_of(msg: Mapping[str, Any]) -> str | None:
    header = msg.get("header")
    session = header.get("session") if isinstance(header, Mapping) else None
    return session if isinstance(session, str) and session else None


def announces_widgets(msg: Mapping[str, Any]) -> bool:
    """Whether a shell message is a widget manager saying hello."""
    header = msg.get("header")
    kind = header.get("msg_type") if isinstance(header, Mapping) else None
    content = msg.get("content")
    if not isinstance(content, Mapping):
        return False
    if kind == "comm_open":
        return content.get("target_name") in WIDGET_TARGETS
    if kind == "comm_info_request":
        return content.get("target_name") in WIDGET_TARGETS
    return False


class WidgetClients:
    """Client sessions that announced a widget manager."""

    def __init__(self) -> None:
        self._sessions: dict[str, None] = {}  # insertion-ordered set

    def note(self, msg: Mapping[str, Any]) -> bool:
        """Look at one incoming shell message; True if it announced widgets."""
        if not announces_widgets(msg):
            return False
        session = _session_of(msg) or ""
        self._sessions.pop(session, None)
        self._sessions[session] = None
        while len(self._sessions) > MAX_CLIENTS:
            self._sessions.pop(next(iter(self._sessions)))
        return True

    def has_widgets(self, parent: Mapping[str, Any]) -> bool:
        """Whether the client that sent ``parent`` (an execute_request) has a widget manager."""
        session = _session_of(parent)
        return session is not None and session in self._sessions

    def frontend(self, parent: Mapping[str, Any], allow_stdin: bool) -> Frontend:
        return frontend_for(widget_manager=self.has_widgets(parent), allow_stdin=allow_stdin)
