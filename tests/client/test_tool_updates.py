"""Tool call updates are read typed (``framing.tool_update`` -> ``Client._on_tool_update`` ->
``Turn.apply_tool``), their payloads left as JSON text until read. Whatever the agent sends,
the state and the events are the ones the dict reading makes."""

from __future__ import annotations

import asyncio
import json
import sys

import msgspec
from hypothesis import event, example, given, settings
from hypothesis import strategies as st

from acp_kernel.client.session import Client
from acp_kernel.client.turn import ToolCallEvent, Turn
from acp_kernel.protocol import framing
from acp_kernel.protocol.framing import NOTIFICATION, classify

from ..conftest import scripted_spec

HOSTILE = "<img src=x onerror=alert(1)> `a\nb` $x$ /tmp/evil\n# heading"
_KINDS = ["tool_call", "tool_call_update"]
_SCALARS = ("title", "kind", "status")
_PAYLOADS = ("content", "locations", "rawInput", "rawOutput", "_meta")
_FIELDS = {"sessionUpdate", "toolCallId", *_SCALARS, *_PAYLOADS}

_odd = st.none() | st.integers() | st.text(max_size=4) | st.just({}) | st.just([]) | st.just(1.5)
_json = st.recursive(st.none() | st.booleans() | st.integers(-3, 3) | st.text(max_size=6) | st.sampled_from([HOSTILE]),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
                     max_leaves=6)
_content = st.lists(st.sampled_from([
    {"type": "content", "content": {"type": "text", "text": HOSTILE}},
    {"type": "diff", "path": "/tmp/a\nb.py", "oldText": "x", "newText": "<b>$y$</b>"},
    {"type": "terminal", "terminalId": "t1"},
]), max_size=3)
# rawOutput as agents send it (codex's exit_code and aggregated_output, pi's details), a key
# spelled with an escape, and the shapes nobody reads.
_raw_output = st.sampled_from([
    {"lines": 2}, {"exit_code": 3, "aggregated_output": "out\n"}, {"details": {"stdout": "s", "exitCode": 1}},
    {"stderr": HOSTILE}, {"output": ""}, "text", [1], None,
]) | _json
_meta = st.sampled_from([
    {"terminal_output": {"terminal_id": "x", "data": "abc"}}, {"terminal_output_delta": {"data": HOSTILE}},
    {"terminal_exit": {"exit_code": 7}}, {"terminal_info": {}}, {"other": 1}, [], "m",
])


@st.composite
def _updates(draw):
    """A tool call update as a dict: any subset of the schema's members, most well typed, some
    not; sometimes a member the schema does not name."""
    def rarely(usual: st.SearchStrategy, odd: st.SearchStrategy) -> object:
        return draw(odd if draw(st.integers(0, 7)) == 0 else usual)

    update = {"sessionUpdate": rarely(st.sampled_from(_KINDS), st.just("plan")),
              "toolCallId": rarely(st.sampled_from(["c1", "c2", "<c>"]), st.just("") | _odd)}
    for key in _SCALARS:
        if draw(st.booleans()):
            update[key] = rarely(st.sampled_from(["t", HOSTILE, "read", "completed", "failed"]), _odd)
    strategies = {"content": _content | _odd, "locations": st.just([{"path": "/tmp/x\ny", "line": 1}]) | _odd,
                  "rawInput": _json, "rawOutput": _raw_output, "_meta": _meta}
    for key in _PAYLOADS:
        if draw(st.integers(0, 2)) == 0:
            update[key] = draw(strategies[key])
    if draw(st.integers(0, 9)) == 0:
        update[draw(st.sampled_from(["x", "annotations", "meta"]))] = draw(_odd)
    return update


def _line(update: dict, sid: object = "s", ascii_: bool = False, **top: object) -> bytes:
    msg = {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid, "update": update}, **top}
    return json.dumps(msg, ensure_ascii=ascii_).encode()


