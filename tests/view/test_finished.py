"""The static output of a finished turn (view/finished.py): pure, no kernel."""

from __future__ import annotations

from acp_kernel.safe import Html, Markdown, inert_html_inner, markdown, text
import random

from hypothesis import event, given, settings
from hypothesis import strategies as st

from acp_kernel.view.finished import FORM_LIMIT, HEAD, TAIL, LazySteps, Step, bounded, capped, runs, static_bundle, tool_html
from tests.hostile.render import inert_data, live_html

IMG = "<img src=x onerror=alert(1)>"
SPAN = "`a\nb` <img src=x onerror=alert(2)>"
MATH = "$x^2$ \\(y\\) $$z$$"
NL_PATH = "/tmp/a\n# not a heading.py"


def _step(i: int, size: int = 100) -> Step:
    words = f"step {i} " + "x" * size
    return Step(Html("<p>{}</p>").format(words), text(words), words)


def test_a_turn_that_fits_is_kept_whole():
    steps = [_step(i) for i in range(10)]
    assert bounded(steps, limit=10_000) == steps


def test_a_long_turn_keeps_its_start_a_line_saying_what_was_left_out_and_its_end():
    steps = [_step(i) for i in range(1000)]
    kept = bounded(steps, limit=20_000)
    assert kept[:HEAD] == steps[:HEAD] and kept[-1] == steps[-1]
    line = kept[HEAD]
    tail = kept[HEAD + 1:]
    assert tail == steps[len(steps) - len(tail):]
    left = len(steps) - HEAD - len(tail)
    assert line.text.startswith(f"… {left} steps of this turn are not kept")
    assert sum(s.size for s in kept) <= 20_000


def test_the_last_step_is_kept_even_when_it_alone_is_over_the_limit():
    steps = [_step(i) for i in range(10)] + [_step(10, size=50_000)]
    kept = bounded(steps, limit=5_000)
    assert kept[-1] == steps[-1] and "not kept" in kept[HEAD].text


def test_a_turn_of_few_big_steps_leaves_nothing_out_and_says_nothing_of_it():
    """The first HEAD steps and the last are always kept: with no more than those, over the
    limit or not, no line says that 0 steps were left out."""
    for n in range(1, HEAD + 2):
        steps = [_step(i, size=50_000) for i in range(n)]
        assert bounded(steps, limit=5_000) == steps


def _reference(steps: list[Step], limit: int, tail: int = TAIL) -> list[Step]:
    """What bounded() keeps, as its rule says it (every step read)."""
    if len(steps) <= HEAD + 1 or (sum(s.size for s in steps) <= limit and len(steps) <= HEAD + tail):
        return steps
    kept = bounded(steps, limit, tail=tail)  # only the line between is checked against the rule here
    room = limit - sum(s.size for s in steps[:HEAD]) - kept[HEAD].size
    last: list[Step] = []
    for step in reversed(steps[HEAD:]):
        if (step.size > room or len(last) >= tail) and last:
            break
        last.append(step)
        room -= step.size
    return steps[:HEAD] + [kept[HEAD]] + last[::-1]


def test_a_long_turn_renders_only_the_steps_its_saved_output_keeps():
    """20,000 steps (a turn of tool calls): the lazy steps are made only for the head, the
    tail that fits and at most one more; what is kept is what the whole list would keep."""
    rng = random.Random(25)
    for n, limit, tail in ((20_000, 200_000, TAIL), (20_000, 10**9, TAIL), (50, 3_000, TAIL), (12, 100_000, TAIL),
                           (HEAD + 2, 1_500, TAIL), (300, 40, TAIL), (300, 10**9, 7), (300, 20_000, 7),
                           (HEAD + 7, 10**9, 7), (HEAD + 8, 10**9, 7), (HEAD + 8, 10**9, 1), (40, 10**9, 0)):
        steps = [_step(i, size=rng.choice((10, 100, 1_000, 5_000))) for i in range(n)]
        made: list[int] = []
        kept = bounded(LazySteps(n, lambda i, made=made, steps=steps: made.append(i) or steps[i]), limit, tail=tail)
        assert kept == _reference(steps, limit, tail)
        assert len(kept) <= HEAD + 1 + max(tail, 1)
        assert len(made) == len(set(made))  # each made once
        if len(kept) < n:
            assert len(made) <= len(kept)  # the line between is not a step; one more read at most
        assert static_bundle(LazySteps(n, steps.__getitem__)) == static_bundle(steps)


def test_a_long_turn_of_small_steps_keeps_at_most_its_last_tail_steps():
    """1,000 small steps fit in the limit; the saved output keeps the first HEAD, the line
    and the last TAIL all the same, the line counting the rest; one step fewer than that
    leaves nothing out."""
    steps = [_step(i, size=10) for i in range(1_000)]
    assert sum(s.size for s in steps) < 200_000
    kept = bounded(steps)
    assert kept[:HEAD] == steps[:HEAD] and kept[HEAD + 1:] == steps[-TAIL:]
    assert kept[HEAD].text.startswith(f"… {1_000 - HEAD - TAIL} steps of this turn are not kept")
    assert bounded(steps[:HEAD + TAIL]) == steps[:HEAD + TAIL]
    assert bounded(steps[:HEAD + TAIL + 1])[HEAD].text.startswith("… 1 step of this turn is not kept")


