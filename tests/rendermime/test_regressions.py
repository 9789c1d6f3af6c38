"""Fixed hostile inputs, judged by JupyterLab's own renderers: the known attacks stay dead.

Each input goes through every template (the answer as markdown, a title and
a path in a code span, text in a block; see ``outputs.py``) and every text
mime of the bundle; nothing may be live or typeset, and the payload must
still be there as text.
"""

from __future__ import annotations

import pytest

from .generator import RUN
from .oracle import describe
from .outputs import items_for

#: One worker runs this folder (one JupyterLab and Chromium); a first test also waits for them to start.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("rendermime"), pytest.mark.timeout(600)]

#: input -> text that must be visible in every rendering of it (after
#: markdown has done its part: a backslash escape shows its character).
CASES = {
    # JupyterLab's math pass ends the code span at the backtick after "\\(".
    f"Try `<img src=x onerror={RUN}>\\\\(` then \\\\)": ["onerror=", "then"],
    f"Try `<img src=x onerror={RUN}>\\(` then \\)": ["onerror=", "then"],
    # A fence in a block quote whose blank lines are ">" lines.
    f"> ```\n> <img src=x onerror={RUN}>\n>\n> $x$\n>\n> ```": ["onerror=", "$x$"],
    f"> ```\n> a\n>\n> <img src=x onerror={RUN}>\n> ```\n>\n> `$y$`": ["onerror=", "$y$"],
    "$x$": ["$x$"],
    "$$x$$ and $$\n\\begin{align}a\\end{align}\n$$": ["$$x$$", "begin{align}"],
    "\\style{background-color:red}{x}": ["style{background-color:red}{x}"],
    "$\\style{background-color:red}{x}$": ["style{background-color:red}"],
    "\\$5 and \\$6": ["$5 and ", "$6"],
    "costs $5 and $6": ["$5 and $6"],
    "the file `/tmp/a\nb.py` and `/tmp/$HOME\\n`": ["/tmp/a", "b.py", "$HOME"],
    f"<img src=x onerror={RUN}>": ["onerror="],
    f"<svg onload={RUN}><circle r=5 /></svg>": ["onload="],
    f"<script>{RUN}</script>": ["<script>"],
    f"<a href=\"javascript:{RUN}\">a</a>": ["javascript:"],
    f"[click](javascript:{RUN})": ["click"],
    f"\\\\( <img src=x onerror={RUN}> \\\\)": ["onerror="],
    "@@0@@ and @@1@@ $a$": ["@@0@@", "$a$"],
    f"```\"><img src=x onerror={RUN}>\ncode\n```": ["code"],
    f"| a | b |\n| - | - |\n| `$x$` | <img src=x onerror={RUN}> |": ["$x$", "onerror="],
    "&#x3C;img src=x onerror=alert(1)&#x3E; &lt;b&gt;": ["onerror=alert(1)"],
    # marked's GFM autolink takes the backtick that opens a code span: its text is raw HTML.
    f"see www.example.com`<img src=x onerror={RUN}>` here": ["onerror=", "here"],
    f"see http://b`<img src=x onerror={RUN}>` here": ["onerror=", "here"],
    # A <...> link destination after a hard break in a list item is no link to marked.
    f"- ?\n\\\n[](svg/onload={RUN})": ["?"],
    # Issue 25's linked-prose fast path (no parse): safe links kept, every "<" a reference.
    f"See [the docs](https://example.com/a_b#s), it is <b>bold</b> <img src={RUN}> and costs $5":
        ["the docs", "<b>bold</b>", "<img src=", "costs $5"],
    f"a <b\n>quoted</b> [x <img src=x onerror={RUN}>](https://ok.example/) /tmp/a\nb.py":
        ["quoted</b>", "x <img src=x onerror=", "/tmp/a b.py"],
    # Code after a list marker's spaces: a reference there would show as written.
    f"1.     a<img src=x onerror={RUN}> $x$": ["a<img src=x onerror=", "$x$"],
    # JupyterLab's plain-text renderer links any scheme://... and data:...
    f"see javascript://%0A{RUN} and data:text/html,x and http://a.b/": ["javascript:", "data:text/html"],
}


