import random

from hypothesis import given, settings
from hypothesis import strategies as st

from acp_kernel.view.markdown import BlockSplitter, split_blocks

DOC = """# Title

First paragraph
continues here.

```python
x = 1

y = 2
```

- item one
- item two

tail text"""


def test_blocks_complete_at_blank_line_outside_fences():
    assert split_blocks(DOC) == [
        "# Title",
        "First paragraph\ncontinues here.",
        "```python\nx = 1\n\ny = 2\n```",
        "- item one\n- item two",
        "tail text",
    ]


def test_chunk_boundaries_do_not_matter():
    whole = BlockSplitter()
    whole.feed(DOC)
    expected = (whole.take_blocks(), whole.tail())
    rng = random.Random(7)
    for _ in range(50):
        s = BlockSplitter()
        i = 0
        while i < len(DOC):
            n = rng.randint(1, 9)
            s.feed(DOC[i : i + n])
            i += n
        assert (s.take_blocks(), s.tail()) == expected


def test_open_fence_tail_is_closed_for_rendering():
    s = BlockSplitter()
    s.feed("```sh\n$ make\n\nbuilding")
    assert s.take_blocks() == []
    assert s.tail() == "```sh\n$ make\n\nbuilding\n```"
    assert s.in_fence


def test_cut_mid_fence_reopens_in_next_piece():
    s = BlockSplitter()
    s.feed("Intro\n\n```py\nx = 1\n")
    assert s.cut() == "Intro\n\n```py\nx = 1\n```"
    s.feed("y = 2\n```\n\nafter")
    assert s.take_blocks() == ["```py\ny = 2\n```"]
    assert s.tail() == "after"


def test_long_tail_is_cut_at_a_line_so_updates_stay_small():
    s = BlockSplitter(max_tail=100)
    for i in range(100):
        s.feed(f"line {i} of a paragraph with no blank lines\n")
        assert len(s.tail()) <= 150
    blocks = s.take_blocks()
    assert len(blocks) > 10
    assert "\n".join(blocks + [s.tail()]).count("line ") == 100


def test_long_code_block_cut_keeps_each_piece_fenced():
    s = BlockSplitter(max_tail=60)
    s.feed("```js\n" + "".join(f"f({i});\n" for i in range(40)))
    blocks = s.take_blocks()
    assert len(blocks) > 2
    for b in blocks:
        assert b.startswith("```js\n") and b.endswith("\n```")


def test_tilde_fences_and_longer_closers():
    s = BlockSplitter()
    s.feed("~~~~\n```\n\n~~~\nstill code\n~~~~~\n\nout\n\n")
    assert s.take_blocks() == ["~~~~\n```\n\n~~~\nstill code\n~~~~~", "out"]


def test_blank_lines_alone_produce_nothing():
    s = BlockSplitter()
    s.feed("\n\n   \n\n")
    assert s.take_blocks() == [] and s.tail() == "" and s.cut() == ""


_PIECES = ["word ", "x" * 37, " ", "\n", "\n\n", "```py\n", "```\n", "~~~\n", "- item\n", "y" * 130]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=60), st.lists(st.integers(1, 90), min_size=1, max_size=30),
       st.booleans())
def test_where_chunks_end_never_changes_the_blocks_long_lines_included(pieces, sizes, read_between):
    """Long lines (past max_tail) are cut at the same places however the text arrives,
    and reading between chunks (a view's refresh) changes nothing either."""
    doc = "".join(pieces)
    whole = BlockSplitter(max_tail=50)
    whole.feed(doc)
    want = (whole.take_blocks(), whole.tail())
    s = BlockSplitter(max_tail=50)
    got: list[str] = []
    i = k = 0
    while i < len(doc):
        n = sizes[k % len(sizes)]
        s.feed(doc[i:i + n])
        if read_between:
            got += s.take_blocks()
            assert len(s.tail()) <= 3 * 50 + 20  # the tail stays small: a few max_tail (and a fence line)
        i, k = i + n, k + 1
    assert (got + s.take_blocks(), s.tail()) == want
    assert all(len(line) <= 50 for block in want[0] for line in block.split("\n")), want


def test_feeding_without_reading_keeps_a_bounded_amount_unsplit():
    s = BlockSplitter(max_tail=100)
    for _ in range(10_000):
        s.feed("lorem ipsum dolor sit amet ")
        assert s._pending_chars <= (1 << 16)
    blocks, tail = s.take_blocks(), s.tail()
    assert len(tail) <= 250 and "\n".join([*blocks, tail]).count("lorem") == 10_000
