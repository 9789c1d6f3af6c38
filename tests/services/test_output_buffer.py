"""Bounded output: the tail, whole characters, O(limit) memory."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from acp_kernel.services.output_buffer import OutputBuffer, StreamDecoder, incomplete_tail


def test_under_limit_keeps_everything() -> None:
    b = OutputBuffer(10)
    b.append(b"hello")
    assert b.text() == "hello" and not b.truncated


def test_drops_from_the_beginning() -> None:
    b = OutputBuffer(5)
    b.append(b"abc")
    b.append(b"defg")
    assert b.text() == "cdefg" and b.truncated
    assert b.total == 7


def test_exactly_limit_is_not_truncated() -> None:
    b = OutputBuffer(4)
    b.append(b"ab")
    b.append(b"cd")
    assert b.text() == "abcd" and not b.truncated
    c = OutputBuffer(4)
    c.append(b"abcd")
    assert not c.truncated


def test_cut_lands_on_a_character_boundary() -> None:
    b = OutputBuffer(1001)
    for _ in range(1000):
        b.append(("é" * 1000).encode())
    data = b.data()
    assert len(data) <= 1001
    text = data.decode("utf-8")  # strict: no broken character
    assert set(text) == {"é"} and len(text) == 500
    assert b.truncated


def test_big_single_append_and_four_byte_chars() -> None:
    b = OutputBuffer(10)
    b.append(("😀" * 100).encode())
    assert b.data().decode() == "😀😀"  # 8 bytes: the 9th and 10th were half a char


def test_binary_garbage_is_not_eaten() -> None:
    b = OutputBuffer(8)
    b.append(b"\x80" * 100)
    assert len(b) >= 5  # at most 3 continuation bytes skipped
    assert "\ufffd" in b.text(final=True)


def test_unfinished_char_held_back_while_running() -> None:
    b = OutputBuffer(100)
    e = "é".encode()
    b.append(b"ab" + e[:1])
    assert b.text() == "ab"
    assert b.pending_tail() == e[:1]
    b.append(e[1:])
    assert b.text() == "abé"
    assert incomplete_tail("😀".encode()[:3]) == 3


def test_zero_limit() -> None:
    b = OutputBuffer(0)
    b.append(b"x")
    assert b.text() == "" and b.truncated


def test_memory_is_bounded() -> None:
    b = OutputBuffer(1000)
    chunk = b"x" * 4096
    for _ in range(10_000):
        b.append(chunk[:333])
        assert len(b) <= 1000


@settings(max_examples=200, deadline=None)
@given(text=st.text(min_size=0, max_size=300), limit=st.integers(0, 64), cuts=st.lists(st.integers(0, 1200), max_size=8))
def test_property_tail_and_boundary(text: str, limit: int, cuts: list[int]) -> None:
    data = text.encode()
    b = OutputBuffer(limit)
    points = sorted({c for c in cuts if c < len(data)} | {0, len(data)})
    for a, z in zip(points, points[1:]):
        b.append(data[a:z])
    kept = b.data()
    assert len(kept) <= limit
    assert data.endswith(kept)
    kept.decode("utf-8")  # always whole characters
    assert len(kept) >= min(limit, len(data)) - 3
    assert b.truncated == (len(data) > limit)


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=200), cuts=st.lists(st.integers(0, 800), max_size=10))
def test_property_stream_decoder_never_replaces(text: str, cuts: list[int]) -> None:
    data = text.encode()
    points = sorted({c for c in cuts if c < len(data)} | {0, len(data)})
    d = StreamDecoder()
    out = "".join(d.feed(data[a:z]) for a, z in zip(points, points[1:])) + d.flush()
    assert out == text
