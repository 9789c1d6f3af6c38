"""Property-based fuzz of framing + dispatch: a :class:`Connection` fed random
JSON-RPC-ish byte streams, split at random points, over ``memory_pair()``.

Properties: nothing raises out of the reader (no loop exception, no handler
left unanswered), every request that reached dispatch is answered exactly
once (a result or an error with an integer code and a message), the answers
mean what they should, and outgoing requests settle exactly once. The
splitter alone has its own chunking property in tests/test_framing.py.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import uuid
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acp_kernel.protocol.connection import Connection
from acp_kernel.errors import ConnectionClosed, RpcError
from acp_kernel.protocol.transport import memory_pair

@pytest.fixture(autouse=True)
def quiet_connection_log():
    """Handler crashes are logged with tracebacks by design; thousands of them
    would only slow the fuzz down (they are still counted as reports)."""
    logger = logging.getLogger("acp_kernel.protocol.connection")
    logger.disabled = True
    yield
    logger.disabled = False


SETTINGS = dict(deadline=None, database=None, suppress_health_check=list(HealthCheck))
#: Examples of the dispatch fuzz: 400 in the suite (its CPU is a tenth of CI's budget at
#: 1,200; the seeded soak below adds longer streams); ACP_FUZZ_EXAMPLES=N for a longer hunt.
DISPATCH_EXAMPLES = int(os.environ.get("ACP_FUZZ_EXAMPLES", "400"))

# -- strategies -------------------------------------------------------------------

json_scalar = st.one_of(st.none(), st.booleans(), st.integers(-2**63, 2**63), st.text(max_size=8),
                        st.floats(allow_nan=False, allow_infinity=False))
json_value = st.recursive(json_scalar, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=4), inner, max_size=3)), max_leaves=5)

ids = st.one_of(st.integers(-3, 40), st.integers(-2**62, 2**62), st.sampled_from(["", "1", "0", "a", "ü", "x" * 50]),
                st.uuids().map(str))
METHODS = ["echo", "echo", "yield", "block", "fail", "crash", "invalid", "bad_result", "nope/unknown", "$/cancel_request", ""]


@st.composite
def request(draw):
    msg: dict[str, Any] = {"jsonrpc": "2.0", "id": draw(st.one_of(ids, st.none())),
                           "method": draw(st.one_of(st.sampled_from(METHODS), st.text(max_size=10)))}
    if draw(st.booleans()):
        msg["params"] = draw(json_value)
    if draw(st.integers(0, 9)) == 0:
        del msg["jsonrpc"]  # sloppy agents omit it
    return ("request", msg)


@st.composite
def notification(draw):
    method = draw(st.sampled_from(["note", "note_crash", "$/cancel_request", "$/cancel_request", "session/update", "zzz"]))
    if method == "$/cancel_request":
        params: Any = {"requestId": draw(st.one_of(ids, st.none()))} if draw(st.integers(0, 5)) else draw(json_value)
    else:
        params = draw(json_value)
    return ("notification", {"jsonrpc": "2.0", "method": method, "params": params})


@st.composite
def response(draw):
    msg: dict[str, Any] = {"jsonrpc": "2.0", "id": draw(st.one_of(st.integers(-2, 8), st.sampled_from(["0", "1"]), st.none()))}
    if draw(st.booleans()):
        msg["result"] = draw(json_value)
    else:
        msg["error"] = draw(st.one_of(json_value, st.fixed_dictionaries(
            {"code": st.integers(-32800, 0), "message": st.text(max_size=10)})))
    return ("response", msg)


junk_bytes = st.binary(max_size=60).map(lambda b: b.replace(b"{", b"("))
junk_json = st.one_of(json_scalar, st.lists(json_value, max_size=3),
                      st.dictionaries(st.sampled_from(["a", "jsonrpc", "params", "id"]), json_value, max_size=3)
                      .filter(lambda d: not ("id" in d and ("result" in d or "error" in d))))
bad_ids = st.one_of(st.booleans(), st.floats(allow_nan=False, allow_infinity=False).filter(lambda f: f != int(f)),
                    st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=2), st.integers(), max_size=2))


@st.composite
def junk(draw):
    kind = draw(st.integers(0, 5))
    if kind == 0:
        return ("junk", draw(junk_bytes))
    if kind == 1:
        return ("junk", json.dumps(draw(junk_json)).encode())
    if kind == 2:  # a request with an id of a type JSON-RPC does not allow
        return ("junk", json.dumps({"jsonrpc": "2.0", "id": draw(bad_ids), "method": "echo"}).encode())
    if kind == 3:  # a message cut short
        line = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "echo", "params": draw(json_value)}).encode()
        return ("junk", line[: draw(st.integers(0, len(line) - 1))])
    if kind == 4:  # invalid UTF-8 inside an otherwise valid request
        return ("junk", b'{"jsonrpc":"2.0","id":7,"method":"echo","params":"\xff\xfe"}')
    return ("junk", b"")  # a blank line


item = st.one_of(request(), request(), notification(), response(), junk())


def encode(kind: str, msg: Any) -> bytes:
    if kind == "junk":
        return msg
    return json.dumps(msg, ensure_ascii=bool(hash(json.dumps(msg)) & 1)).encode()


def key(rid: Any) -> tuple[str, Any]:
    return (type(rid).__name__, rid)


# -- the connection under test ------------------------------------------------------


class Harness:
    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.release = asyncio.Event()
        self.reports: list[tuple[str, str]] = []
        self.notes: list[Any] = []
        conn.on_report = lambda kind, text: self.reports.append((kind, text))

        async def echo(params):
            return params

        async def yield_(params):
            for _ in range(3):
                await asyncio.sleep(0)
            return "yielded"

        async def block(params):
            await self.release.wait()
            return "released"

        async def fail(params):
            raise RpcError(-32002, "not found here", {"params": params})

        async def crash(params):
            raise ValueError("handler bug")

        async def invalid(params):
            from acp.schema import ReadTextFileRequest

            return ReadTextFileRequest.model_validate(params).path

        async def bad_result(params):
            return {"not json": object()}

        for name, fn in [("echo", echo), ("yield", yield_), ("block", block), ("fail", fail), ("crash", crash),
                         ("invalid", invalid), ("bad_result", bad_result)]:
            conn.on_request(name, fn)
        conn.on_notification("note", self.notes.append)
        conn.on_notification("note_crash", lambda p: 1 / 0)


def run(coro):
    loop = asyncio.new_event_loop()
    errors: list[Any] = []
    loop.set_exception_handler(lambda loop, ctx: errors.append(ctx))
    try:
        result = loop.run_until_complete(coro)
        loop.run_until_complete(asyncio.sleep(0))
    finally:
        loop.close()
    assert not errors, errors
    return result


async def settle(conn: Connection, rounds: int = 2000) -> None:
    """Let every scheduled delivery and handler run."""
    for _ in range(rounds):
        await asyncio.sleep(0)
        if not conn._serving:
            break
    for _ in range(10):
        await asyncio.sleep(0)


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts}) + [len(data)]
    out, prev = [], 0
    for p in points:
        if p > prev:
            out.append(data[prev:p])
        prev = p
    return out


def check_answers(items, max_line: int, crlf: bool, written: bytes, outgoing: int) -> None:
    """The requests that fit the limit (a "\r" before the newline counts) are answered."""
    requests = [m for kind, m in items if kind == "request" and len(encode(kind, m)) + crlf <= max_line]
    answers: list[dict] = []
    sent_requests = 0
    for line in written.splitlines():
        msg = json.loads(line)  # everything we write is valid JSON, one message per line
        assert isinstance(msg, dict) and msg.get("jsonrpc") == "2.0", msg
        if "method" in msg:
            sent_requests += 1
            continue
        assert ("result" in msg) != ("error" in msg), msg
        if "error" in msg:
            err = msg["error"]
            assert type(err["code"]) is int and isinstance(err["message"], str) and err["message"], msg
        answers.append(msg)
    assert sent_requests == outgoing
    assert Counter(key(a["id"]) for a in answers) == Counter(key(r["id"]) for r in requests)
    # Meaning, where an id is unambiguous (sent once, answered once).
    once = Counter(key(r["id"]) for r in requests)
    by_id = {key(a["id"]): a for a in answers}
    cancelled_ids = {key(m["params"]["requestId"]) for kind, m in items if kind == "notification"
                     and m["method"] == "$/cancel_request" and isinstance(m["params"], dict)
                     and "requestId" in m["params"]}
    for r in requests:
        k = key(r["id"])
        if once[k] != 1:
            continue
        a = by_id[k]
        code = a.get("error", {}).get("code")
        method = r["method"]
        if code == -32800:
            assert k in cancelled_ids and method in ("yield", "block", "echo", "fail", "crash", "invalid", "bad_result")
            continue
        if method == "echo":
            assert a.get("result", "missing") == r.get("params"), (r, a)
        elif method == "block":
            assert a.get("result") == "released", (r, a)
        elif method == "fail":
            assert code == -32002 and a["error"]["message"] == "not found here"
        elif method in ("crash", "bad_result"):
            assert code == -32603, (r, a)
        elif method == "invalid":
            assert code == -32602 or "result" in a, (r, a)
        elif method not in ("yield",):
            assert code == -32601 and method in a["error"]["message"], (r, a)


def run_case(items, cuts, max_line, crlf, outgoing) -> None:
    async def main():
        a, b = memory_pair()
        conn = Connection(a, name="fuzz", max_line=max_line)
        h = Harness(conn)
        written = bytearray()
        b.attach(written.extend, lambda: None)
        # Our own requests in flight: the stream's responses may (not) answer them.
        futures = [conn.send_request("ping", {"n": i})[1] for i in range(outgoing)]
        eol = b"\r\n" if crlf else b"\n"
        stream = b"".join(encode(kind, m) + eol for kind, m in items)
        for piece in split(stream, cuts):
            b.write(piece)
        for _ in range(30):  # every piece delivered, every quick handler done
            await asyncio.sleep(0)
        h.release.set()
        await settle(conn)
        assert not conn._serving, conn._serving
        data = bytes(written)
        await conn.close()
        await settle(conn, 5)
        for fut in futures:  # settled exactly once: by a response, or by the close
            assert fut.done()
            exc = fut.exception()
            assert exc is None or isinstance(exc, (RpcError, ConnectionClosed)), exc
        kinds = {kind for kind, _ in h.reports}
        assert kinds <= {"noise", "oversized", "stray-response", "handler-error"}, kinds
        return data

    check_answers(items, max_line, crlf, run(main()), outgoing)


@pytest.mark.slow
@settings(max_examples=DISPATCH_EXAMPLES, **SETTINGS)
@given(items=st.lists(item, max_size=25), cuts=st.lists(st.integers(0, 10_000), max_size=12),
       max_line=st.sampled_from([40, 120, 400, 1 << 20]), crlf=st.booleans(), outgoing=st.integers(0, 3))
def test_dispatch_fuzz_every_request_answered_exactly_once(items, cuts, max_line, crlf, outgoing):
    run_case(items, cuts, max_line, crlf, outgoing)


def _random_json(rng: random.Random, depth: int = 0) -> Any:
    r = rng.random()
    if depth < 2 and r < 0.15:
        return [_random_json(rng, depth + 1) for _ in range(rng.randrange(4))]
    if depth < 2 and r < 0.3:
        return {rng.choice(["a", "b", "path", "_meta", "id", ""]): _random_json(rng, depth + 1) for _ in range(rng.randrange(4))}
    return rng.choice([None, True, False, 0, -1, 2**53 + 1, 1.5, "", "x", "ü\u2028", "\\n", rng.randrange(-9, 99)])


def _random_item(rng: random.Random) -> tuple[str, Any]:
    r = rng.random()
    rid = rng.choice([rng.randrange(-2, 30), str(rng.randrange(5)), str(uuid.UUID(int=rng.getrandbits(128))), None])
    if r < 0.45:
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": rng.choice(METHODS + ["x/y", "ü"])}
        if rng.random() < 0.7:
            msg["params"] = _random_json(rng)
        return ("request", msg)
    if r < 0.65:
        method = rng.choice(["note", "note_crash", "$/cancel_request", "zzz"])
        params = {"requestId": rid} if method == "$/cancel_request" else _random_json(rng)
        return ("notification", {"jsonrpc": "2.0", "method": method, "params": params})
    if r < 0.8:
        body = {"result": _random_json(rng)} if rng.random() < 0.5 else {"error": rng.choice(
            [{"code": -32000, "message": "m"}, "str", None, {"code": "x"}])}
        return ("response", {"jsonrpc": "2.0", "id": rng.choice([rng.randrange(-1, 6), "1", None]), **body})
    junk = rng.choice([
        bytes(rng.randrange(256) for _ in range(rng.randrange(40))).replace(b"{", b"("),
        json.dumps(_random_json(rng)).encode().replace(b"{", b"["),
        b'{"jsonrpc":"2.0","id":true,"method":"echo"}', b'{"id":1.5,"method":"echo"}',
        b'{"jsonrpc":"2.0","id":3,"method":"echo","params":"\xc3\x28"}', b'{"jsonrpc":"2.0","id":3,"meth',
        b"", b"   ", b"\x1b[0m",
    ])
    return ("junk", junk)


@pytest.mark.slow
def test_dispatch_soak_with_seeded_random_streams():
    """Thousands more cases, cheaply generated (seeded, reproducible)."""
    for seed in range(4000):
        rng = random.Random(seed)
        items = [_random_item(rng) for _ in range(rng.randrange(30))]
        cuts = [rng.randrange(4000) for _ in range(rng.randrange(15))]
        args = (items, cuts, rng.choice([50, 150, 1 << 20]), rng.random() < 0.3, rng.randrange(3))
        try:
            run_case(*args)
        except AssertionError as exc:
            raise AssertionError(f"seed {seed}: {args!r}") from exc


@pytest.mark.slow
@settings(max_examples=300, **SETTINGS)
@given(ops=st.lists(st.tuples(st.sampled_from("AB"), st.sampled_from(["echo", "fail", "block", "nope", "note", "cancel"]),
                              json_value), max_size=30))
def test_two_peers_with_the_same_ids_in_flight_both_ways(ops):
    """Two Connections talk over memory_pair: ids count from 0 on both sides, so
    the same id is in flight both ways; every request settles once, correctly."""

    async def main():
        ta, tb = memory_pair()
        peers = {"A": Connection(ta, name="A"), "B": Connection(tb, name="B")}
        harnesses = {n: Harness(c) for n, c in peers.items()}
        pending: list[tuple[str, str, Any, asyncio.Task]] = []
        for side, op, params in ops:
            conn = peers[side]
            if op == "note":
                conn.notify("note", params)
            elif op == "cancel":
                live = [t for s, _, _, t in pending if s == side and not t.done()]
                if live:
                    live[0].cancel()
            else:
                task = asyncio.ensure_future(conn.request(op, params))
                pending.append((side, op, params, task))
            if len(pending) % 3 == 0:
                await asyncio.sleep(0)
        for _ in range(50):
            await asyncio.sleep(0)
        for h in harnesses.values():
            h.release.set()
        results = await asyncio.gather(*(t for *_, t in pending), return_exceptions=True)
        for (_side, op, params, _task), res in zip(pending, results):
            if isinstance(res, asyncio.CancelledError):
                continue
            if op == "echo":
                assert res == params
            elif op == "block":
                assert res == "released"
            elif op == "fail":
                assert isinstance(res, RpcError) and res.code == -32002
            else:
                assert isinstance(res, RpcError) and res.code == -32601
        for side, h in harnesses.items():
            other = "B" if side == "A" else "A"
            assert h.notes == [p for s, o, p in ops if s == other and o == "note"]
            # a cancelled request may be answered just after its cancel: reported as stray, nothing else
            assert {k for k, _ in h.reports} <= {"stray-response"}, h.reports
        for conn in peers.values():
            await conn.close()
        await asyncio.sleep(0)

    run(main())


def test_a_handler_returning_something_unencodable_still_answers():
    async def main():
        a, b = memory_pair()
        conn = Connection(a, name="x")
        Harness(conn)
        written = bytearray()
        b.attach(written.extend, lambda: None)
        b.write(b'{"jsonrpc":"2.0","id":1,"method":"bad_result"}\n')
        await settle(conn)
        await conn.close()
        return bytes(written)

    msg = json.loads(run(main()))
    assert msg["id"] == 1 and msg["error"]["code"] == -32603
