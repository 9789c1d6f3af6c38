"""The command table (``commands.VERBS``) and what runs each verb agree.

A verb runs either in a front-end of its own (``help`` everywhere; in the
magics, the verbs of ``Runtime.OWN_VERBS``) or in the controller, through
``verbs.HANDLERS``. Every verb a front-end offers must have one of the two,
and every handler must be a verb some front-end sends to the controller.
"""

from __future__ import annotations

from typing import Any

import pytest

from acp_kernel.client import verbs
from acp_kernel.client.commands import KERNEL, MAGICS, VERBS, UsageError, parse_line
from acp_kernel.client.notebook import NO_ORIGIN, Origin
from acp_kernel.client.controller import Controller
from acp_kernel.client.registry import BUILTIN, Config
from acp_kernel.safe import Markdown
from magics.runtime import Runtime

#: What each front-end runs itself instead of handing it to the controller:
#: the ACP kernel answers ``%help`` in ``AcpKernel._command``; the magics answer
#: ``%acp help`` in ``Runtime._line`` and run ``Runtime.OWN_VERBS``.
OWN = {
    KERNEL: frozenset({"help"}),
    MAGICS: frozenset({"help", *Runtime.OWN_VERBS}),
}


def test_the_magics_own_verbs_are_in_the_table_for_the_magics():
    for name in OWN[MAGICS]:
        assert name in VERBS and MAGICS in VERBS[name].frontends, name


@pytest.mark.parametrize("frontend", [KERNEL, MAGICS])
def test_every_verb_a_frontend_offers_runs_somewhere(frontend):
    for verb in VERBS.values():
        if frontend not in verb.frontends:
            continue
        assert verb.name in OWN[frontend] or verb.name in verbs.HANDLERS, (
            f"{verb.usage(frontend)}: no handler in client/verbs.py and {frontend} does not run it itself")


def test_every_handler_is_a_verb_with_help_that_reaches_the_controller():
    for name in verbs.HANDLERS:
        assert name in VERBS, f"handler {name!r} has no verb in commands.VERBS"
        verb = VERBS[name]
        assert verb.help.strip(), name
        reached = [f for f in verb.frontends if name not in OWN[f]]
        assert reached, f"{name}: every front-end of the verb runs it itself; the handler is never used"
        for f in reached:
            assert verb.usage(f).split()[0] in ("%acp", "%" + name), verb.usage(f)


# -- dispatch: through the table, not by attribute name ----------------------------------


class _Sink:
    def __init__(self) -> None:
        self.shown: list[dict[str, Any]] = []

    def display(self, data: dict, metadata: dict | None = None, display_id: str | None = None) -> None:
        self.shown.append(data)

    def update(self, data: dict, metadata: dict | None = None, display_id: str = "") -> None:
        pass


class _Shows:
    widgets = False
    updates = False
    ask = "none"


class _Frontend:
    kind = KERNEL

    def __init__(self) -> None:
        self.out = _Sink()

    def sink(self) -> _Sink:
        return self.out

    def frontend(self) -> _Shows:
        return _Shows()

    def interactive(self) -> bool:
        return False

    def widgets(self) -> bool:
        return False

    def notebook_side(self) -> None:
        return None

    def origin(self) -> Origin:
        return NO_ORIGIN

    def next_input(self, text: str) -> bool:
        return False

    def asker(self) -> None:
        return None


class _Parts:
    def message(self, md: Markdown, plain_text: Any = None) -> dict[str, Any]:
        return {"text/markdown": str(md), "text/plain": str(plain_text or md)}


def _controller() -> tuple[Controller, _Frontend]:
    fe = _Frontend()
    c = Controller(fe, parts=_Parts(), config=Config(agents=dict(BUILTIN)), cwd=".")  # type: ignore[arg-type]
    return c, fe


async def test_a_verb_runs_its_handler_from_the_table():
    c, fe = _controller()
    await c.run(parse_line('set answer 42', KERNEL))
    assert c.values == {"answer": 42}
    assert "answer" in fe.out.shown[-1]["text/markdown"]


async def test_a_verb_without_a_handler_is_a_usage_error_not_an_attribute_lookup():
    c, _ = _controller()
    with pytest.raises(UsageError, match="help: not available here"):
        await c.run(parse_line("help", KERNEL))
    assert not hasattr(c, "verb_set"), "verbs live in client/verbs.py, not as Controller methods"


async def test_status_lines_come_from_the_parts():
    c, fe = _controller()
    await c.run(parse_line("status", KERNEL))
    text = fe.out.shown[-1]["text/markdown"]
    assert "- not running (starts with the next prompt)" in text
    assert "- permissions: " in text


def test_status_says_whether_the_agent_started_the_notebook_server_and_why_not():
    from types import SimpleNamespace

    from acp_kernel.client.host import ClientSettings
    from acp_kernel.client.output import status_lines

    def lines(started: bool, note: str) -> str:
        life = SimpleNamespace(
            spec=SimpleNamespace(command=("gemini", "--acp"), mcp_note=note),
            client=SimpleNamespace(alive=True, agent_info={"name": "gemini"}, transport=None), session=None,
            settings=ClientSettings(), notebook_tools=lambda: frozenset({"execute", "cells"}),
            notebook_started=lambda: started, notebook_mcp=True, cwd="/w")
        return "\n".join(str(m) for m in status_lines(life, Markdown("gemini"), None))  # type: ignore[arg-type]

    assert "- notebook MCP server: execute, cells (the agent started it)" in lines(True, "trust <b>it</b>")
    waiting = lines(False, "trust <b>it</b> `a\nb`")
    assert "execute, cells offered; the agent has not started it (yet): trust" in waiting
    assert "<b>" not in waiting  # the note is text
    assert BUILTIN["gemini"].mcp_note and "trustedFolders.json" in BUILTIN["gemini"].mcp_note
