"""The document comm between the notebook page (the ``acp-kernel`` front-end extension)
and the kernel: message shapes, bounds and budgets, in one place.

The page opens the comm; the kernel asks it for things by ``type`` with a request
``id`` and the page answers with the same ``id``: a snapshot of the live notebook, or a
proposal. Either side ignores a ``type`` it does not know.

Proposals: the kernel sends :class:`Propose` (an insert, an edit or a delete the agent
asked for), the page shows it where it applies and answers :class:`Decided` once the
user accepted or rejected it (or at once: applied under ``allow-all``, or not applicable).

Everything the page sends is cut there first (the caps below travel in each request,
so this module is their one source); the models bound it again, so a page that sends
more is refused, not believed.
"""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import BaseModel, ConfigDict, Field

#: The comm target the kernel registers; the page opens a comm to it.
DOCUMENT_TARGET = "acp_kernel.document"
#: The comm protocol's version; a page speaking another one is refused.
PROTOCOL = 1

#: How long the kernel waits for the page's snapshot, in seconds.
SNAPSHOT_TIMEOUT = 5.0
#: How long a proposal waits for the user in the page (which then withdraws it), in seconds.
PROPOSAL_SECONDS = 15 * 60
#: The longest source a proposal carries.
PROPOSAL_SOURCE = 20_000
#: Proposals that may wait for the user at once (more are refused: each is a box in the page).
PROPOSALS_WAITING = 8
#: How long an unanswered proposal waits for a page of its notebook once the last one
#: showing it closed (a reload opens the next within seconds), in seconds.
PAGE_GRACE = 60.0

#: What the page keeps when it cuts (the head and the tail of a text, the count between).
OUTPUT_CHARS = 1_500  # per output's text (below CELL_OUTPUT_LIMIT: one cut output shows whole)
SOURCE_CHARS = 20_000  # per cell's source
OUTPUTS_PER_CELL = 20  # more are counted
TOTAL_CHARS = 1_000_000  # the whole snapshot's text; cells past it are sent as stubs
STUB_CHARS = 200  # a stub's source head
MAX_CELLS = 10_000

#: The ``cells`` answer (formatted in tools.py): all of it, and one cell shown in full
#: (its source, its outputs' text), in characters; the tool's description states them.
CELLS_BUDGET = 20_000
CELL_SOURCE_LIMIT = 4_000
CELL_OUTPUT_LIMIT = 2_000

#: Hard bounds in the models: above the caps, so only a page that ignores them trips one.
_TEXT = OUTPUT_CHARS + 100
_SOURCE = SOURCE_CHARS + 100
_NAME = 300


class _Loose(BaseModel):
    """What the page sends: fields we do not know are ignored (a newer page)."""

    model_config = ConfigDict(extra="ignore")


class Hello(_Loose):
    """page -> kernel, the ``comm_open`` data."""

    type: Literal["hello"] = "hello"
    protocol: int
    path: str = Field(default="", max_length=4_096)
    app: str = Field(default="", max_length=_NAME)


class Welcome(BaseModel):
    """kernel -> page, the first message on an accepted comm."""

    type: Literal["welcome"] = "welcome"
    protocol: int = PROTOCOL


class Caps(BaseModel):
    """The caps the page cuts to (sent with each snapshot request)."""

    output_chars: int = OUTPUT_CHARS
    source_chars: int = SOURCE_CHARS
    outputs_per_cell: int = OUTPUTS_PER_CELL
    total_chars: int = TOTAL_CHARS
    stub_chars: int = STUB_CHARS
    max_cells: int = MAX_CELLS


class SnapshotRequest(BaseModel):
    """kernel -> page: send the notebook as it is now."""

    type: Literal["snapshot_request"] = "snapshot_request"
    id: int
    caps: Caps = Field(default_factory=Caps)


class Text(_Loose):
    """A text cut by the page: ``head``, then ``omitted`` characters left out, then ``tail``."""

    head: str = Field(default="", max_length=_SOURCE)
    tail: str = Field(default="", max_length=_SOURCE)
    omitted: int = Field(default=0, ge=0)


class Mime(_Loose):
    """A non-text output part, named with its size (images are never sent)."""

    mime: str = Field(max_length=_NAME)
    size: int = Field(default=0, ge=0)


class Stream(_Loose):
    output_type: Literal["stream"]
    name: str = Field(default="stdout", max_length=_NAME)
    text: Text = Field(default_factory=Text)


class Error(_Loose):
    output_type: Literal["error"]
    ename: str = Field(default="", max_length=_TEXT)
    evalue: Text = Field(default_factory=Text)


