"""``%%shell`` is one path (``shellcell.shell_cell``): the ACP kernel and the
magics in an IPython kernel show the same thing for the same cell, both as a
notebook sees them: the streamed output, the line that says how it ended
(exit 0: none; ``[exit code 3]``; ``[killed by SIGTERM]``), and the live status
display that becomes the cut notice. Hostile text on the command line: raw
HTML, math delimiters, a newline inside an argument, in the body and in --env."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from acp_kernel.frontends.shellcell import live_status
from acp_kernel.view.frontend import HEADLESS, NOTEBOOK, TERMINAL
from tests.magics.conftest import start, stop

HOSTILE = "'<img src=x onerror=alert(1)>' '$x$' '\\(a\\)' '\\[b\\]' '\\begin{x}' \"a\nb\" '`code\nspan`'"
HOSTILE_OUT = "<img src=x onerror=alert(1)>\n$x$\n\\(a\\)\n\\[b\\]\n\\begin{x}\na\nb\n`code\nspan`\n"

PRINTF = f"printf '%s\\n' {HOSTILE}"
ARGV = json.dumps({"command": "/bin/sh", "args": ["-c", PRINTF]}) + "\n"

#: (cell, the stdout a notebook gets, stderr, the final text of each status display)
CASES = [
    pytest.param(f"%%shell --show-argv\n{PRINTF}", ARGV + HOSTILE_OUT, "", [], id="exit-0"),
    pytest.param("%%shell --env 'H=<b>$x$</b> $$y$$ \\(z\\)'\nprintf '%s\\n' \"$H\"; exit 3",
                 "<b>$x$</b> $$y$$ \\(z\\)\n[exit code 3]\n", "", [], id="exit-3"),
    pytest.param("%%shell\necho '<i>before</i> $x$'; kill -TERM $$; echo never",
                 "<i>before</i> $x$\n[killed by SIGTERM]\n", "", [], id="signal"),
    pytest.param(f"%%shell --head 2 --tail 1 --raise\n{PRINTF}; exit 3",
                 "<img src=x onerror=alert(1)>\n$x$\nspan`\n[exit code 3]\n",
                 "shell command failed: exit code 3",
                 ["[… 6 lines (32 bytes) not shown; all of it in <saved>; the last 1 follow …]"], id="cut-raise"),
]


def _saved(text: str) -> str:
    """The saved file's path differs per process (and is checked by test_shell_flood)."""
    return re.sub(r"/\S*/output-\d+-\d+\.txt", "<saved>", text)


def _shown(res: Any) -> tuple[str, str, list[dict]]:
    """stdout, the stderr line of an error (IPython adds a traceback around it), and
    the last data of each display (the status line, updated in place, then the notice)."""
    out = "".join(m["content"]["text"] for m in res.outputs
                  if m["msg_type"] == "stream" and m["content"]["name"] == "stdout")
    err = "".join(m["content"]["text"] for m in res.outputs
                  if m["msg_type"] == "stream" and m["content"]["name"] == "stderr")
    if res.status == "error":
        err += res.reply["content"]["evalue"]
    last: dict[str, dict] = {}
    for m in res.outputs:
        if m["msg_type"] in ("display_data", "update_display_data"):
            last[m["content"]["transient"]["display_id"]] = {k: _saved(v) for k, v in m["content"]["data"].items()}
    return _saved(out), err, list(last.values())


def test_the_live_status_rule():
    assert live_status(NOTEBOOK) and live_status(HEADLESS) and not live_status(TERMINAL)


@pytest.fixture
async def both(kernel_env, tmp_path, request):
    """The ACP kernel and an IPython kernel with the magics, as notebooks (as consoles
    when parametrized with False), the user's shell /bin/sh."""
    env = dict(kernel_env, SHELL="/bin/sh")
    notebook = getattr(request, "param", True)
    acp = await start("acp", env, str(tmp_path / "work"), notebook=notebook)
    try:
        ipy = await start("python3", env, str(tmp_path / "work"), notebook=notebook)
        try:
            await ipy.ok("%load_ext acp_kernel")
            yield acp, ipy
        finally:
            await stop(ipy)
    finally:
        await stop(acp)


@pytest.mark.parametrize("cell, stdout, stderr, notices", CASES)
async def test_the_kernel_and_the_magics_show_a_command_alike(both, cell, stdout, stderr, notices):
    acp, ipy = both
    in_kernel, in_magics = await acp.execute(cell, timeout=60), await ipy.execute(cell, timeout=60)
    assert in_kernel.status == in_magics.status == ("error" if stderr else "ok")
    k_out, k_err, k_displays = _shown(in_kernel)
    m_out, m_err, m_displays = _shown(in_magics)
    assert k_out == m_out == stdout
    assert stderr in k_err and stderr in m_err
    assert k_displays == m_displays
    assert [d["text/plain"] for d in k_displays] == notices
    for data in k_displays:  # the notice is text: nothing in it is markup to a renderer
        assert "<img" not in data.get("text/html", "")


@pytest.mark.parametrize("both", [False], indirect=True, ids=["console"])
async def test_a_console_gets_the_same_notice_in_the_stream(both):
    acp, ipy = both
    cell = f"%%shell --head 2 --tail 1\n{PRINTF}; exit 3"
    shown = [_shown(await h.execute(cell, timeout=60)) for h in (acp, ipy)]
    assert shown[0] == shown[1]
    out, err, displays = shown[0]
    assert displays == [] and err == ""  # append-only: no status display to update
    assert out == ("<img src=x onerror=alert(1)>\n$x$\n"
                           "[… 6 lines (32 bytes) not shown; all of it in <saved>; the last 1 follow …]\n"
                           "span`\n[exit code 3]\n")
