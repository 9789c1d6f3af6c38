"""Settings of the processes acp-kernel owns (the ACP kernel, ``acp-kernel prompt``),
never of a user's Python (the magics run in the user's kernel and change nothing).

The garbage collector: a turn parses every update into fresh dicts and keeps
many of them (tool calls keep their content), so with Python's default
thresholds (a young collection every 700 net allocations) the collector ran
through the turn's objects over and over: 35-40% of the library's time on
20,000 tool-call pairs (measured with ``gc.disable()``; with the thresholds
below, 0.54-0.67 s against 0.87-1.0 s, three interleaved rounds). Cycles are
still collected, later: at most 20,000 young objects wait for it.

And what was alive before a turn is frozen (``gc.freeze``) while it runs, so a full
collection walks only the turn's own objects: the kernel freezes and unfreezes around each
turn (:func:`..client.controller._freeze_heap`); ``acp-kernel prompt``, one turn, freezes once
its session is open (:func:`freeze_start_up`), for good. The first full collection came in the
first turn and walked them all: 17 of 40 ms of a 2,000-tool-call turn in a small process.
"""

from __future__ import annotations

import gc

#: (young, middle, old) collection thresholds for a process of ours.
GC_THRESHOLDS = (20_000, 20, 20)


def tune_own_process() -> None:
    gc.set_threshold(*GC_THRESHOLDS)


def freeze_start_up() -> None:
    """What start-up made (the modules, the ACP schema models if imported) out of the
    collector's sight for good: for a process of ours that runs one turn (a kernel freezes
    around each turn instead)."""
    gc.freeze()
