"""What a front-end gives the controller, as typed protocols.

The ACP kernel (:class:`~acp_kernel.frontends.kernel_io.KernelFrontend`) and
the magics and Python API (:class:`~acp_kernel.frontends.api.IPythonFrontend`)
implement :class:`Frontend`. Every capability is declared here, with what
"not available" looks like (``notebook_side()`` and ``asker()`` return None),
so the client never probes a front-end for an attribute.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from .notebook import NotebookSide, Origin


class Sink(Protocol):
    """Where this cell's outputs go (:class:`~acp_kernel.view.sink.DisplaySink`)."""

    def display(self, data: dict, metadata: dict | None = None, display_id: str | None = None) -> None: ...

    def update(self, data: dict, metadata: dict | None = None, display_id: str = "") -> None: ...


class Shows(Protocol):
    """What the cell's frontend shows (:class:`~acp_kernel.view.frontend.Frontend`)."""

    @property
    def widgets(self) -> bool: ...

    @property
    def updates(self) -> bool: ...

    @property
    def ask(self) -> str: ...


class Asker(Protocol):
    """Who answers questions without widgets (a console's ``input_request``,
    terminal IPython's ``input()``): the view hands it each question with its
    tool call; :meth:`close` runs when the turn ends."""

    def __call__(self, prompt: Any, call: Any = None) -> None: ...

    def close(self) -> None: ...


@runtime_checkable
class Frontend(Protocol):
    """One front-end, asked within the running cell's context."""

    #: Which front-end's words the command table uses (``commands.KERNEL`` or ``commands.MAGICS``).
    kind: str

    def sink(self) -> Any:
        """This cell's sink (a :class:`Sink`)."""
        ...

    def frontend(self) -> Shows: ...

    def interactive(self) -> bool:
        """Can someone answer a permission question or a form now?"""
        ...

    def widgets(self) -> bool:
        """Can this front-end show widgets (buttons, live rows)?"""
        ...

    def notebook_side(self) -> NotebookSide | None:
        """What the ``notebook`` MCP server may reach here; None: no server."""
        ...

    def origin(self) -> Origin:
        """The notebook request running this cell (empty where there is none)."""
        ...

    def next_input(self, text: str) -> bool:
        """A new cell holding ``text`` below the running one when it ends (Jupyter's
        ``set_next_input`` payload); False where there is none (or one is set already)."""
        ...

    def asker(self) -> Asker | None:
        """Who answers through stdin; None: widgets (or nobody) answer."""
        ...
