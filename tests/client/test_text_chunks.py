"""Plain text chunks (a messageId allowed) are read typed (``framing.text_chunk`` ->
``Client._on_text_chunk`` -> ``Turn.apply_texts``), every other update as dicts. Through a real agent process, a stream
mixing both makes the events the dict reading alone makes, in the same order."""

from __future__ import annotations

import msgspec

from acp_kernel.client.session import Client
from acp_kernel.client.turn import Chunk, Turn
from acp_kernel.protocol import framing

from ..conftest import scripted_spec

HOSTILE = "<img src=x onerror=alert(1)> `a\nb` $x$ /tmp/evil\n# heading"


def _chunk(kind: str, text: str, **extra) -> dict:
    return {"sessionUpdate": kind, "content": {"type": "text", "text": text}, **extra}


UPDATES = [
    _chunk("agent_message_chunk", "plain "),
    _chunk("agent_message_chunk", HOSTILE),
    _chunk("agent_thought_chunk", "thinking "),
    _chunk("agent_message_chunk", ""),  # empty: nothing, on either path
    _chunk("agent_message_chunk", "with id ", messageId="m1"),  # a messageId: typed too
    _chunk("agent_message_chunk", "more of m1", messageId="m1"),
    _chunk("agent_message_chunk", "null id", messageId=None),  # null: the dict path
    _chunk("agent_message_chunk", "annotated ", annotations={"priority": 1}),
    {"sessionUpdate": "tool_call", "toolCallId": "t1", "title": HOSTILE, "status": "completed"},
    _chunk("user_message_chunk", "you "),
    _chunk("agent_message_chunk", "after"),
]


def _runs(events: list) -> list:
    """Events with each run of plain chunks of one role as one (the connection hands a run
    that came in one read on as one chunk: how the lines fell into reads is the pipe's)."""
    out: list = []
    for e in events:
        plain = type(e) is Chunk and e._raw is None and e.message_id is None
        if plain and out and type(out[-1]) is Chunk and out[-1]._raw is None and out[-1].message_id is None \
                and out[-1].role == e.role:
            out[-1] = Chunk(e.role, out[-1].text + e.text)
        else:
            out.append(e)
    return out


def _same(a, b) -> bool:
    if type(a) is not type(b):
        return False
    if type(a) is Chunk:
        return (a.role, a.text, a.raw, a.message_id) == (b.role, b.text, b.raw, b.message_id)
    return a.raw == b.raw


