"""Settings of the processes acp-kernel owns (the ACP kernel, ``acp-kernel prompt``),
never of a user's Python (the magics run in the user's kernel and change nothing).

The garbage collector: a turn parses every update into fresh dicts and keeps
many of them (tool calls keep their content), so with Python's default
thresholds (a young collection every 700 net allocations) the collector ran
through the turn's objects over and over: 35-40% of the library's time on
20,000 tool-call pairs (measured with ``gc.disable()``; with the thresholds
below, 0.54-0.67 s against 0.87-1.0 s, three interleaved rounds). Cycles are
still collected, later: at most 20,000 young objects wait for it.

And once the first agent has started, everything alive then (the modules, the ACP schema
models, IPython's and the widgets' objects) is frozen (``gc.freeze``): a full collection no
longer walks them. The first full collection came in the first turn and walked them all: a
third of a 2,000-tool-call turn (17 of 40 ms in a small process; more in the kernel). What
was frozen is never collected as a cycle; it was start-up's, alive for the process's life.
"""

from __future__ import annotations

import gc

from ..protocol.warm import after_first_start

#: (young, middle, old) collection thresholds for a process of ours.
GC_THRESHOLDS = (20_000, 20, 20)


def tune_own_process() -> None:
    gc.set_threshold(*GC_THRESHOLDS)
    after_first_start(gc.freeze)
