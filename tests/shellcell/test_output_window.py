"""The head/tail window of ``%%shell`` output: exact accounting, whole lines,
whole characters and escape sequences (pure; hypothesis over chunkings)."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from acp_kernel.services.output_window import OutputWindow

ESCAPE = re.compile(rb"\x1b\[[0-9;]*[@-~]")

line = st.one_of(
    st.text(alphabet="ab9€😀 \t", max_size=12),
    st.sampled_from(["\x1b[31mred\x1b[0m", "\x1b[1;32m", "x" * 40]),
).map(lambda s: s + "\n")
outputs = st.lists(line, max_size=60).flatmap(
    lambda ls: st.tuples(st.just("".join(ls)), st.sampled_from(["", "tail no newline", "\x1b[33m€"])))


def run(text: str, cuts: list[int], head_lines: int, tail_lines: int, head_bytes: int, tail_bytes: int,
        flushes: bool = False) -> tuple[str, object, OutputWindow]:
    w = OutputWindow(head_lines, tail_lines, head_bytes, tail_bytes)
    shown = []
    pos = 0
    for c in sorted(set(min(c, len(text)) for c in cuts)) + [len(text)]:
        shown.append(w.feed(text[pos:c]))
        if flushes:
            shown.append(w.flush())
        pos = c
    rest, cut = w.finish()
    return "".join(shown) + rest, cut, w


def check_accounting(text: str, head: str, cut, w: OutputWindow) -> None:
    full, hb, tb = text.encode(), head.encode(), cut.tail.encode()
    assert full.startswith(hb) and full.endswith(tb)
    assert len(hb) + cut.omitted_bytes + len(tb) == len(full) == cut.total_bytes
    omitted = full[len(hb):len(full) - len(tb)]
    assert cut.omitted_lines == omitted.count(b"\n")
    assert cut.cut == bool(omitted)
    assert cut.total_lines == full.count(b"\n") + (1 if full and not full.endswith(b"\n") else 0)
    # Budgets.
    assert len(hb) <= w.head_bytes and hb.count(b"\n") <= w.head_lines
    assert len(tb) <= w.tail_bytes
    assert tb.count(b"\n") + (1 if tb and not tb.endswith(b"\n") else 0) <= max(w.tail_lines, 0) or not cut.cut
    # Whole characters: nothing replaced.
    assert "\ufffd" not in head + cut.tail
    # Escape sequences are never split by the cuts.
    for m in ESCAPE.finditer(full):
        for at in (len(hb), len(full) - len(tb)):
            assert not (m.start() < at < m.end()), (m, at)


budgets = dict(head_lines=st.integers(0, 20), tail_lines=st.integers(0, 20),
               head_bytes=st.integers(0, 200), tail_bytes=st.integers(0, 200))


@settings(max_examples=400, deadline=None)
@given(out=outputs, cuts=st.lists(st.integers(0, 2000), max_size=8), **budgets)
def test_head_omitted_tail_is_the_whole_output(out, cuts, head_lines, tail_lines, head_bytes, tail_bytes):
    text = out[0] + out[1]
    head, cut, w = run(text, cuts, head_lines, tail_lines, head_bytes, tail_bytes)
    check_accounting(text, head, cut, w)


@settings(max_examples=300, deadline=None)
@given(out=outputs, cuts=st.lists(st.integers(0, 2000), max_size=8), **budgets)
def test_flushing_unfinished_lines_keeps_the_accounting(out, cuts, head_lines, tail_lines, head_bytes, tail_bytes):
    text = out[0] + out[1]
    head, cut, w = run(text, cuts, head_lines, tail_lines, head_bytes, tail_bytes, flushes=True)
    check_accounting(text, head, cut, w)


@settings(max_examples=400, deadline=None)
@given(out=outputs, cuts=st.lists(st.integers(0, 2000), max_size=8),
       head_lines=st.integers(0, 20), tail_lines=st.integers(0, 20), extra=st.integers(0, 200))
def test_lines_that_fit_are_never_cut_in_half(out, cuts, head_lines, tail_lines, extra):
    text = out[0]  # whole lines only
    longest = max((len(x.encode()) + 1 for x in text.split("\n")), default=1)
    head, cut, w = run(text, cuts, head_lines, tail_lines, longest + extra, longest + extra)
    check_accounting(text, head, cut, w)
    full = text.encode()
    assert not cut.mid_line
    assert head == "" or head.endswith("\n")
    before_tail = full[:len(full) - len(cut.tail.encode())]
    assert before_tail == b"" or before_tail.endswith(b"\n")
    if cut.cut:  # the budgets are used: the window is as full as whole lines allow
        assert head.count("\n") == head_lines or len(head.encode()) + len(full[len(head.encode()):].split(b"\n")[0]) + 1 > w.head_bytes


def test_seq_200000_shows_a_thousand_lines_and_counts_the_rest():
    text = "".join(f"{i}\n" for i in range(1, 200_001))
    w = OutputWindow()
    shown = "".join(w.feed(text[i:i + 65536]) for i in range(0, len(text), 65536))
    rest, cut = w.finish()
    head = shown + rest
    assert head.splitlines() == [str(i) for i in range(1, 501)]
    assert cut.tail.splitlines() == [str(i) for i in range(199_501, 200_001)]
    assert cut.omitted_lines == 199_000 and cut.omitted_bytes == len(text) - len(head) - len(cut.tail)
    assert cut.total_lines == 200_000 and not cut.mid_line


def test_a_single_huge_line_is_cut_at_a_character_and_says_so():
    text = "€" * 100_000  # 300,000 bytes, no newline
    w = OutputWindow(10, 10, 1000, 1000)
    head = w.feed(text[:50_000]) + w.feed(text[50_000:])
    rest, cut = w.finish()
    head += rest
    assert cut.mid_line and cut.cut and set(head) == {"€"} and set(cut.tail) == {"€"}
    assert len(head.encode()) <= 1000 and len(cut.tail.encode()) <= 1000
    assert cut.total_lines == 1 and cut.omitted_lines == 0


def test_small_output_passes_through_untouched():
    w = OutputWindow()
    assert w.feed("a\nb") == "a\n"
    assert w.flush() == "b"
    rest, cut = w.finish()
    assert rest == "" and not cut.cut and cut.tail == "" and cut.total_lines == 2


def test_last_line_for_the_live_status():
    w = OutputWindow(1, 1, 100, 100)
    w.feed("first\nsecond\nthird\npart")
    assert w.cutting and w.last_line() == "third"