def test_the_line_counts_one_step_in_the_singular():
    steps = [_step(i, size=1_000) for i in range(HEAD + 2)]
    kept = bounded(steps, limit=(HEAD + 1) * 1_100 + 200)
    assert kept[HEAD].text.startswith("… 1 step of this turn is not kept"), kept[HEAD].text


def test_a_run_of_message_text_is_one_step_however_many_blocks_the_live_view_cut_it_into():
    """The live view cuts a message into blocks where its refreshes fell (the machine's load
    decides how many): the static end counts the run as one step, and shows it the same."""
    text_run = [("text", _step(i, size=50_000)) for i in range(HEAD + 3)]
    blocks = [*text_run, ("status", _step(99))]
    steps = runs(blocks)
    assert len(steps) == 2 and steps[1] == blocks[-1][1]
    assert bounded(steps, limit=5_000) == steps  # nothing of the message left out
    assert all(f"step {i} " in static_bundle(steps)["text/html"] for i in range(HEAD + 3))
    small = [*[("text", _step(i)) for i in range(HEAD + 3)], ("status", _step(99))]
    one, apart = static_bundle(runs(small)), static_bundle([s for _, s in small])
    assert {k: one[k] for k in ("text/markdown", "text/html")} == {k: apart[k] for k in ("text/markdown", "text/html")}
    # the text's pieces apart by a blank line, as the splitter joins them within a block
    assert one["text/plain"] == "\n\n".join(s.text for _, s in small[:-1]) + "\n" + small[-1][1].text


def test_runs_join_only_consecutive_blocks_of_one_kind_of_text():
    t, u, th, tool = (("text", _step(0)), ("user", _step(1)), ("thought", _step(2)), ("tool", _step(3)))
    empty = ("text", Step(Html(""), Markdown(""), ""))
    assert runs([t, tool, t]) == [t[1], tool[1], t[1]]  # text, a tool call, text: three steps
    assert runs([t, th, u]) == [t[1], th[1], u[1]]
    assert runs([tool, tool]) == [tool[1], tool[1]]  # each tool call is a step
    assert len(runs([th, th, t, empty, t])) == 2  # an emptied block shows nothing and splits nothing
    assert runs([empty]) == []


def test_hostile_strings_in_a_tool_call_and_its_content_stay_inert():
    header = f"✏️ Edit {IMG} {MATH} {NL_PATH.replace(chr(10), ' ')} · ✓ done"
    body = markdown(f"{SPAN}\n\n{MATH}\n\n{IMG}")
    folded = tool_html(header, inert_html_inner(body), open_=True)
    assert folded.startswith("<details open><summary>") and "&lt;img src=x" in folded
    assert live_html(folded) == [], live_html(folded)
    data = static_bundle([Step(folded, Markdown("{}").format(header) + Markdown("\n\n") + body, header)])
    assert "application/vnd.jupyter.widget-view+json" not in data
    assert inert_data(data) == [], inert_data(data)


def test_an_empty_turn_still_says_what_it_is():
    data = static_bundle([Step(Html(""), Markdown(""), "")])
    assert data["text/plain"] == "(the agent's turn)"


def _hostile_block(i: int) -> Step:
    words = f"block {i} {IMG} {SPAN} {MATH} {NL_PATH} " + "y" * 3_000
    md = markdown(words)
    return Step(inert_html_inner(md), md, words)


def test_a_long_answer_is_whole_in_the_html_and_its_start_and_end_in_the_markdown_and_text():
    """One message of 60 blocks (about 4 KB each, over FORM_LIMIT), then the status line: the
    HTML keeps every block; the markdown and the text keep whole blocks from the start and
    from the end, and between them one line with the count of characters left out, which
    the kept and the left-out blocks add up to."""
    blocks = [("text", _hostile_block(i)) for i in range(60)] + [("status", _step(99))]
    data = static_bundle(runs(blocks))
    assert all(f"block {i} " in data["text/html"] for i in range(60))
    assert inert_data(data) == [], inert_data(data)
    md, plain = data["text/markdown"], data["text/plain"]
    for form in (md, plain):
        assert len(form) <= FORM_LIMIT + 1_000
        assert form.count("characters of this turn are not kept") == 1
    kept = [i for i in range(60) if f"block {i} " in plain]
    assert kept == [i for i in range(60) if f"block {i} " in md]
    assert kept[0] == 0 and kept[-1] == 59 and len(kept) < 60
    gap = [i for i in range(kept[0], kept[-1]) if i not in kept]
    assert gap == list(range(gap[0], gap[-1] + 1))  # one cut, in the middle
    assert plain.endswith(blocks[-1][1].text)  # the status line, last
    # each kept block whole, apart by a blank line as in a run that fits
    head = "\n\n".join(blocks[i][1].text for i in range(gap[0]))
    assert plain.startswith(head + "\n…")
    sizes = {i: max(len(s.md), len(s.text)) + 2 for i, (_, s) in enumerate(blocks)}
    assert f"… {sum(sizes[i] for i in gap):,} characters" in plain


