"""Framing and dispatch: pure logic, plus a property-based fuzz of the splitter."""

from __future__ import annotations

import json

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_kernel.protocol import framing
from acp_kernel.protocol.framing import NOTIFICATION, REQUEST, RESPONSE, LineSplitter, Noise, Oversized, classify


def test_split_across_feeds():
    s = LineSplitter()
    assert s.feed(b'{"a":') == []
    assert s.feed(b"1}\n{") == [b'{"a":1}']
    assert s.feed(b'"b":2}\n\n  \n') == [b'{"b":2}']
    assert s.flush() == []


def test_oversized_line_is_dropped_and_reported_once():
    s = LineSplitter(max_line=10)
    out = s.feed(b"short\n" + b"x" * 8)
    assert out == [b"short"]
    assert s.feed(b"y" * 100) == []  # still streaming past, memory bounded
    assert s._size == 0 and not s._parts
    out = s.feed(b"zz\nok\n")
    assert out == [Oversized(110), b"ok"]


def test_oversized_line_in_one_feed():
    s = LineSplitter(max_line=4)
    assert s.feed(b"abcdefgh\nab\n") == [Oversized(8), b"ab"]


def test_unterminated_last_line_is_flushed():
    s = LineSplitter()
    s.feed(b'{"x":1}')
    assert s.flush() == [b'{"x":1}']


def test_classify_kinds():
    assert classify(b'{"jsonrpc":"2.0","id":0,"method":"m"}')[0] == REQUEST
    assert classify(b'{"jsonrpc":"2.0","id":"abc","method":"m"}')[0] == REQUEST
    assert classify(b'{"jsonrpc":"2.0","method":"m"}')[0] == NOTIFICATION
    assert classify(b'{"jsonrpc":"2.0","id":1,"result":null}')[0] == RESPONSE
    assert classify(b'{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"x"}}')[0] == RESPONSE
    for noise in [b"hello", b"null", b"[1,2]", b'"s"', b"\xff\xfe", b'{"id":true,"method":"m"}', b'{"a":1}']:
        assert isinstance(classify(noise), Noise), noise


def test_encode_is_one_line_and_survives_lone_surrogates():
    line = framing.encode({"text": "a\nb\u00e9\ud800"})
    assert line.count(b"\n") == 1 and line.endswith(b"\n")
    assert json.loads(line)["text"].startswith("a\nb\u00e9")
    line.decode("utf-8")  # valid UTF-8 on the wire


@pytest.mark.slow
@settings(max_examples=1000, deadline=None)  # 3,000 took 13 s of CI; 1,000 still cut every way
@given(
    lines=st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")), max_size=20),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=10),
    limit=st.integers(min_value=1, max_value=50),
)
def test_splitter_matches_a_naive_split_under_any_chunking(lines, cuts, limit):
    data = b"".join(line + b"\n" for line in lines)
    s = LineSplitter(max_line=limit)
    got = []
    prev = 0
    for cut in sorted(c % (len(data) + 1) for c in cuts) + [len(data)]:
        got += s.feed(data[prev:cut])
        prev = cut
    got += s.flush()
    want = [Oversized(len(line)) if len(line) > limit else line for line in lines if line.strip() or len(line) > limit]
    assert got == want


# -- nesting depth -------------------------------------------------------------


def _depth(value) -> int:
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    return 0


_tricky = st.text(alphabet='[]{}"\\ab\n\u00e9', max_size=8)
_json = st.recursive(
    st.none() | st.integers() | _tricky,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_tricky, inner, max_size=3),
    max_leaves=30,
)


@settings(max_examples=400, deadline=None)
@given(value=_json)
def test_nesting_depth_matches_the_decoded_depth_brackets_in_strings_do_not_count(value):
    line = json.dumps(value, ensure_ascii=False).encode()
    assert framing.nesting_depth(line) == _depth(value)


def _stdlib_reading(line: bytes):
    """What classify answered before msgspec: json alone."""
    return framing._classify_slow(line)


# JSON values as agents write them, and the corners where msgspec and json differ:
# NaN and Infinity, integers past 64 bits, lone surrogate escapes, invalid UTF-8,
# a BOM, duplicate keys, control characters, trailing garbage.
_scalar = (st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
           | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=6))
_message = st.recursive(_scalar, lambda inner: st.lists(inner, max_size=3)
                        | st.dictionaries(st.sampled_from(["id", "method", "params", "result", "error", "x"])
                                          | st.text(max_size=3), inner, max_size=4), max_leaves=20)
