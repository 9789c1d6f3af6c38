"""A finished turn as a static output: what every front-end shows without widgets.

When a turn ends (done, failed, cancelled, refused), :class:`.turnoutput.TurnOutput`
replaces its live widget in place (``update_display_data``) with this bundle and
closes the widget, so the saved notebook holds no widget model for it and reads the
same in JupyterLab and Notebook 7 (trusted or not, with a kernel or none), VS Code and
nbconvert's HTML offline: HTML we generate (a tool call folds under its header with
``<details>``), the markdown transcript, and plain text. Every agent string in it went
through :mod:`acp_kernel.safe` (escaped, or agent markdown rendered with raw HTML off),
and the HTML is inside the element MathJax skips. It carries no styles of its own: each
front-end's styles for rendered HTML (tables, code, ``<details>``) apply, and an untrusted
notebook's sanitizer has nothing to strip.

Bounded: a turn of many steps keeps its first :data:`HEAD` steps and, of its last
:data:`TAIL`, as many as fit in :data:`LIMIT` characters of HTML; one line between says
how many steps were left out of the saved output (the agent's session keeps its whole
history). The HTML, which the notebook front-ends show (JupyterLab, Notebook 7, VS Code,
nbconvert's HTML, GitHub), keeps a long answer whole. The markdown and the text
(nbconvert's LaTeX and PDF, consoles) keep at most :data:`FORM_LIMIT` characters of what
the HTML keeps: its start and its end, with a line saying how much of the middle is only
in the HTML (:func:`capped`). So a long answer is saved about once, not three times.

A step is a tool call, a notice, a question..., or one whole run of message text (or of
thoughts): the live view sends a message as blocks cut wherever its refreshes fell, so
how many blocks one message became depends on the machine's load; counted as steps,
they would make which text the saved notebook keeps depend on timing (:func:`runs`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import groupby
from operator import itemgetter
from typing import Any, NamedTuple, overload

from ..safe import Html, Markdown, Plain, bundle, html, ignored_join, markdown, plain, wrapped_join

#: Characters of HTML a finished turn keeps (the markdown and the text are smaller).
LIMIT = 200_000
#: Steps kept from the start of a long turn (the prompt's first answer), before the cut.
HEAD = 5
#: Steps kept from the end of a long turn at most: as many tool calls as the record in the
#: output's metadata lists (:data:`.record.ITEMS`), more than the live view's window
#: (:data:`.turnwidget.DEFAULT_SHOWN`). Without it a turn of small steps kept hundreds of
#: folded rows (714 of a 1,000-step turn), which the page laid out at once when the turn
#: ended (a 0.1 s frame) and the kernel rendered before the cell's reply (about 20 us each).
TAIL = 200
#: Characters the markdown and the text of a finished turn keep, each (:func:`capped`).
FORM_LIMIT = 64_000


class Step(NamedTuple):
    """One block of the turn in its three static forms; a run of blocks joined as one step
    keeps them as its ``parts`` (each whole markdown: :func:`capped` may leave some out).
    A named tuple, not a frozen dataclass: as immutable, made in a third of the time (a
    finished turn makes one for each of the hundreds of tool calls it keeps)."""

    html: Html
    md: Markdown
    text: str
    parts: tuple[Step, ...] = ()
    sep: str = "\n"  # between the parts' texts
    #: Agent markdown this block is :func:`~acp_kernel.safe.markdown` of (its text), or None:
    #: :func:`capped` may keep the start or end of it.
    source: str | None = None

    @property
    def size(self) -> int:
        return len(self.html) + 1  # and the line joining it to the next


#: Kinds of block (:class:`.turnoutput.Block`) the live view cuts one run of text into.
RUN_KINDS = frozenset({"text", "thought", "user"})


def joined(steps: Sequence[Step], text_sep: str = "\n") -> Step:
    """Steps as one, joined as :func:`static_bundle` joins steps (the same output), their
    text with ``text_sep``."""
    return Step(Html("\n").join(s.html for s in steps if s.html), Markdown("\n\n").join(s.md for s in steps if s.md),
                Plain(text_sep).join(s.text for s in steps if s.text), tuple(pieces(steps)), text_sep)


def pieces(steps: Sequence[Step]) -> list[Step]:
    """The blocks the steps were joined from, in order (a step that is one block is its own)."""
    out: list[Step] = []
    for s in steps:
        out.extend(s.parts or (s,))
    return out


def run_spans(blocks: Sequence[tuple[str, bool]]) -> list[tuple[str, list[int]]]:
    """Which blocks make each step, from each block's ``(kind, filled)`` in order: consecutive
    filled blocks of one of :data:`RUN_KINDS` are one step; blocks with nothing to show are
    dropped. Each step is ``(kind, indices)``: made apart, so a long turn renders only the steps
    its saved output keeps (:class:`LazySteps`)."""
    out: list[tuple[str, list[int]]] = []
    for i, (kind, filled) in enumerate(blocks):
        if not filled:
            continue
        if out and out[-1][0] == kind and kind in RUN_KINDS:
            out[-1][1].append(i)
        else:
            out.append((kind, [i]))
    return out


def runs(blocks: Sequence[tuple[str, Step]]) -> list[Step]:
    """The steps of a turn from its blocks (``(kind, step)`` in order), as :func:`run_spans`
    groups them."""
    return [run_of(kind, [blocks[i][1] for i in idx])
            for kind, idx in run_spans([(k, bool(s.md or s.text)) for k, s in blocks])]


def run_of(kind: str | None, group: list[Step]) -> Step:
    """One step from the blocks of one run (:func:`run_spans`)."""
    # A message's text is its markdown source: the live view's blocks of it are pieces the
    # splitter (:mod:`.markdown`) cut, which it joins with a blank line; so here too, and
    # the saved text of a message is the same wherever the refreshes fell.
    if len(group) == 1:
        return group[0]
    return joined(group, "\n\n" if kind == "text" else "\n")


class LazySteps(Sequence[Step]):
    """Steps made when first read: :func:`bounded` reads the first :data:`HEAD` and, from the
    end, those that fit, so a turn of 20,000 tool calls renders the few hundred it keeps."""

    def __init__(self, count: int, make: Callable[[int], Step]) -> None:
        self._count, self._make = count, make
        self._made: dict[int, Step] = {}

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, i: int) -> Step: ...
    @overload
    def __getitem__(self, i: slice) -> list[Step]: ...

    def __getitem__(self, i: int | slice) -> Step | list[Step]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self._count))]
        if i < 0:
            i += self._count
        if not 0 <= i < self._count:
            raise IndexError(i)
        step = self._made.get(i)
        if step is None:
            step = self._made[i] = self._make(i)
        return step


def tool_html(header: str, body: Html, *, open_: bool = False) -> Html:
    """A tool call: its header (plain text: icon, title, status) as the summary, its
    content (our markdown's :func:`~acp_kernel.safe.inert_html_inner`) folded under it;
    open when ``open_``."""
    if not isinstance(body, Html):
        raise TypeError("a tool call's body is HTML made by acp_kernel.safe")
    return Html(f"<details{' open' if open_ else ''}><summary>{html(header)}</summary>{body}</details>")


def omitted(count: int) -> Step:
    line = (f"… {count} step{'s' if count != 1 else ''} of this turn {'are' if count != 1 else 'is'} not kept "
            "in the saved output (the agent's session keeps its whole history)")
    return Step(Html("<p><em>{}</em></p>").format(html(line)), Markdown("*{}*").format(line), line)


def bounded(steps: Sequence[Step], limit: int | None = None, head: int = HEAD, tail: int = TAIL) -> list[Step]:
    """All the steps when they fit in ``limit`` (:data:`LIMIT`) and are no more than ``head``
    and ``tail``, or when there are no more than the first ``head`` and the last (always kept:
    nothing would be left out); else the first ``head`` and, of the last ``tail``, those that
    fit, with a line saying how many between were left out. Reads only the steps it keeps,
    and from the end at most one more (:class:`LazySteps`)."""
    limit = LIMIT if limit is None else limit
    n = len(steps)
    if n <= head + 1:
        return list(steps)
    first = list(steps[:head])
    room_all = limit - sum(s.size for s in first)
    last: list[Step] = []  # from the end, until one more would not fit with all of the rest, or is over tail
    used = 0
    for i in range(n - 1, head - 1, -1):
        last.append(steps[i])
        used += last[-1].size
        if used > room_all or len(last) > tail:
            break
    else:
        return first + last[::-1]
    room = room_all - omitted(n).size
    kept: list[Step] = []
    for step in last:  # a prefix of ``last``: ``room`` is smaller than ``room_all``
        if (step.size > room or len(kept) >= tail) and kept:
            break
        kept.append(step)  # the last step (the status line) is always kept
        room -= step.size
    kept.reverse()
    return first + [omitted(n - head - len(kept))] + kept


def capped(steps: Sequence[Step], limit: int = FORM_LIMIT) -> list[Step]:
    """What the markdown and the text keep of ``steps``: all of them when they fit in
    ``limit`` characters; else, of their :func:`pieces` (so inside a long run of text too),
    the first that fit in half of it and the last that fit in the rest, and between them a
    line saying how many characters were left out. Whole pieces, each markdown that reads on
    its own as :func:`joined` joins them (a step that keeps some of its pieces is joined again
    from those); and, in the room left, the start and the end of the agent text at the cut
    (:func:`_cut_text`): the live view may have made a whole long answer one piece. The last
    piece is kept whole (the status line, a question), unless it is agent text over the room."""
    if sum(map(_size, steps)) <= limit:
        return list(steps)
    owned = [(i, p) for i, s in enumerate(steps) for p in (s.parts or (s,))]
    sizes = [_size(p) for _, p in owned]
    room = limit // 2
    first = 0
    while first < len(owned) - 1 and sizes[first] <= room:
        room -= sizes[first]
        first += 1
    room += limit - limit // 2
    last = len(owned) - 1  # owned[last:] is kept whole
    if sizes[last] <= room or owned[last][1].source is None:
        room -= sizes[last]
        while last > first and sizes[last - 1] <= room:
            last -= 1
            room -= sizes[last]
        if last == first:
            return list(steps)  # nothing to leave out: one piece alone over the limit is kept
    else:
        last += 1  # agent text over the room: cut below, as any piece at the cut
    left = sum(sizes[first:last])
    i, start = owned[first]
    cut = _cut_text(start, room // 2, at_end=False, after=0)
    if cut is not None:
        room -= _size(cut)
    j, end = owned[last - 1]
    done = len(cut.text) if cut is not None and end is start else 0  # the same text, cut at both ends
    cut2 = _cut_text(end, room, at_end=True, after=done)
    if cut2 is None and last == len(owned):
        last -= 1  # the last piece could not be cut: kept whole all the same
        left -= sizes[last]
        if end is start:
            cut = None  # (not its start as well)
    left -= sum(len(c.text) for c in (cut, cut2) if c is not None)
    head = owned[:first] + ([(i, cut)] if cut is not None else [])
    tail = ([(j, cut2)] if cut2 is not None else []) + owned[last:]
    return _regrouped(steps, head) + [left_out(max(left, 0))] + _regrouped(steps, tail)


#: A piece of agent text at the cut keeps its start or end only when this much room is left.
MIN_CUT = 200


def _cut_text(piece: Step, room: int, *, at_end: bool, after: int) -> Step | None:
    """The start (or the end) of a piece of agent text in at most ``room`` characters, from
    its markdown source (``source``; not before index ``after`` of it), cut at a paragraph, a
    line or a word, and made markdown again by :func:`~acp_kernel.safe.markdown` (a cut in
    made markdown could open what an escape closed); None when it has no source or no room."""
    src = piece.source
    if src is None:
        return None
    take = room  # characters of the source; fewer when escaping makes its markdown longer
    for _ in range(3):
        if take < MIN_CUT:
            break
        part = src[max(after, len(src) - take):] if at_end else src[:take]
        for sep in ("\n\n", "\n", " "):
            at = part.find(sep) if at_end else part.rfind(sep)
            if at_end and 0 <= at < len(part) // 2:
                part = part[at + len(sep):]
                break
            if not at_end and at > len(part) // 2:
                part = part[:at]
                break
        cut = Step(Html(""), markdown(part), part)
        if _size(cut) <= room:
            return cut if part.strip() else None
        take = len(part) * room // _size(cut) * 9 // 10
    return None


def _size(step: Step) -> int:
    """Characters a step takes in the markdown or the text, the longer (and the join)."""
    return max(len(step.md), len(step.text)) + 2


def _regrouped(steps: Sequence[Step], owned: list[tuple[int, Step]]) -> list[Step]:
    """Kept pieces back in their steps: a step itself when all of its pieces are kept."""
    out: list[Step] = []
    for i, run in groupby(owned, key=itemgetter(0)):
        group = [p for _, p in run]
        step = steps[i]
        whole = step.parts or (step,)
        out.append(step if len(group) == len(whole) and all(a is b for a, b in zip(group, whole))
                   else joined(group, step.sep))
    return out


def left_out(chars: int) -> Step:
    """The line where :func:`capped` left characters out of the markdown and the text."""
    line = (f"… {chars:,} characters of this turn are not kept in its saved markdown and text "
            "(its HTML keeps them; the agent's session keeps its whole history)")
    return Step(Html(""), Markdown("*{}*").format(line), line)


def static_bundle(steps: Sequence[Step], *, empty: str = "(the agent's turn)", form_limit: int = FORM_LIMIT) -> dict[str, Any]:
    """The finished turn's display data: HTML, markdown and text, bounded, no widget."""
    kept = [s for s in bounded(steps) if s.md or s.text]
    if not kept:
        return bundle(Markdown("*{}*").format(empty), plain(empty))
    small = capped(kept, form_limit)
    # Each made inside its math-ignoring element in one join (bundle takes them as they are).
    md = wrapped_join([s.md for s in small if s.md])
    # Each text made plain once (a block of prose already is: .turnoutput), not the whole again.
    text = Plain("\n").join(s.text for s in small if s.text)
    return bundle(md, text, ignored_join([s.html for s in kept]))