async def test_a_mixed_stream_makes_the_events_of_the_dict_reading():
    typed = [u for u in UPDATES if framing.text_chunk(msgspec.json.encode(
        {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": u}})) is not None]
    assert len(typed) == 8  # the plain ones, the empty one included; the rest go as dicts
    client = await Client(scripted_spec({"prompt": [{"update": u} for u in UPDATES]})).start()
    try:
        session = await client.new_session()
        turn = await session.prompt("go")
    finally:
        await client.close()
    reference = Turn(turn.session_id)
    for u in UPDATES:
        reference.apply_update(u)
    got = _runs([e for e in turn.events if type(e) is Chunk or getattr(e, "raw", None) in UPDATES])
    want = _runs(list(reference.events))
    assert len(got) == len(want) and all(_same(a, b) for a, b in zip(got, want)), (got, want)
    assert turn.text == reference.text and HOSTILE in turn.text
    assert turn.role_text("thought") == "thinking " and turn.role_text("user") == "you "


async def test_a_failing_text_chunk_handler_is_reported_as_the_update_handlers_are():
    """The typed path reports a handler's exception as ``handler-error`` for ``session/update``
    and reads on; the lines it does not take reach the dict handler."""
    import asyncio

    from acp_kernel.protocol.connection import Connection
    from acp_kernel.protocol.transport import memory_pair

    a, b = memory_pair()
    conn = Connection(a, name="x")
    reports: list[tuple[str, str]] = []
    dicts: list[dict] = []
    conn.on_report = lambda kind, text: reports.append((kind, text))
    conn.on_notification("session/update", dicts.append)

    def boom(sid: str, kind: str, texts: list[str], message_id: str | None) -> None:
        raise RuntimeError(f"no {''.join(texts)}")

    conn.on_text_chunk = boom
    await conn.start()
    line = lambda u: msgspec.json.encode({"jsonrpc": "2.0", "method": "session/update",  # noqa: E731
                                          "params": {"sessionId": "s", "update": u}}) + b"\n"
    done = asyncio.get_running_loop().create_future()
    conn.on_notification("_done", lambda p: done.set_result(None))
    b.write(line(_chunk("agent_message_chunk", "plain")) + line(UPDATES[7])
            + b'{"jsonrpc":"2.0","method":"_done","params":{}}\n')
    await asyncio.wait_for(done, 5)
    await a.close()
    assert reports == [("handler-error", "session/update: RuntimeError: no plain")]
    assert [p["update"] for p in dicts] == [UPDATES[7]]


async def test_a_run_of_plain_chunks_in_one_read_is_one_call_in_order():
    """Consecutive plain chunks of one session and kind that arrive in one read reach the
    client as one call; another kind, another session or any other line ends the run, and
    everything keeps its order."""
    import asyncio

    from acp_kernel.protocol.connection import Connection
    from acp_kernel.protocol.transport import memory_pair

    a, b = memory_pair()
    conn = Connection(a, name="x")
    seen: list = []
    conn.on_notification("session/update", lambda p: seen.append(("dict", p["update"]["sessionUpdate"])))
    conn.on_text_chunk = lambda sid, kind, texts, mid: seen.append((sid, kind, texts) if mid is None else (mid, texts))
    await conn.start()

    def line(u: dict, sid: str = "s") -> bytes:
        return msgspec.json.encode({"jsonrpc": "2.0", "method": "session/update",
                                    "params": {"sessionId": sid, "update": u}}) + b"\n"

    done = asyncio.get_running_loop().create_future()
    conn.on_notification("_done", lambda p: done.set_result(None))
    b.write(line(_chunk("agent_message_chunk", "a1 ")) + line(_chunk("agent_message_chunk", HOSTILE))
            + line(_chunk("agent_thought_chunk", "t1")) + line(_chunk("agent_message_chunk", "a2"))
            + line(UPDATES[8]) + line(_chunk("agent_message_chunk", "a3")) + line(_chunk("agent_message_chunk", "a4"), "s2")
            + line(_chunk("agent_message_chunk", "a5"), "s2") + line(_chunk("agent_message_chunk", "m1", messageId="m"))
            + line(_chunk("agent_message_chunk", "m2", messageId="m")) + line(_chunk("agent_message_chunk", "n1", messageId="n"))
            + line(_chunk("agent_message_chunk", "p")) + b'{"jsonrpc":"2.0","method":"_done","params":{}}\n')
    await asyncio.wait_for(done, 5)
    await a.close()
    assert seen == [("s", "agent_message_chunk", ["a1 ", HOSTILE]), ("s", "agent_thought_chunk", ["t1"]),
                    ("s", "agent_message_chunk", ["a2"]), ("dict", "tool_call"), ("s", "agent_message_chunk", ["a3"]),
                    ("s2", "agent_message_chunk", ["a4", "a5"]), ("m", ["m1", "m2"]), ("n", ["n1"]),
                    ("s", "agent_message_chunk", ["p"])]


# -- chunks with a messageId, read typed in runs ----------------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from acp_kernel.client.turn import MessageEdit  # noqa: E402

_KINDS = ["agent_message_chunk", "agent_thought_chunk", "user_message_chunk"]


def _normal(events: list) -> list:
    """Events with each stretch of streamed pieces (one role, one message id, nothing kept)
    as one: a run read typed is one chunk where the dicts make one per line."""
    out: list = []
    for e in events:
        if type(e) is Chunk and e._raw is None and out and type(out[-1]) is tuple and out[-1][0] == "chunk" \
                and out[-1][1:3] == (e.role, e.message_id):
            out[-1] = ("chunk", e.role, e.message_id, out[-1][3] + e.text)
        elif type(e) is Chunk and e._raw is None:
            out.append(("chunk", e.role, e.message_id, e.text))
        elif type(e) is Chunk:
            out.append(("kept", e.role, e.message_id, e.text, e.raw))
        elif type(e) is MessageEdit:
            out.append(("edit", e.role, e.message_id, e.text, e.replaced))
        else:
            out.append((type(e).__name__, getattr(e, "raw", None)))
    return out


@settings(max_examples=500, deadline=None)
@given(chunks=st.lists(st.tuples(st.sampled_from(_KINDS[:2] + _KINDS[:1]),
                                 st.sampled_from(["a", "ab", "abc", "", " ", "b", HOSTILE, "a" + HOSTILE]),
                                 st.sampled_from([None, None, "m1", "m2", "m3", ""])), max_size=14),
       cuts=st.lists(st.booleans(), min_size=14, max_size=14))
def test_runs_of_chunks_with_message_ids_read_as_the_dicts_read_them(chunks, cuts):
    """The same chunks, one turn reading each as a dict, the other typed in runs as the
    connection makes them (one kind and id, cut where reads fell): the same text for every
    role, the same edited roles and the same events (a run's pieces streamed as one chunk),
    new messages, pieces of earlier ones and messages sent again whole (the replay rule)
    included."""
    by_dicts, typed = Turn("s"), Turn("s")
    runs: list = []
    for (kind, text, mid), cut in zip(chunks, cuts):
        by_dicts.apply_update(_chunk(kind, text, **({} if mid is None else {"messageId": mid})))
        if runs and not cut and runs[-1][0] == kind and runs[-1][2] == mid:
            runs[-1][1].append(text)
        else:
            runs.append((kind, [text], mid))
    for kind, texts, mid in runs:
        typed.apply_texts(kind, texts, mid)
    for role in ("agent", "thought", "user"):
        assert typed.role_text(role) == by_dicts.role_text(role), role
    assert typed.edited == by_dicts.edited
    assert _normal(typed.events) == _normal(by_dicts.events)