_corners = st.sampled_from([b"", b"\xef\xbb\xbf", b'"\\ud800"', b"\xff", b"NaN", b"1e999", b" x", b"\x00",
                            b'"a\x01b"', b',"id":1,"id":"2"', b"18446744073709551616", b"-0", b"1.0"])


@settings(max_examples=500, deadline=None)  # each example reads two lines twice; the corners are a fixed list
@given(value=_message, corner=_corners, where=st.integers(min_value=0, max_value=200))
def test_the_fast_reading_agrees_with_json_on_every_line(value, corner, where):
    line = json.dumps(value, ensure_ascii=False, allow_nan=True).encode("utf-8", "surrogatepass")
    for candidate in (line, line[:where] + corner + line[where:]):
        fast, slow = classify(candidate), _stdlib_reading(candidate)
        if isinstance(slow, Noise):
            assert isinstance(fast, Noise) and fast.reason == slow.reason, candidate
        else:
            assert fast == slow and json.dumps(fast[1]) == json.dumps(slow[1]), candidate


def _nested_notification(depth: int) -> bytes:
    inner = depth - 2  # the message object and its params object
    return b'{"jsonrpc":"2.0","method":"m","params":{"x":' + b"[" * inner + b"]" * inner + b"}}"


def test_depth_at_the_limit_is_decoded_one_past_it_is_refused_before_decoding():
    assert classify(_nested_notification(10), max_depth=10)[0] == NOTIFICATION
    refused = classify(_nested_notification(11), max_depth=10)
    assert isinstance(refused, framing.TooDeep) and (refused.depth, refused.limit) == (11, 10)
    assert refused.method == "m" and not refused.has_id
    assert "nested 11 levels deep (the limit is 10, limits.json_depth)" in refused.describe()


def test_a_recursion_bomb_is_refused_with_its_id_and_method_read_without_decoding():
    bomb = b'{"jsonrpc":"2.0","id":"r-1","method":"fs/read_text_file","params":' + b"[" * 5000 + b"]" * 5000 + b"}"
    refused = classify(bomb)
    assert isinstance(refused, framing.TooDeep) and refused.depth == 5001  # the message object too
    assert (refused.has_id, refused.id, refused.method) == (True, "r-1", "fs/read_text_file")
    # Unbalanced, and ids or methods only inside nested values, are never taken for the top level.
    sneaky = b'{"params":{"id":9,"method":"x"},"z":' + b"[" * 100
    refused = classify(sneaky)
    assert isinstance(refused, framing.TooDeep) and not refused.has_id and refused.method is None
    answer = b'{"jsonrpc":"2.0","id":3,"result":' + b"{\"a\":" * 100 + b"1" + b"}" * 100 + b"}"
    refused = classify(answer)
    assert isinstance(refused, framing.TooDeep) and (refused.id, refused.method) == (3, None)


def test_many_brackets_but_shallow_is_a_message():
    wide = json.dumps({"jsonrpc": "2.0", "method": "m", "params": [[i] for i in range(500)]}).encode()
    assert classify(wide)[0] == NOTIFICATION


def test_a_huge_bomb_is_refused_after_one_scan_chunk_as_at_least_that_deep():
    n = 4 * framing._SCAN_CHUNK
    bomb = b'{"jsonrpc":"2.0","id":5,"method":"m","params":' + b"[" * n + b"]" * n + b"}"
    refused = classify(bomb)
    assert isinstance(refused, framing.TooDeep) and refused.id == 5
    assert framing._SCAN_CHUNK <= refused.depth < n  # stopped early: a lower bound
    assert "nested at least " in refused.describe()


# -- plain text chunks, read typed (framing.text_chunk) -------------------------------

_KINDS = ["agent_message_chunk", "agent_thought_chunk", "user_message_chunk"]
_odd = st.none() | st.integers() | st.text(max_size=4) | st.just({}) | st.just([])


def _plain(content: dict, update: dict, params: dict, msg: dict) -> bool:
    """The dict reading of a plain text chunk: exactly these members, these types."""
    return (set(msg) == {"jsonrpc", "method", "params"} and msg["jsonrpc"] == "2.0"
            and msg["method"] == "session/update" and type(params) is dict
            and set(params) == {"sessionId", "update"} and type(params["sessionId"]) is str
            and type(update) is dict and set(update) - {"messageId"} == {"sessionUpdate", "content"}
            and type(update.get("messageId", "")) is str
            and update["sessionUpdate"] in _KINDS and type(content) is dict
            and set(content) == {"type", "text"} and content["type"] == "text" and type(content["text"]) is str)