def test_what_fits_in_the_markdown_and_text_is_kept_as_it_is():
    steps = runs([("text", _hostile_block(i)) for i in range(5)] + [("tool", _step(7)), ("status", _step(8))])
    assert capped(steps) == steps
    assert "not kept" not in static_bundle(steps)["text/plain"]


def test_a_long_turn_of_tool_calls_keeps_the_first_and_last_calls_in_the_markdown_and_text():
    steps = [_step(i, size=1_000) for i in range(150)]  # 150 KB: the HTML keeps all
    data = static_bundle(steps)
    assert all(f"step {i} " in data["text/html"] for i in range(150))
    small = capped(steps)
    line = next(k for k, s in enumerate(small) if "not kept" in s.text)
    assert small[:line] == steps[:line] and small[line + 1:] == steps[150 - (len(small) - line - 1):]
    assert sum(len(s.text) + 2 for s in small) <= FORM_LIMIT + 200


def test_one_piece_over_the_limit_alone_is_kept_and_nothing_said_of_it():
    big = _hostile_block(0)
    size = max(len(big.md), len(big.text))
    assert capped([big], limit=size // 2) == [big]
    two = [big, _hostile_block(1)]
    small = capped(two, limit=size + size // 2)  # the second (the last) is kept; the first is not
    assert small[1:] == two[1:] and small[0].text.startswith(f"… {size + 2:,} characters of this turn")


def test_one_long_block_of_agent_text_keeps_its_start_and_end_made_markdown_again():
    """The live view may make a whole answer one block (it came in one burst): the markdown
    and the text keep its start and its end, cut at paragraphs and made markdown again from
    the source (a cut in the made markdown could undo an escape), hostile text inert."""
    paras = [f"para {i} {IMG} {SPAN} {MATH} {NL_PATH} " + "z" * 2_000 for i in range(100)]
    source = "\n\n".join(paras)
    answer = Step(inert_html_inner(markdown(source)), markdown(source), source, source=source)
    status = _step(99)
    data = static_bundle([answer, status])
    assert all(f"para {i} " in data["text/html"] for i in range(100))
    assert inert_data(data) == [], inert_data(data)
    plain = data["text/plain"]
    assert len(data["text/markdown"]) <= FORM_LIMIT + 1_000 and len(plain) <= FORM_LIMIT + 1_000
    head, _, rest = plain.partition("\n… ")
    line, _, tail = rest.partition("\n")
    assert "characters of this turn are not kept" in line
    kept = [i for i in range(100) if f"para {i} " in plain]
    assert kept[0] == 0 and kept[-1] == 99 and 10 < len(kept) < 90
    assert source.startswith(head) and head.endswith("z" * 2_000)  # whole paragraphs
    body = tail.rsplit("\n", 1)[0]  # after the line, before the status
    assert source.endswith(body) and body.startswith("para ")
    for i in kept:
        assert f"para {i} " in data["text/markdown"]


_WORDS = ["alpha", "beta <b>", "`c\nd`", "$e$", "/tmp/f\ng.py", "\n\n", "\n", " "]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["text", "tool", "thought"]),
                          st.lists(st.sampled_from(_WORDS), min_size=1, max_size=400)), min_size=1, max_size=12),
       st.integers(min_value=250, max_value=2_500))
def test_capped_keeps_order_the_end_and_the_bound(spec, limit):
    """Any turn: what the markdown and text keep is in order, ends with the turn's last
    block, says once what it left out, fits the limit (plus that line), and its cut text is
    an exact start or end of a block's source."""
    blocks = []
    for n, (kind, words) in enumerate(spec):
        src = f"b{n} " + "".join(words)
        md = markdown(src)
        blocks.append((kind, Step(Html(""), md, src, source=src if kind == "text" else None)))
    steps = runs(blocks)
    small = capped(steps, limit)
    lines = [s for s in small if "characters of this turn are not kept" in s.text]
    event("cut" if lines else "whole")
    if not lines:
        assert small == steps
        return
    assert len(lines) == 1
    line = small.index(lines[0])
    kept = [s for k, s in enumerate(small) if k != line]
    total = sum(max(len(s.md), len(s.text)) + 2 for s in kept)
    last = steps[-1].parts[-1] if steps[-1].parts else steps[-1]
    whole_last = small[-1] is steps[-1] or bool(small[-1].parts) and small[-1].parts[-1] is last
    assert total <= limit or whole_last and total - (max(len(last.md), len(last.text)) + 2) <= limit
    assert whole_last or last.source is not None and last.source.endswith(small[-1].text)  # the end of the last piece
    sources = [s.source for _, s in blocks if s.source]
    texts = [s.text for _, s in blocks]
    for s in kept:
        for p in s.parts or (s,):
            assert p.text in texts or any(src.startswith(p.text) or src.endswith(p.text) for src in sources), p.text[:80]
    order = [texts.index(p.text) if p.text in texts else next(i for i, t in enumerate(texts) if p.text in t)
             for s in kept for p in (s.parts or (s,))]
    assert order == sorted(order)
