"""``%%shell seq 1 200000`` through real kernels: a bounded window on the page
(first and last 500 lines, coalesced stream messages), the cut notice between
them with exact counts and the file holding the whole output; a console gets
the notice in the stream; the magics' result keeps it all."""

from __future__ import annotations

import os
import re

from acp_kernel.frontends.shellview import notice, status_line
from acp_kernel.safe import Plain, bundle, plain
from acp_kernel.services.output_window import OutputWindow
from tests.magics.conftest import start, stop

SEQ = "".join(f"{i}\n" for i in range(1, 200_001))
HEAD = "".join(f"{i}\n" for i in range(1, 501))
TAIL = "".join(f"{i}\n" for i in range(199_501, 200_001))
NOTICE = re.compile(r"\[… 199,000 lines \(1\.3 MB\) not shown; all of it in (\S+); the last 500 follow …\]")


def _streams(res) -> list[str]:
    return [m["content"]["text"] for m in res.outputs if m["msg_type"] == "stream"]


def _saved(text: str) -> str:
    m = NOTICE.search(text)
    assert m, text[:2000]
    with open(m.group(1)) as f:
        assert f.read() == SEQ
    return m.group(1)


async def test_a_flood_in_the_acp_kernel_shows_head_notice_tail(acp_sh_kernel):
    res = await acp_sh_kernel.ok("%%shell\nseq 1 200000", timeout=60)
    streams = _streams(res)
    assert "".join(streams) == HEAD + TAIL
    assert len(streams) <= 12  # coalesced: not one message per pipe read
    kinds = [m["msg_type"] for m in res.outputs]
    # head (stream), the status display, then the tail (stream) after it
    first_display = kinds.index("display_data")
    assert "".join(streams[: kinds[:first_display].count("stream")]) == HEAD
    displays = [m for m in res.outputs if m["msg_type"] in ("display_data", "update_display_data")]
    ids = {m["content"]["transient"]["display_id"] for m in displays}
    assert len(ids) == 1 and len(displays) <= 40
    final = displays[-1]["content"]["data"]["text/plain"]
    _saved(final)
    assert kinds.index("update_display_data") < len(kinds) - 1 - kinds[::-1].index("stream")  # notice before tail


async def test_a_flood_in_a_console_gets_the_notice_in_the_stream(kernel_env, tmp_path):
    k = await start("acp", dict(kernel_env, SHELL="/bin/sh"), str(tmp_path / "work"), notebook=False)
    try:
        res = await k.ok("%%shell\nseq 1 200000", timeout=60)
        assert not [m for m in res.outputs if m["msg_type"] in ("display_data", "update_display_data")]
        text = "".join(_streams(res))
        head, rest = text.split("[…", 1)
        assert head == HEAD
        saved = _saved("[…" + rest)
        assert rest.endswith("…]\n" + TAIL)
    finally:
        await stop(k)
    assert not os.path.exists(saved)  # the kernel's saved outputs go with it


async def test_the_magic_keeps_the_whole_output_and_colours(magics):
    res = await magics.ok("%%shell\nseq 1 200000", timeout=60)
    assert "".join(_streams(res)) == HEAD + TAIL
    final = [m for m in res.outputs if m["msg_type"] in ("display_data", "update_display_data")][-1]
    saved = _saved(final["content"]["data"]["text/plain"])
    got = await magics.value(f"_.full_output() == ''.join(f'{{i}}\\n' for i in range(1, 200001)), _.saved == {saved!r}, "
                             "_.total_lines, _.truncated")
    assert got == "(True, True, 200000, True)"
    # A small coloured output passes through as it is (the notebook renders the colours).
    res = await magics.ok("%%shell\nprintf '\\033[31mred\\033[0m\\n'")
    assert "".join(_streams(res)) == "\x1b[31mred\x1b[0m\n"
    assert await magics.value("_.saved") == "None"


async def test_an_unfinished_line_shows_while_the_program_waits(acp_sh_kernel):
    res = await acp_sh_kernel.ok("%%shell\nprintf 'Name: '; sleep 2; echo done", timeout=30)
    assert _streams(res) == ["Name: ", "done\n"]


def test_status_and_notice_are_plain_text_without_escapes():
    """The last line of the output (in the live status) and the saved path are
    shown as text: raw HTML stays text, escape sequences go, a newline in a
    path does not break the notice's line."""
    w = OutputWindow(1, 1, 100, 100)
    w.feed("a\n`code\nspan` \x1b[31m<img src=x onerror=alert(1)>\x1b]8;;http://x\x07\nmore")
    data = bundle(plain_text=plain(status_line(w)))
    shown = data["text/plain"]
    assert isinstance(shown, Plain) and "\x1b" not in shown and "<img src=x onerror=alert(1)>" in shown
    _, cut = w.finish()
    line = notice(cut, "/tmp/dir\nwith newline/output-1.txt")
    assert "\n" not in line and "with newline/output-1.txt" in line
    assert "2 lines (" in line and "the last 1 follow" in line