def _typed_shape(msg: dict) -> bool:
    """The dict reading of a line the typed reading must take: exactly these members, these types."""
    params = msg.get("params")
    update = params.get("update") if type(params) is dict else None
    return (set(msg) == {"jsonrpc", "method", "params"} and msg["jsonrpc"] == "2.0"
            and msg["method"] == "session/update" and set(params) == {"sessionId", "update"}
            and type(params["sessionId"]) is str and type(update) is dict and set(update) <= _FIELDS
            and update.get("sessionUpdate") in _KINDS and type(update.get("toolCallId")) is str
            and all(type(update.get(k)) in (str, type(None)) for k in _SCALARS))


@settings(max_examples=400, deadline=None)
@given(update=_updates(), sid=st.sampled_from(["s", 5]), ascii_=st.booleans(), extra=st.booleans())
def test_tool_update_takes_exactly_the_schemas_tool_updates_read_as_the_dicts_read_them(update, sid, ascii_, extra):
    line = _line(update, sid, ascii_, **({"x": None} if extra else {}))
    got = framing.tool_update(line)
    parsed = classify(line)
    assert type(parsed) is tuple and parsed[0] == NOTIFICATION
    msg = parsed[1]
    assert (got is not None) == _typed_shape(msg), line
    if got is None:
        return
    sid_, typed = got
    want = msg["params"]["update"]
    assert sid_ == msg["params"]["sessionId"] and typed.sessionUpdate == want["sessionUpdate"]
    assert [getattr(typed, k) for k in _SCALARS] == [want.get(k) for k in _SCALARS]
    for key, attr in zip(_PAYLOADS, ("content", "locations", "rawInput", "rawOutput", "meta")):
        raw = getattr(typed, attr)
        assert (framing.payload(raw) == want[key]) if key in want else not raw
    assert framing.update_of(line) == want
    text = bytes(framing.update_text(line))
    assert msgspec.json.decode(text) == want and text.decode() in line.decode()  # the agent's own text


def _state(turn: Turn) -> list:
    # terminal_ids first: asked of content still as JSON text, it answers without reading it.
    return [(c.terminal_ids, c.id, c.title, c.kind, c.status, c.content, c.locations, c.raw_input, c.raw_output,
             c.announced, c.updates, c.output, c.output_dropped, c.exit_code, c.agent_terminal, c.text)
            for c in turn.tool_calls.values()]


def _events(turn: Turn) -> list:
    return [(type(e).__name__, getattr(e, "new", None), getattr(e, "raw", None)) for e in turn.events]


@settings(max_examples=300, deadline=None)
@given(updates=st.lists(_updates(), min_size=1, max_size=6))
def test_a_turn_read_typed_is_the_turn_read_as_dicts(updates):
    """The same lines, one turn reading each as a dict, the other typed where it can: the same
    tool calls (every field, the exit code and command output taken from rawOutput and
    _meta included) and the same events, in order."""
    by_dicts, typed = Turn("s"), Turn("s")
    took = 0
    for update in updates:
        line = _line(update)
        by_dicts.apply_update(classify(line)[1]["params"]["update"])  # type: ignore[index]
        got = framing.tool_update(line)
        if got is None:
            typed.apply_update(classify(line)[1]["params"]["update"])  # type: ignore[index]
        else:
            took += 1
            typed.apply_tool(got[1], line)
    event(f"typed: {min(took, 2)}")
    assert _events(typed) == _events(by_dicts)
    assert _state(typed) == _state(by_dicts)
    for turn in (typed, by_dicts):  # a finished turn compacts the same
        turn.ended = 1.0
        turn.compact()
    assert _state(typed) == _state(by_dicts)