@pytest.mark.parametrize("text", list(CASES), ids=range(len(CASES)))
def test_known_attack_stays_dead(oracle, safe_module, text: str) -> None:
    items = items_for(safe_module, text)
    verdicts = oracle.judge(items)
    live = [describe(v) for v in verdicts if v.findings]
    assert not live, f"input {text!r}:\n" + "\n".join(live)
    answers = [v for v in verdicts if v.item.label == "answer" and v.item.mime != "text/plain"]
    assert answers
    for v in answers:
        shown = " ".join(v.text.split())
        for needle in CASES[text]:
            assert " ".join(needle.split()) in shown, f"{needle!r} not shown for {text!r} ({v.item}): {v.text!r}"


@pytest.mark.parametrize("text", list(CASES), ids=range(len(CASES)))
def test_a_kernel_error_carrying_agent_text_stays_dead(oracle, text: str) -> None:
    """A failing cell's error output (``frontends.kernel.error_content``) as JupyterLab
    draws it: its output model turns an error into ``application/vnd.jupyter.stderr``, the
    traceback lines joined, and the stderr renderer shows ANSI text and makes links."""
    from acp_kernel.frontends.kernel import error_content

    from .oracle import Item

    content = error_content("AgentError", f"the agent said: {text}\nand then {text}", note="a note")
    item = Item("application/vnd.jupyter.stderr", "\n".join(content["traceback"]), True, "error")
    verdicts = oracle.judge([item])
    assert not [describe(v) for v in verdicts if v.findings], text
    assert "the agent said" in verdicts[0].text


def test_a_message_the_agent_sent_again_reads_once_and_stays_dead(oracle) -> None:
    """Issue 27: a message sent again whole is drawn again from the turn's model (the
    widget's last state and the static output); that output, through JupyterLab's own
    renderers (html trusted and untrusted, markdown), shows the text once and nothing live."""
    from acp_kernel.client.turn import Turn
    from acp_kernel.view import RecordingSink, TurnOutput

    pay = f"<img src=x onerror={RUN}> `a\nb` $x$ and $$y$$ /tmp/a\nb.py"
    turn, sink = Turn("s1"), RecordingSink()
    view = TurnOutput(turn, sink)
    said = [("m1", f"FIRST {pay}"), ("m2", "SECOND"), ("m1", f"FIRST {pay} REPLAYED")]
    for mid, body in said:
        turn.apply_update({"sessionUpdate": "agent_message_chunk", "messageId": mid,
                           "content": {"type": "text", "text": body}})
        view.flush()
    turn.finish("end_turn")
    view.close()
    for mime, shown in _shown_dead(oracle, sink.outputs()[-1]):
        assert shown.count("FIRST") == 1 and "REPLAYED" in shown and "SECOND" in shown, (mime, shown)
        assert "onerror=" in shown and "$x$" in shown, (mime, shown)


def _shown_dead(oracle, data: dict) -> list[tuple[str, str]]:
    """A bundle's html (trusted and untrusted) and markdown through JupyterLab's renderers:
    nothing live in any; (mime, the text each shows, whitespace folded)."""
    from .oracle import Item

    verdicts = oracle.judge([Item("text/html", data["text/html"], True), Item("text/html", data["text/html"], False),
                             Item("text/markdown", data["text/markdown"], True)])
    assert not [describe(v) for v in verdicts if v.findings]
    return [(v.item.mime, " ".join(v.text.split())) for v in verdicts]


def test_a_clis_own_question_shown_in_the_cell_stays_dead(oracle) -> None:
    """Issue 23: a question a CLI asks in its own terminal (kimi's approval box, which
    quotes the agent's tool call) is shown in the typing cell's exchange: through
    JupyterLab's own renderers it reads as text and nothing in it is live."""
    from acp_kernel.view.exchange import Exchange

    asked = f"execute is requesting approval to mcp:execute:\n<img src=x onerror={RUN}> `a\nb` $x$ $$y$$ /tmp/a\nb.py"
    for mime, shown in _shown_dead(oracle, Exchange("kimi", "TOOL:execute", asking=asked).bundle()):
        assert "asks in its own terminal" in shown and "onerror=" in shown and "$x$" in shown, (mime, shown)
