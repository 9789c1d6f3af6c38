"""Every renderer reads a turn's events through a table keyed by event type.

The kinds are one list, :data:`acp_kernel.client.turn.TURN_EVENTS`. The live
views (:data:`.turnbase.HANDLERS`, shared by TurnView and TurnOutput) and the
static transcript (:data:`.transcript.HANDLERS`) are tables from kind to
handler, and events that are one line wherever they appear have one entry in
:data:`.transcript.LINES` that both use. tests/view/test_event_kinds.py fails
when a table lacks a kind of the list, so a new kind is never left to a
silent default. At run time an event no table knows (a class emitted without
being listed) is logged, once per class, and shown as a plain line: never
raised into the connection's reader.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from ..client.turn import TURN_EVENTS
from ..safe import Markdown, code

log = logging.getLogger(__name__)

_warned: set[type] = set()


def missing(table: Mapping[type, Any]) -> list[type]:
    """The kinds of :data:`TURN_EVENTS` a table has no handler for, in list order."""
    return [kind for kind in TURN_EVENTS if kind not in table]


def unhandled(event: Any, where: str) -> tuple[Markdown, str]:
    """An event ``where`` has no handler for: logged (once per class), and
    the (markdown, text) of a line that says what it was."""
    kind = type(event)
    if kind not in _warned:
        _warned.add(kind)
        log.warning("%s has no handler for %s events: shown as a plain line "
                    "(list the kind in TURN_EVENTS and give every renderer a handler)", where, kind.__name__)
    name = kind.__name__
    return Markdown("*(an event this view does not know: {})*").format(code(name)), f"({name}: {event!r:.300})"