def test_tool_update_lines_are_the_schemas_session_notifications():
    """The typed reading's names are the pinned schema's: a full line of each kind validates
    as a SessionNotification whose update has those values."""
    from acp import schema

    for kind in _KINDS:
        update = {"sessionUpdate": kind, "toolCallId": "c1", "title": HOSTILE, "kind": "execute", "status": "completed",
                  "content": [{"type": "content", "content": {"type": "text", "text": HOSTILE}}],
                  "locations": [{"path": "/tmp/a\nb", "line": 2}], "rawInput": {"command": "ls"},
                  "rawOutput": {"exit_code": 0}, "_meta": {"x": 1}}
        line = _line(update)
        sid, typed = framing.tool_update(line)
        note = schema.SessionNotification.model_validate(json.loads(line)["params"])
        u = note.update
        assert (note.session_id, u.session_update, u.tool_call_id, u.title, u.kind, u.status) == \
            (sid, typed.sessionUpdate, typed.toolCallId, typed.title, typed.kind, typed.status)
        assert u.raw_input == framing.payload(typed.rawInput) and u.raw_output == framing.payload(typed.rawOutput)
        assert u.field_meta == framing.payload(typed.meta) and len(u.locations) == 1 and len(u.content) == 1


def _same_value(a: object, b: object) -> bool:
    return a == b or (a != a and b != b)  # NaN


def test_a_payload_that_reading_would_refuse_or_read_otherwise_is_read_as_classify_reads_it():
    """msgspec skips a payload without reading it: bytes that are not UTF-8, numbers past a
    double or longer than json's integers. The typed reading refuses the line where
    classify makes it noise, and reads a payload as classify does where json reads what
    msgspec refuses (1e400 is inf)."""
    payloads = [b"1e400", b"-1e999", b"1" * 5000, b"1" * 4300, b"0." + b"1" * 400, b'"\xed\xa0\x80"',
                b'"\xc0\xaf"', b'"a\xffb"', '"é ☃"'.encode(), b'"\\ud83d\\ude00"', b'"\\ud800"', b"NaN", b"-0",
                b'"a\x1bb"', b"[1,]", b"12345678901234567890123", b'{"a":1,"a":2}']
    taken = 0
    for text in payloads:
        line = b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":' \
               b'{"sessionUpdate":"tool_call","toolCallId":"x","rawInput":' + text + b',"rawOutput":' + text + b"}}}"
        got, parsed = framing.tool_update(line), classify(line)
        if type(parsed) is not tuple:
            assert got is None, text
            continue
        want = parsed[1]["params"]["update"]["rawInput"]
        if got is not None:
            taken += 1
            assert _same_value(framing.payload(got[1].rawInput), want), text
            turn = Turn("s")
            turn.apply_tool(got[1], line)
            call = turn.tool_calls["x"]
            assert _same_value(call.raw_input, want) and _same_value(call.raw_output, want), text
    assert taken >= 8


def test_a_line_too_deep_is_left_to_classify():
    deep = {"sessionUpdate": "tool_call", "toolCallId": "c", "rawInput": json.loads("[" * 70 + "]" * 70)}
    line = _line(deep)
    assert framing.tool_update(line) is None
    assert isinstance(classify(line), framing.TooDeep)
    assert framing.tool_update(line, max_depth=100) is not None


_nested = st.recursive(st.integers(0, 9) | st.sampled_from(["[", "{x}", HOSTILE]),
                       lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.sampled_from("ab"), inner, max_size=2),
                       max_leaves=12)


@settings(max_examples=500, deadline=None)
@given(payloads=st.dictionaries(st.sampled_from(_PAYLOADS), _nested, max_size=3), max_depth=st.integers(1, 14))
def test_a_tool_update_is_taken_only_within_the_depth_limit_and_always_when_its_brackets_are_few(payloads, max_depth):
    """The typed reading counts brackets only on a line with a long payload: whatever it takes
    is within the limit classify enforces, and it takes every line the count would let by."""
    line = _line({"sessionUpdate": "tool_call", "toolCallId": "c", **payloads})
    got = framing.tool_update(line, max_depth)
    depth = framing.nesting_depth(line)
    event(f"depth {'within' if depth <= max_depth else 'past'} the limit, {'taken' if got else 'left'}")
    if got is not None:
        assert depth <= max_depth, line
    if line.count(b"[") + line.count(b"{") <= max_depth:
        assert got is not None, line
    if depth > max_depth:
        assert isinstance(classify(line, max_depth), framing.TooDeep)