@st.composite
def _chunk_lines(draw):
    """Text chunk notifications, most of them near misses: a member added, dropped or of
    another type at any level, another kind, a messageId (a string, or not), keys reordered
    or repeated."""
    content = {"type": "text", "text": draw(st.text(max_size=12) | st.sampled_from(["$x$", "<b>", "a\nb", "\u2028"]))}
    update = {"sessionUpdate": draw(st.sampled_from(_KINDS + ["tool_call", "agent_message"])), "content": content}
    params = {"sessionId": draw(st.sampled_from(["s1", "<s>"])), "update": update}
    msg = {"jsonrpc": "2.0", "method": "session/update", "params": params}
    for target in (content, update, params, msg):
        if draw(st.integers(0, 5)) == 0:
            target[draw(st.sampled_from(["messageId", "_meta", "annotations", "id", "x"]))] = draw(_odd | st.text(max_size=6))
        if draw(st.integers(0, 7)) == 0 and target:
            key = draw(st.sampled_from(sorted(target)))
            if draw(st.booleans()):
                del target[key]
            else:
                target[key] = draw(_odd)
    items = list(msg.items())
    if draw(st.booleans()):
        items.reverse()
    text = "{" + ",".join(json.dumps(k) + ":" + json.dumps(v, ensure_ascii=draw(st.booleans())) for k, v in items) + "}"
    twice = draw(st.integers(0, 9)) == 0
    if twice:  # a member written twice: the last one counts, as in a dict
        text = text[:-1] + ',"jsonrpc":"2.0"}'
    return text.encode(), twice


@settings(max_examples=600, deadline=None)
@given(drawn=_chunk_lines())
def test_text_chunk_reads_exactly_the_plain_chunks_the_dict_reading_sees(drawn):
    """What the typed reading takes is a plain chunk, read as the dicts read it; and it takes
    every plain chunk written once per member (one with a member written twice may go to
    classify, which reads it as before: the first value is checked, then replaced)."""
    line, twice = drawn
    got = framing.text_chunk(line)
    parsed = classify(line)
    if got is None:  # anything else goes on to classify
        if type(parsed) is tuple and not twice:
            msg = parsed[1]
            params = msg.get("params")
            update = params.get("update") if type(params) is dict else None
            content = update.get("content") if type(update) is dict else None
            assert not _plain(content, update, params, msg), line
        return
    assert type(parsed) is tuple and parsed[0] == NOTIFICATION, line
    msg = parsed[1]
    params, update = msg["params"], msg["params"]["update"]
    assert _plain(update["content"], update, params, msg), line
    assert got == (params["sessionId"], update["sessionUpdate"], update["content"]["text"])
    mid = framing.typed_update(line)[1].messageId  # type: ignore[index, union-attr]
    assert (None if mid is msgspec.UNSET else mid) == update.get("messageId"), line


def test_text_chunk_lines_are_the_schemas_session_notifications():
    """The typed reading's names are the pinned schema's: each accepted line validates as a
    SessionNotification whose update is the chunk of that kind, with that text."""
    from acp import schema

    for kind in _KINDS:
        line = json.dumps({"jsonrpc": "2.0", "method": "session/update", "params": {
            "sessionId": "s", "update": {"sessionUpdate": kind, "content": {"type": "text", "text": "<b>$x$</b>"}}}}).encode()
        sid, got_kind, text = framing.text_chunk(line)
        note = schema.SessionNotification.model_validate(json.loads(line)["params"])
        assert (note.session_id, note.update.session_update, note.update.content.text) == (sid, got_kind, text)


def test_text_chunk_refuses_what_classify_reads_otherwise():
    for line in (b'{"method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk",'
                 b'"content":{"type":"text","text":"no jsonrpc member"}}}}',
                 b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":'
                 b'"agent_message_chunk","content":{"type":"text","text":"\\ud800"}}}}',
                 b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":'
                 b'"agent_message_chunk","content":{"type":"text","text":"a\xff"}}}}'):
        assert framing.text_chunk(line) is None
        assert type(classify(line)) in (tuple, Noise)
