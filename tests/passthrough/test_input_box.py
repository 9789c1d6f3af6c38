"""The input box read off a rendered screen, the prompt's echo, and the pace
that scales the waits (issue 23): pure logic, on screens as pyte renders them."""

from __future__ import annotations

import pytest

from acp_kernel.client.registry import PASSTHROUGH
from acp_kernel.passthrough.input_box import CONFIRM_MIN, InputBox, Pace, echoes, extra, sample
from acp_kernel.passthrough.screen import ScreenModel

from .standins import INPUT_PATTERN

RULE = "─" * 60
HOSTILE = "<img src=x onerror=alert(1)> $x$ \\( \\[ \\begin{x} `a"


def rendered(rows: list[str], size: tuple[int, int] = (12, 60)) -> str:
    """The rows drawn with cursor addressing, as a TUI does, and read back from the emulator."""
    screen = ScreenModel(*size)
    screen.feed("".join(f"\x1b[{y};1H{row}\x1b[K" for y, row in enumerate(rows, start=1)))
    return screen.text()


def test_the_last_box_on_the_screen_and_its_lines():
    box = InputBox(INPUT_PATTERN)
    # the transcript holds an earlier box-like exchange; the box at the bottom counts
    shown = rendered(["> old prompt", RULE, "> earlier", RULE, "reply", RULE, f"> {HOSTILE}", "  b` /tmp/p", "", RULE])
    assert box.text(shown) == f"{HOSTILE}\nb` /tmp/p"
    assert box.raw(shown) == f"{HOSTILE}\n  b` /tmp/p\n"
    assert box.text(rendered(["reply", RULE, "> ", RULE, "? for shortcuts"])) == ""
    assert box.text(rendered(["starting…"])) is None and box.raw(rendered(["starting…"])) is None
    assert "old prompt" in box.outside(shown) and HOSTILE not in box.outside(shown)


def test_a_placeholder_is_an_empty_box():
    box = InputBox(r"(?m)^› (.*)$", placeholder=r"Ask Codex to do anything")
    assert box.text(rendered(["›  Ask Codex   to do anything"])) == ""
    assert box.text(rendered(["› Ask Codex to do anything, please"])) == "Ask Codex to do anything, please"


def test_claude_code_box_as_it_draws_it():
    """Claude Code 2.1.197: `❯ text`, continuation rows indented, between full-width rules."""
    box = InputBox(PASSTHROUGH["claude"].input_pattern)
    rule = "─" * 80
    transcript = ["❯ SLOW first line", "  second line", "", "● stub reply", ""]
    assert box.text(rendered([*transcript, rule, "❯", rule, "  ? for shortcuts"], (14, 80))) == ""
    assert box.text(rendered([*transcript, rule, "❯ x1", "  x2", "", rule], (14, 80))) == "x1\nx2"


@pytest.mark.parametrize("prompt, want", [("  \n  alpha   one\nzzz", "alpha one"), ("x" * 40, "x" * 24), ("", "")])
def test_sample_is_the_start_of_the_first_line(prompt, want):
    assert sample(prompt) == want


def test_echoes_count_lines_showing_the_prompt():
    lines = ["> alpha one", "stand-in reply to: alpha one (1 line)", "> bravo"]
    assert echoes(lines, "alpha one\nsecond") == 2
    assert echoes(lines, HOSTILE) == 0 and echoes([f"> {HOSTILE}"], HOSTILE) == 1
    assert echoes(lines, "") == 0


def test_pace_scales_the_waits_with_the_slowest_echo():
    pace = Pace(idle_seconds=0.4, keep=3)
    assert (pace.quiet(), pace.confirm()) == (0.4, CONFIRM_MIN)
    for seconds in (0.05, 2.0, 0.1):
        pace.observe(seconds)
    assert pace.latency == 2.0 and pace.quiet() == pytest.approx(6.0) and pace.confirm() == pytest.approx(16.0)
    for seconds in (0.1, 0.1, 0.1):  # the machine is idle again: the slow one is forgotten
        pace.observe(seconds)
    assert pace.quiet() == pytest.approx(0.4) and pace.no_reply_quiet() >= 15.0
    pace.observe(-1.0)  # a change that came before the keys: not a measure
    assert pace.latency == pytest.approx(0.1)


@pytest.mark.parametrize("held, want", [
    ("alpha oneualpha one", "alpha oneualpha one"),  # Claude Code 2.1.83 took a Ctrl-U as "u" while starting
    ("left over: alpha one", "left over alpha one"),
    ("alpha one", ""), ("alpha", ""), ("[Pasted text #1 +12 lines]", ""),
    ("delta first ⏎ delta second", ""),  # a line break drawn as a mark
    (f"{HOSTILE}", ""),
])
def test_extra_is_what_the_box_shows_besides_the_prompt(held, want):
    prompt = "delta first\ndelta second" if held.startswith("delta") else HOSTILE if held == HOSTILE else "alpha one"
    assert extra(held, prompt) == want