async def test_a_stream_through_a_real_agent_makes_the_dict_readings_events_and_keeps_the_unknown_sessions():
    """Through a real agent process: tool calls typed between chunks and updates read as dicts,
    in order; one for a session not open yet is kept as the dict it would have been."""
    updates = [
        {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "a "}},
        {"sessionUpdate": "tool_call", "toolCallId": "c1", "title": HOSTILE, "kind": "execute",
         "rawInput": {"command": "ls\nrm"}},
        {"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "completed",
         "rawOutput": {"exit_code": 2, "aggregated_output": HOSTILE}},
        {"sessionUpdate": "tool_call_update", "toolCallId": "c1", "annotations": {}},  # not the schema's: as a dict
        {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "b"}},
    ]
    stray = {"sessionUpdate": "tool_call", "toolCallId": "x1", "title": "elsewhere"}
    script = [{"update": u} for u in updates]
    script.append({"send": {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "later", "update": stray}}})
    client = await Client(scripted_spec({"prompt": script})).start()
    try:
        session = await client.new_session()
        turn = await session.prompt("go")
    finally:
        await client.close()
    # The two of the schema's shape came typed (their lines kept), the third as a dict.
    assert [type(e._update) for e in turn.events if type(e) is ToolCallEvent] == [bytes, bytes, dict]
    reference = Turn(turn.session_id)
    for u in updates:
        reference.apply_update(u)
    assert _events(turn) == _events(reference) and _state(turn) == _state(reference)
    call = turn.tool_calls["c1"]
    assert (call.exit_code, call.output, call.raw_input) == (2, HOSTILE, {"command": "ls\nrm"})
    assert client._early == {"later": [stray]}


async def test_a_run_of_tool_updates_in_one_read_is_one_call_in_order_and_a_failure_is_reported():
    """Consecutive tool updates that arrive in one read reach the client as one run; a
    chunk or any other line ends it, and everything keeps its order. A handler's failure
    is reported as the update handler's are, and the stream reads on."""
    from acp_kernel.protocol.connection import Connection
    from acp_kernel.protocol.transport import memory_pair

    a, b = memory_pair()
    conn = Connection(a, name="x")
    reports: list[tuple[str, str]] = []
    seen: list = []
    conn.on_report = lambda kind, text: reports.append((kind, text))
    conn.on_notification("session/update", lambda p: seen.append(("dict", p["update"]["sessionUpdate"])))
    conn.on_text_chunk = lambda sid, kind, texts, mid: seen.append(("text", texts))

    def tool(run: list) -> None:
        seen.append(("tools", [(sid, update.toolCallId, line) for sid, update, line in run]))
        if any(update.toolCallId == "boom" for _, update, _ in run):
            raise RuntimeError("no tool")

    conn.on_tool_update = tool
    await conn.start()
    chunk = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "t"}}
    lines = [_line(chunk), _line({"sessionUpdate": "tool_call", "toolCallId": "c1"}), _line(chunk),
             _line({"sessionUpdate": "tool_call", "toolCallId": "boom"}), _line({"sessionUpdate": "plan", "entries": []}),
             _line({"sessionUpdate": "tool_call", "toolCallId": "c2"}), _line({"sessionUpdate": "tool_call", "toolCallId": "c3"}, "s2"),
             _line({"sessionUpdate": "tool_call_update", "toolCallId": "c2", "status": "completed"})]
    done = asyncio.get_running_loop().create_future()
    conn.on_notification("_done", lambda p: done.set_result(None))
    b.write(b"\n".join(lines) + b'\n{"jsonrpc":"2.0","method":"_done","params":{}}\n')
    await asyncio.wait_for(done, 5)
    await a.close()
    assert reports == [("handler-error", "session/update: RuntimeError: no tool")]
    assert seen == [("text", ["t"]), ("tools", [("s", "c1", lines[1])]), ("text", ["t"]), ("tools", [("s", "boom", lines[3])]),
                    ("dict", "plan"), ("tools", [("s", "c2", lines[5]), ("s2", "c3", lines[6]), ("s", "c2", lines[7])])]
    assert ToolCallEvent.__struct_fields__ == ("call", "new", "_update")


