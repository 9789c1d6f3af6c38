"""The comm wire between the MCP server process and the kernel: message shapes and limits.

Both ends validate with these models, so a bad message is a clear error on either side
rather than a KeyError deep in a handler. Replies travel on iopub (a broadcast every
frontend of the kernel receives), hence the bounds.
"""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import BaseModel, ConfigDict, Field

#: The comm target the kernel side registers; the server opens a comm to it.
COMM_TARGET = "acp_kernel.notebook"
#: Every tool, in listing order; a bridge offers a subset.
TOOLS = ("execute", "variables", "cells")

#: Bounds on one reply (text is cut with a note saying how much).
MAX_TEXT = 20_000
MAX_IMAGES = 4
MAX_IMAGE_BYTES = 1_000_000

#: Server-side waits, in seconds.
EXECUTE_TIMEOUT = 30 * 60
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


ARGS: dict[str, type[BaseModel]] = {"execute": ExecuteArgs, "variables": VariablesArgs, "cells": CellsArgs}


class Request(_Strict):
    """server -> kernel: one tool call."""

    id: int
    tool: Literal["execute", "variables", "cells"]
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
