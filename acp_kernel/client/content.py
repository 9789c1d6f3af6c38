"""Prompt content blocks, and what an agent may be sent.

Every agent takes ``text`` and ``resource_link`` blocks. ``image``, ``audio``
and embedded ``resource`` blocks only go to an agent whose
``promptCapabilities`` say so (ACP: the baseline is text and resource links).
:func:`gate` is pure: it rewrites what has a safe stand-in (an embedded file
becomes a link to it; embedded text with no file behind it becomes text) and
refuses the rest with a message a person can act on.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlparse

from ..errors import AcpError

#: Block types every agent accepts.
BASELINE = frozenset({"text", "resource_link"})
#: Block type -> the ``promptCapabilities`` flag that admits it.
CAPABILITY = {"image": "image", "audio": "audio", "resource": "embeddedContext"}


class ContentRefused(AcpError):
    """A prompt holds a block the agent cannot take and that has no stand-in."""


def text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def resource_link(path: str, name: str | None = None) -> dict[str, Any]:
    path = os.path.abspath(path)
    return {"type": "resource_link", "uri": "file://" + path, "name": name or os.path.basename(path)}


def embedded_resource(uri: str, text: str, mime_type: str | None = None) -> dict[str, Any]:
    resource: dict[str, Any] = {"uri": uri, "text": text}
    if mime_type:
        resource["mimeType"] = mime_type
    return {"type": "resource", "resource": resource}


@dataclass
class Gated:
    """The blocks to send, and one line per block that was rewritten."""

    blocks: list[dict[str, Any]]
    notes: list[str] = field(default_factory=list)


def prompt_capabilities(agent_capabilities: Any) -> dict[str, bool]:
    """``agentCapabilities.promptCapabilities`` as flags; absent or malformed = False."""
    caps = agent_capabilities.get("promptCapabilities") if isinstance(agent_capabilities, dict) else None
    caps = caps if isinstance(caps, dict) else {}
    return {flag: caps.get(flag) is True for flag in ("image", "audio", "embeddedContext")}


def _name(uri: str) -> str:
    """The last path segment, as is (urlparse would drop control characters)."""
    path = uri.split("?", 1)[0].split("#", 1)[0].rstrip("/")
    return unquote(path.rsplit("/", 1)[-1]) or uri


def _stand_in(resource: dict[str, Any]) -> tuple[dict[str, Any], str] | None:
    """What replaces an embedded resource for an agent without embeddedContext."""
    uri = resource.get("uri")
    if not isinstance(uri, str) or not uri:
        return None
    if urlparse(uri).scheme == "file":
        link: dict[str, Any] = {"type": "resource_link", "uri": uri, "name": _name(uri)}
        if isinstance(resource.get("mimeType"), str):
            link["mimeType"] = resource["mimeType"]
        return link, f"sent a link to {uri} instead of its contents (the agent takes no embedded context)"
    if isinstance(resource.get("text"), str):
        return (text_block(f"Contents of {uri}:\n\n{resource['text']}"),
                f"sent the text of {uri} inline (the agent takes no embedded context)")
    return None


def gate(blocks: list[Any], capabilities: dict[str, bool]) -> Gated:
    """The prompt ``blocks`` as this agent may receive them (see the module doc).

    ``capabilities`` is :func:`prompt_capabilities` of the agent. Raises
    :class:`ContentRefused` for an image or audio block the agent cannot
    take, a block of an unknown type, or an embedded resource with no stand-in.
    """
    out = Gated([])
    for i, block in enumerate(blocks):
        kind = block.get("type") if isinstance(block, dict) else None
        if kind in BASELINE:
            out.blocks.append(block)
            continue
        flag = CAPABILITY.get(kind)  # type: ignore[arg-type]
        if flag is None:
            raise ContentRefused(f"prompt block {i + 1} has type {kind!r}, which ACP prompts do not have "
                                 f"(text, resource_link, resource, image, audio)")
        if capabilities.get(flag):
            out.blocks.append(block)
            continue
        if kind == "resource":
            resource = block.get("resource")
            stand_in = _stand_in(resource) if isinstance(resource, dict) else None
            if stand_in is not None:
                out.blocks.append(stand_in[0])
                out.notes.append(stand_in[1])
                continue
            raise ContentRefused(f"prompt block {i + 1} embeds a resource with no file or text behind it, "
                                 "and this agent takes no embedded context; send it as text or a file link")
        raise ContentRefused(f"this agent does not take {kind} in prompts (its promptCapabilities.{flag} "
                             f"is not true); describe the {kind} in text, or save it to a file and link it")
    return out