def _raises_once_after(turn: Turn, n: int) -> None:
    """A run of ``n`` tool calls (c1, c2, ...) into ``turn``: a listener's "view broke" comes
    out once, after the run."""
    lines = [_line({"sessionUpdate": "tool_call", "toolCallId": f"c{i}", "title": HOSTILE}) for i in range(1, n + 1)]
    run = [(*framing.tool_update(line), line) for line in lines]
    try:
        turn.apply_tools(run, 0, n)
    except RuntimeError as exc:
        assert str(exc) == "view broke"
    else:
        raise AssertionError("the failure was swallowed")


def test_a_listener_failing_in_a_run_stops_nothing_and_is_raised_once_after():
    turn = Turn("s")
    seen: list = []

    def listener(event):  # noqa: ANN001
        seen.append(event.call.id)
        if event.call.id == "c2":
            raise RuntimeError("view broke")

    turn.subscribe(listener)
    _raises_once_after(turn, 3)
    assert seen == ["c1", "c2", "c3"] and list(turn.tool_calls) == ["c1", "c2", "c3"]
    assert [e.raw["toolCallId"] for e in turn.events] == ["c1", "c2", "c3"]


# Content items near the usual text item: the typed reading of their texts must read them as
# the dicts do (or leave them to the dicts).
_text_items = st.lists(st.sampled_from([
    {"type": "content", "content": {"type": "text", "text": HOSTILE}},
    {"type": "content", "content": {"type": "text", "text": "a", "annotations": {"x": 1}}, "_meta": {}},
    {"type": "content", "content": {"type": "image", "text": "alt", "data": "x"}},
    {"type": "content", "content": {"type": "text", "text": 5}},
    {"type": "content", "content": {"type": "text"}}, {"type": "content", "content": "t"}, {"type": "content"},
    {"type": "diff", "path": "/tmp/a\nb.py", "oldText": None, "newText": "$y$"},
    {"type": "terminal", "terminalId": "t1"}, "text", 7,
]), max_size=4)
_spelled = st.sampled_from([
    ("", ""), ('"text":"', '"t\\u0065xt":"'), ('"content"', '"c\\u006fntent"'), ('"diff"', '"d\\u0069ff"'),
    ('"terminalId"', '"termin\\u0061lId"'), ('"command"', '"comm\\u0061nd"'), ('"text":"', '"text":"x","text":"'),
    ('"type":"content"', '"type":"diff","type":"content"'), ('"type":"content"', '"type":"content","type":"diff"'),
    ('"text":"', '"text":"\\ud800'), ('"text":"', '"text":"1e999'),
])


@settings(max_examples=400, deadline=None)
@given(content=_text_items | _content, raw_input=_json | st.sampled_from([{"command": ["ls", "a b"]}, {"cmd": HOSTILE}]),
       spelled=_spelled)
def test_a_call_s_unread_payloads_answer_what_reading_them_answers(content, raw_input, spelled):
    """A question about a payload still as JSON text (terminal ids, diffs, the command, the
    text) is answered unread, or by a typed pass, where it can be: each answer is the one
    the payload read as dicts gives, however its keys are spelled."""
    old, new = spelled
    line = _line({"sessionUpdate": "tool_call", "toolCallId": "c", "content": content, "rawInput": raw_input})
    line = line.replace(old.encode(), new.encode(), 1) if old else line
    got = framing.tool_update(line)
    assert got is not None
    read = Turn("s")
    read.apply_update(classify(line)[1]["params"]["update"])  # type: ignore[index]
    want = read.tool_calls["c"]
    for name in ("terminal_ids", "diffs", "command", "text"):
        turn = Turn("s")
        turn.apply_tool(got[1], line)
        call = turn.tool_calls["c"]
        assert getattr(call, name) == getattr(want, name), (name, line)
        event(f"{name}: {'unread' if type(call._content) is msgspec.Raw and type(call._raw_input) is msgspec.Raw else 'read'}")