class Data(_Loose):
    output_type: Literal["execute_result", "display_data"]
    text: Text | None = None  # its text/plain
    others: list[Mime] = Field(default_factory=list, max_length=50)


class OtherOutput(_Loose):
    output_type: str = Field(max_length=_NAME)


Output = Annotated[Union[Stream, Error, Data], Field(discriminator="output_type")]


class Cell(_Loose):
    id: str = Field(default="", max_length=_NAME)
    cell_type: str = Field(max_length=_NAME)
    source: Text = Field(default_factory=Text)
    execution_count: int | None = None
    outputs: list[Union[Output, OtherOutput]] = Field(default_factory=list, max_length=OUTPUTS_PER_CELL)
    outputs_omitted: int = Field(default=0, ge=0)
    stub: bool = False  # past the page's total budget: source head only, no outputs


class Snapshot(_Loose):
    """page -> kernel: the answer to :class:`SnapshotRequest` ``id``."""

    type: Literal["snapshot"] = "snapshot"
    id: int
    path: str = Field(default="", max_length=4_096)
    dirty: bool = False
    active: int | None = None  # the active cell's index
    selected: list[int] = Field(default_factory=list, max_length=MAX_CELLS)
    cells: list[Cell] = Field(default_factory=list, max_length=MAX_CELLS)
    cells_omitted: int = Field(default=0, ge=0)


class CellRequest(BaseModel):
    """kernel -> page: one cell's whole source as it is now (``run_cell``)."""

    type: Literal["cell_request"] = "cell_request"
    id: int
    cell_id: str


class CellSource(_Loose):
    """page -> kernel: the answer to :class:`CellRequest` ``id`` (a source longer than
    :data:`PROPOSAL_SOURCE` is not sent: the page answers an error)."""

    type: Literal["cell"] = "cell"
    id: int
    cell_id: str = Field(default="", max_length=_NAME)
    cell_type: str = Field(default="code", max_length=_NAME)
    source: str = Field(default="", max_length=PROPOSAL_SOURCE)


class Failed(_Loose):
    """page -> kernel: request ``id`` could not be answered."""

    type: Literal["error"] = "error"
    id: int
    error: str = Field(default="", max_length=_TEXT)


class Propose(BaseModel):
    """kernel -> page: show the agent's change to the notebook; answer with :class:`Decided`."""

    type: Literal["propose"] = "propose"
    id: int
    kind: Literal["insert", "edit", "delete"]
    #: edit, delete: the cell; insert: the cell to insert below ("" = below the active cell)
    cell_id: str = ""
    cell_type: Literal["code", "markdown"] = "code"
    source: str | None = Field(default=None, max_length=PROPOSAL_SOURCE)  # insert; edit: the whole new source
    old: str | None = Field(default=None, max_length=PROPOSAL_SOURCE)  # edit: the snippet replaced...
    new: str | None = Field(default=None, max_length=PROPOSAL_SOURCE)  # ...by this
    #: Applied at once (the ``allow-all`` policy), still shown; else only once the user accepts.
    apply: bool = False
    #: The page withdraws an unanswered proposal after this many seconds.
    seconds: float = PROPOSAL_SECONDS
    #: The turn that made it: its ``execute_request``'s message id (the page withdraws the turn's
    #: unanswered proposals once that request is done) and its cell's id (where the page shows
    #: the turn's Accept all, Reject all and Undo). "" for none (a passthrough terminal).
    turn: str = Field(default="", max_length=_NAME)
    turn_cell: str = Field(default="", max_length=_NAME)


class Withdrawn(BaseModel):
    """kernel -> page: proposal ``id`` is no longer waiting (answered in another page showing
    the same notebook, or the agent stopped waiting); the page takes its buttons away."""

    type: Literal["withdrawn"] = "withdrawn"
    id: int
    why: str = ""


class Decided(_Loose):
    """page -> kernel: what became of :class:`Propose` ``id``."""

    type: Literal["decided"] = "decided"
    id: int
    #: applied (accepted, or at once under allow-all); rejected; conflict (the user changed the
    #: cell while the proposal waited); invalid (no such cell, a snippet not found once); expired;
    #: withdrawn (its turn ended first: an interrupt, or the agent went on).
    outcome: Literal["applied", "rejected", "conflict", "invalid", "expired", "withdrawn"]
    cell_id: str = Field(default="", max_length=_NAME)  # the cell inserted or changed
    detail: str = Field(default="", max_length=_TEXT)  # why (invalid, conflict), or the user's words
