"""The comm wire between the MCP server process and the kernel: message shapes and limits.

Both ends validate with these models, so a bad message is a clear error on either side
rather than a KeyError deep in a handler. Replies travel on iopub (a broadcast every
frontend of the kernel receives), hence the bounds.
"""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import BaseModel, ConfigDict, Field

from .docwire import PROPOSAL_SECONDS, PROPOSAL_SOURCE

#: The comm target the kernel side registers; the server opens a comm to it.
COMM_TARGET = "acp_kernel.notebook"
#: Every tool, in listing order; a bridge offers a subset.
TOOLS = ("execute", "variables", "cells", "insert_cell", "edit_cell", "delete_cell", "run_cell")
#: The tools that change the notebook: proposals the user accepts or rejects in the page.
EDIT_TOOLS = ("insert_cell", "edit_cell", "delete_cell")

#: Bounds on one reply (text is cut with a note saying how much).
MAX_TEXT = 20_000
MAX_IMAGES = 4
MAX_IMAGE_BYTES = 1_000_000

#: The longest source an edit may carry (the page's snapshot cuts sources here too).
MAX_SOURCE = PROPOSAL_SOURCE
#: A cell id as nbformat 4.5 makes them (and as the ``cells`` tool shows them).
CELL_ID = r"^[A-Za-z0-9_-]{1,64}$"

#: The tools that run code in the kernel (after the user allows it): they may take long.
RUN_TOOLS = ("execute", "run_cell")

#: Server-side waits, in seconds.
EXECUTE_TIMEOUT = 30 * 60
#: How long the kernel waits for a proposal's answer: the page withdraws it first (``expired``).
PROPOSAL_TIMEOUT = PROPOSAL_SECONDS + 30
REQUEST_TIMEOUT = 30
CONNECT_TIMEOUT = 30


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Open(_Strict):
    """server -> kernel, the ``comm_open`` data."""

    token: str


class Ready(BaseModel):
    """kernel -> server, the first message on an accepted comm."""

    ready: Literal[True] = True
    tools: list[str]
    note: str = ""


class Refused(BaseModel):
    """kernel -> server, then the kernel closes the comm."""

    error: str


class ExecuteArgs(_Strict):
    code: str = Field(description="Python source to run in the notebook's kernel namespace. "
                      "The value of a final expression is returned, like a notebook cell.")


class VariablesArgs(_Strict):
    name: str | None = Field(default=None, description="One variable to describe in more detail "
                             "(omit to list every user variable).")


class CellsArgs(_Strict):
    pass


class InsertCellArgs(_Strict):
    source: str = Field(max_length=MAX_SOURCE, description="The new cell's source.")
    cell_type: Literal["code", "markdown"] = Field(default="code", description="code (default) or markdown.")
    after: str | None = Field(default=None, pattern=CELL_ID, description=(
        "The id of the cell to insert below (ids come from the cells tool); omit to insert below the "
        "user's active cell."))


class EditCellArgs(_Strict):
    cell_id: str = Field(pattern=CELL_ID, description="The id of the cell to change (from the cells tool).")
    source: str | None = Field(default=None, max_length=MAX_SOURCE, description=(
        "The cell's whole new source; or give old and new instead to replace one snippet."))
    old: str | None = Field(default=None, min_length=1, max_length=MAX_SOURCE, description=(
        "A snippet of the cell's source that occurs exactly once, to replace with new."))
    new: str | None = Field(default=None, max_length=MAX_SOURCE, description="What replaces old.")


class DeleteCellArgs(_Strict):
    cell_id: str = Field(pattern=CELL_ID, description="The id of the cell to delete (from the cells tool).")


class RunCellArgs(_Strict):
    cell_id: str = Field(pattern=CELL_ID, description="The id of the code cell to run (from the cells tool).")


ARGS: dict[str, type[BaseModel]] = {"execute": ExecuteArgs, "variables": VariablesArgs, "cells": CellsArgs,
                                    "insert_cell": InsertCellArgs, "edit_cell": EditCellArgs,
                                    "delete_cell": DeleteCellArgs, "run_cell": RunCellArgs}


class Request(_Strict):
    """server -> kernel: one tool call."""

    id: int
    tool: Literal["execute", "variables", "cells", "insert_cell", "edit_cell", "delete_cell", "run_cell"]
    args: dict = Field(default_factory=dict)


class Text(BaseModel):
    type: Literal["text"] = "text"
    text: str


class Image(BaseModel):
    type: Literal["image"] = "image"
    data: str  # base64
    mimeType: str = "image/png"


Content = Annotated[Union[Text, Image], Field(discriminator="type")]


class Reply(BaseModel):
    """kernel -> server: the answer to :class:`Request` ``id``."""

    id: int
    isError: bool = False
    content: list[Content] = Field(default_factory=list)


def error_reply(id: int, text: str) -> Reply:
    return Reply(id=id, isError=True, content=[Text(text=text)])