def test_terminal_ids_of_unread_content_see_a_terminal_however_its_key_is_spelled():
    """Content left as JSON text answers "no terminal" unread only when no spelling of
    ``terminalId`` can be in it; an escaped letter makes it read."""
    for content, ids in [(b'[{"type":"terminal","terminalId":"t1"}]', ["t1"]),
                         (b'[{"type":"termin\\u0061l","termin\\u0061lId":"t2"}]', ["t2"]),
                         (b'[{"type":"content","content":{"type":"text","text":"a\\nterminal"}}]', []),
                         (b'{"terminalId":"t3"}', [])]:
        line = b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":' \
            b'{"sessionUpdate":"tool_call","toolCallId":"c","content":' + content + b'}}}'
        turn = Turn("s")
        turn.apply_tool(framing.tool_update(line)[1], line)
        call = turn.tool_calls["c"]
        assert type(call._content) is msgspec.Raw
        assert call.terminal_ids == ids, content
        by_dict = Turn("s")
        by_dict.apply_update(classify(line)[1]["params"]["update"])  # type: ignore[index]
        assert by_dict.tool_calls["c"].terminal_ids == ids


def test_a_runs_listener_hears_each_read_once_in_order_with_the_events_kept():
    """``subscribe(listener, runs=...)``: the tool call events of one read in one call, after
    they are all in the turn; other events as they come, in order (an update the run cannot
    take sends the run so far first); per-event listeners as before; unsubscribing ends both."""
    turn = Turn("s")
    heard: list = []
    each: list = []
    unsubscribe = turn.subscribe(lambda ev: heard.append(("one", type(ev).__name__)),
                                 runs=lambda evs: heard.append(("run", [e.call.id for e in evs], len(turn.events))))
    turn.subscribe(lambda ev: each.append(getattr(getattr(ev, "call", None), "id", type(ev).__name__)))
    ups = [{"sessionUpdate": "tool_call", "toolCallId": "c1", "title": HOSTILE},
           {"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "completed"},
           {"sessionUpdate": "tool_call", "toolCallId": "", "title": "no id"},
           {"sessionUpdate": "tool_call", "toolCallId": "c2"}]
    lines = [_line(u) for u in ups]
    run = [(*framing.tool_update(line), line) for line in lines]
    turn.apply_tools(run, 0, len(run))
    assert heard == [("run", ["c1", "c1"], 2), ("one", "UnknownUpdate"), ("run", ["c2"], 4)]
    assert each == ["c1", "c1", "UnknownUpdate", "c2"]
    unsubscribe()
    turn.apply_tools(run, 3, 4)
    assert len(heard) == 3 and each[-1] == "c2" and len(each) == 5


def test_a_runs_listener_failing_stops_nothing_and_is_raised_after_the_run():
    turn = Turn("s")
    ran: list = []

    def broken(events):  # noqa: ANN001
        raise RuntimeError("view broke")

    turn.subscribe(lambda ev: None, runs=broken)
    turn.subscribe(lambda ev: None, runs=lambda evs: ran.append(len(evs)))
    _raises_once_after(turn, 2)
    assert ran == [2] and list(turn.tool_calls) == ["c1", "c2"]


@settings(max_examples=300, deadline=None)
@given(digits=st.sampled_from([10, sys.get_int_max_str_digits() - 1, sys.get_int_max_str_digits(),
                               sys.get_int_max_str_digits() + 1, 3 * sys.get_int_max_str_digits()]),
       where=st.sampled_from(["rawInput", "rawOutput", "content"]), quoted=st.booleans(), pad=st.integers(0, 9000).map(lambda n: "x" * n))
def test_a_line_with_an_integer_longer_than_json_reads_is_left_to_classify(digits, where, quoted, pad):
    """A tool call whose payload holds a run of digits longer than Python reads as an integer
    (``sys.get_int_max_str_digits``) is left to ``classify``, which reads it as json does: an
    integer that long is refused (noise), a string of digits is text. Any shorter run is
    taken, wherever it stands in the line (the run is first looked for in every n-th byte)."""
    number = "7" * digits
    value = f'"{number}"' if quoted else number
    payload = {"rawInput": '{"n": %s, "pad": "%s"}', "rawOutput": '{"pad": "%s", "n": %s}',
               "content": '[{"type": "content", "content": {"type": "text", "text": "%s"}}, %s]'}[where]
    payload = payload % ((value, pad) if where == "rawInput" else (pad, value))
    line = ('{"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": '
            '{"sessionUpdate": "tool_call", "toolCallId": "c", "%s": %s}}}' % (where, payload)).encode()
    got = framing.tool_update(line)
    parsed = classify(line)
    long_run = digits > sys.get_int_max_str_digits()
    assert (got is None) == long_run, (digits, where, quoted)
    if long_run and not quoted:
        assert isinstance(parsed, framing.Noise)
    else:
        assert type(parsed) is tuple and parsed[0] == NOTIFICATION
    if got is not None:
        raw = {"rawInput": got[1].rawInput, "rawOutput": got[1].rawOutput, "content": got[1].content}[where]
        assert framing.payload(raw) == parsed[1]["params"]["update"][where]


def _deep(n: int) -> str:
    return "[" * n + "]" * n


_shallow_items = st.sampled_from([
    '{"type":"content","content":{"type":"text","text":"%s"}}' % ("[{" * 40 + HOSTILE.replace("\n", "\\n")),
    '{"type":"diff","path":"/tmp/a\\nb.py","oldText":"{[","newText":"%s"}' % ("{" * 70),
    '{"type":"diff","path":"p","oldText":null,"newText":"x"}', '{"type":"terminal","terminalId":"t1"}',
    # A repeated member, a deeper value in it: every value's type is checked, the first one's too.
    '{"type":"content","content":{"type":"text","text":%s,"text":"x"}}' % _deep(70),
    '{"type":"content","content":{"type":"text","text":"x"},"content":%s}' % _deep(70),
    '{"type":"content","content":{"type":"text","text":"x","annotations":%s}}' % _deep(70),
    '{"type":"terminal","terminalId":"t","terminalId":%s}' % _deep(5),
])


@settings(max_examples=400, deadline=None)
@example(items=['{"type":"content","content":{"type":"text","text":"[{[{[{"}}'], max_depth=5, raw_input="")
@given(items=st.lists(_shallow_items, max_size=4), max_depth=st.integers(2, 9) | st.integers(2, 70),
       raw_input=st.sampled_from(["", ',"rawInput":{"path":"/x"}', ',"rawInput":%s' % _deep(40)]))
def test_content_with_brackets_in_its_text_is_taken_only_when_it_is_shallow(items, max_depth, raw_input):
    """A file read's text holds brackets by the thousand: content of the usual items, read
    strictly typed, is taken whatever their count, and only when the line is within the depth
    limit (a repeated member or an extra one holding something deep is not taken)."""
    line = ('{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":'
            '{"sessionUpdate":"tool_call_update","toolCallId":"c","content":[%s]%s}}}' % (",".join(items), raw_input)).encode()
    got = framing.tool_update(line, max_depth)
    depth = framing.nesting_depth(line)
    event(f"depth {'within' if depth <= max_depth else 'past'} the limit, {'taken' if got else 'left'}")
    if got is not None:
        assert depth <= max_depth, line
    else:
        assert not isinstance(classify(line, max_depth), tuple) or depth <= max_depth
    plain = all("annotations" not in i and i.count('"text":') < 2 and i.count('"content":') < 3 and i.count('"terminalId"') < 2
                for i in items)
    short = not raw_input or ("path" in raw_input and len('{"path":"/x"}') < 2 * max_depth - 4)  # too short to be deep
    if plain and short and depth <= max_depth and max_depth >= 6:
        assert got is not None, line  # brackets inside strings do not send it to classify
