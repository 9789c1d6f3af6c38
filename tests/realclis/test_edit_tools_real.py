"""A real agent changes the live notebook through proposals (issue 26), in JupyterLab in Chromium.

The ACP kernel's agent is a real ACP agent (the Claude Agent ACP adapter first: what users run;
then every other installed one) pointed at the stub model (stub_model_server.py, clis.py
profiles). A notebook of three cells (a prompt cell, ``x = 1``, ``y = 2``) is open in a real
JupyterLab page; each prompt is a chain of ``TOOL:`` markers the stub turns into tool calls, one
after the other, so the agent learns the cells' ids the real way: it calls ``cells`` first, and
the stub takes ``{{cell N}}`` from that result (``## Cell N: code, id "..."``):

1. ``cells``, then ``insert_cell`` below cell 2 (``x = 1``) with a hostile source (raw HTML, a
   code span across a line break, ``$x$`` and ``\\(y\\)``, a path with a newline): the page shows
   the box with the source as text (no ``img``), the test accepts, the cell is in the notebook;
2. ``cells``, then ``edit_cell`` of cell 2: the test rejects it with "keep x small", which the
   model gets back in the tool result; ``x = 1`` stays;
3. ``cells``, then ``delete_cell`` of cell 4 (``y = 2``, below the inserted one): accepted, gone.

Asserted: what the user sees (the boxes, the source as text, no ``img``, no dialog), what the
notebook holds (``window.jupyterapp``'s model), what the model got (the stub's log: each call's
name and arguments, each tool result whole), and that no server or agent process is left.
The agents that ask for their own MCP tool calls (Gemini, Codex, Kimi) get "Allow once" in the
page as each question appears.

Run on request: ``ACP_REALCLIS=1 python -m pytest -m realcli tests/realclis/test_edit_tools_real.py``
(the CLIs from tests/realclis/install.sh, chromium + playwright from scripts/install-browser-deps.sh).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from clis import PROFILES, ROOT, Setup, prepare  # noqa: E402
from notebook_mcp_real import (ACP_AGENTS, environ_of, log_entries, notebook_tools, servers_under,  # noqa: E402
                               tool_of)
from run_matrix import alive, cmdline, under  # noqa: E402
from stub_model_server import WAIT_TOOL, StubServer  # noqa: E402

from tests.browser.conftest import (ARTIFACTS, CHROMIUM, CHROMIUM_ARGS, START, TURN, WAIT, LabPage, Notebook,  # noqa: E402
                                    _open_notebook, _serve, skip_unless_browser)

skip_unless_browser()

from playwright.sync_api import expect  # noqa: E402

pytestmark = [pytest.mark.realcli, pytest.mark.timeout(int(8 * TURN / 1000))]

#: Raw HTML, a code span across a line break, math delimiters, a path with a newline.
HOSTILE = "<img src=x onerror=alert(1)> `a\nb` $x$ \\(y\\)\nopen('/tmp/a\nb.py')"
WORDS = "keep x small"
#: The document comm is open (the page's extension serves the live notebook).
OPEN = "data-acp-kernel-document"
END_TURN = re.compile(r"^Done\b")
#: The agents in the order they are tried: claude-agent-acp first (what users run).
ORDER = ["claude-agent-acp"] + sorted(n for n in ACP_AGENTS if n != "claude-agent-acp")


def _marker(tool: str, args: dict[str, Any]) -> str:
    return f"TOOL:{tool} {json.dumps(args)}"


INSERT = "TOOL:cells {}\n" + _marker("insert_cell", {"after": "{{cell 2}}", "source": HOSTILE})
EDIT = "TOOL:cells {}\n" + _marker("edit_cell", {"cell_id": "{{cell 2}}", "source": "x = 10"})
DELETE = "TOOL:cells {}\n" + _marker("delete_cell", {"cell_id": "{{cell 4}}"})


# -- JupyterLab and Chromium, for this module ------------------------------------------


@pytest.fixture(scope="module")
def lab(tmp_path_factory) -> Any:
    """JupyterLab on 127.0.0.1 (tests/browser/conftest.py's server); each test writes the kernel's
    config file (``ACP_KERNEL_CONFIG`` of the server's environment) before its kernel starts."""
    yield from _serve(tmp_path_factory.mktemp("lab"), "jupyterlab", [
        "--LabApp.news_url=",
        "--LabServerApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        "--LabApp.expose_app_in_browser=True",
    ])


@pytest.fixture(scope="module")
def lab_page(lab, tmp_path_factory) -> Any:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")), executable_path=CHROMIUM, headless=True,
            args=CHROMIUM_ARGS, viewport={"width": 1280, "height": 900})
        context.set_default_timeout(WAIT)
        context.set_default_navigation_timeout(START)
        expect.set_options(timeout=WAIT)
        shared = LabPage(lab, context)
        try:
            yield shared
        finally:
            shared.discard()
            context.close()


@pytest.fixture(scope="module", autouse=True)
def _artifacts_dir() -> None:
    ARTIFACTS.mkdir(exist_ok=True)  # screenshots and page consoles, beside the browser tests'


@pytest.fixture(autouse=True)
def no_process_left_behind():
    """The repository-wide check counts the browser's own processes (they come and go): here
    the check is on what the kernel and the agent started (``agent`` and ``nb3`` below)."""
    yield


# -- one agent ---------------------------------------------------------------------------


class Agent:
    """One agent's run: its stub, HOME and log."""

    def __init__(self, name: str, work: Path, stub: StubServer) -> None:
        self.name, self.work, self.stub = name, work, stub
        self.home = work / "home"
        self.log = work / "stub.jsonl"
        self.servers: set[int] = set()

    def entries(self) -> list[dict[str, Any]]:
        return log_entries(self.log)

    def calls(self) -> list[dict[str, Any]]:
        """The stub's calls but Claude Code's waits for its MCP servers: name (a Responses
        namespace joined with a dot) and arguments."""
        return [{"name": ".".join(filter(None, (e["call"].get("namespace"), e["call"]["name"]))),
                 "args": e["call"]["args"]} for e in self.entries() if "call" in e and e["call"]["name"] != WAIT_TOOL]

    def results(self) -> list[str]:
        """Each tool result the model got back, whole (the waits' ``ready:`` answers left out)."""
        return [e["result"] for e in self.entries() if "result" in e and not e["result"].lstrip().startswith("ready:")]

    def left(self) -> list[str]:
        """Processes of this run still alive: named after its HOME, or with it as HOME (a CLI's
        daemon leaves the kernel's tree), and the notebook servers it started."""
        mine = under(self.home) | {p for p in self.servers if alive(p)}
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit() and environ_of(int(entry.name)).get("HOME") == str(self.home):
                mine.add(int(entry.name))
        return [f"{p}: {cmdline(p)[:200]}" for p in sorted(mine) if alive(p)]


@contextlib.contextmanager
def _run(lab: Any, work: Path, name: str, profile: str, config: Callable[[Setup], dict[str, Any]]) -> Iterator[Agent]:
    """A stub of its own, the CLI's clis.py profile pointed at it (cwd: the notebooks' root, the
    kernel's), and the kernel's config file (``ACP_KERNEL_CONFIG`` of the Jupyter server) from
    ``config(setup)``. Afterwards nothing of the run may be left running (what is, is reported,
    then killed: ours)."""
    work.mkdir()
    stub = StubServer(0, work / "stub.jsonl", log_bodies=bool(os.environ.get("REALCLI_LOG_BODIES"))).start()
    run = Agent(name, work, stub)
    try:
        setup = prepare(profile, stub.url, run.home, lab.root)
        (lab.root.parent / "acp_kernel.json").write_text(json.dumps(config(setup)), encoding="utf-8")
        yield run
    finally:
        stub.stop()
    deadline = time.monotonic() + WAIT / 1000
    while run.left() and time.monotonic() < deadline:  # processes ending: a limit, then the verdict
        time.sleep(0.1)
    left = run.left()
    for line in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(line.split(":", 1)[0]), signal.SIGKILL)
    assert not left, f"{name}: processes left after the kernel shut down:\n" + "\n".join(left)


@pytest.fixture(params=ORDER)
def agent(request, lab, tmp_path) -> Any:
    """This agent (ACP, its clis.py profile) as the ACP kernel's default agent under ``ask``."""
    name = request.param
    spec = ACP_AGENTS[name]
    if not spec.installed():
        pytest.skip(f"{name}: {spec.package} is not installed under {ROOT} (run: bash tests/realclis/install.sh)")
    with _run(lab, tmp_path / name, name, spec.profile, lambda setup: {
            "default_agent": name, "permissions": "ask",
            "agents": {name: {"title": name, "command": spec.argv(), "env": {**setup.env, **dict(spec.env)}}}}) as run:
        yield run


@pytest.fixture
def claude_cli(lab, tmp_path) -> Any:
    """Claude Code for ``%passthrough claude`` (the registry's ``--mcp-config`` and
    ``--allowedTools mcp__notebook``, the clis.py profile's files), under ``ask``."""
    profile = PROFILES["claude"]
    if not profile.installed():
        pytest.skip(f"claude: {profile.package} is not installed under {ROOT} (run: bash tests/realclis/install.sh)")
    with _run(lab, tmp_path / "claude", "claude (passthrough)", "claude", lambda setup: {
            "permissions": "ask", "agents": {"claude": {"env": setup.env, "passthrough": {"command": setup.argv}}}}) as run:
        yield run


@pytest.fixture
def nb3(lab, lab_page, request, agent) -> Any:
    """An ACP Agent notebook in the page: a cell for prompts, and two cells of the user's."""
    yield from _open_notebook(lab, lab_page, request, cells=["", "x = 1", "y = 2"])


@pytest.fixture
def nb3_cli(lab, lab_page, request, claude_cli) -> Any:
    """The same, for Claude Code in a passthrough terminal."""
    yield from _open_notebook(lab, lab_page, request, cells=["", "x = 1", "y = 2"])


# -- the page ----------------------------------------------------------------------------


def _status_line(out: Any) -> Any:
    """The turn's status line: the ``<sub>`` of the cell's last markdown output."""
    return out.locator(".jp-OutputArea-output sub").last


def _wait_box(out: Any, box: Any, asked: list[str]) -> None:
    """Wait for the proposal ``box``, answering the agent's own questions about its tool calls
    (a permission form in the turn) with "Allow once" as each appears; ``asked``: their text."""
    allow = out.locator(".acp-permission button:enabled", has_text=re.compile(r"^Allow once"))
    deadline = time.monotonic() + TURN / 1000
    while True:
        left = int((deadline - time.monotonic()) * 1000)
        assert left > 0, f"no proposal box in {TURN // 1000} s; the turn says: {out.text_content()[:1500]!r}"
        expect(box.or_(allow.first).first).to_be_visible(timeout=left)
        if box.count():
            return
        asked.append(" ".join((out.locator(".acp-permission").last.text_content() or "").split())[:1500])
        allow.first.click()


def _ask(nb: Notebook, prompt: str) -> Any:
    return nb.run(0, prompt)


def _end(out: Any, asked: list[str]) -> None:
    """The turn's end, answering any question of the agent's on the way."""
    allow = out.locator(".acp-permission button:enabled", has_text=re.compile(r"^Allow once"))
    done = _status_line(out).filter(has_text=END_TURN)
    deadline = time.monotonic() + TURN / 1000
    while True:
        left = int((deadline - time.monotonic()) * 1000)
        assert left > 0, f"the turn did not end in {TURN // 1000} s: {out.text_content()[:1500]!r}"
        expect(done.or_(allow.first).first).to_be_visible(timeout=left)
        if done.count():
            return
        asked.append(" ".join((out.locator(".acp-permission").last.text_content() or "").split())[:1500])
        allow.first.click()


# -- the tests ---------------------------------------------------------------------------


def _why(agent: Agent, asked: list[str]) -> str:
    return (f"{agent.name}: calls {agent.calls()}, results {[r[:300] for r in agent.results()]}, "
            f"agent questions {asked}, stub notes "
            f"{[e.get('reply', '')[:300] for e in agent.entries() if e.get('mode') == 'no_tool']}")


def _check_insert_box(nb: Notebook, box: Any, agent: Agent, asked: list[str], dialogs: list[str]) -> None:
    """The insert's box: the source as text, no element made of it anywhere in the page."""
    assert box.locator(".acp-proposal-source").text_content() == HOSTILE, _why(agent, asked)
    assert box.locator("img").count() == 0
    assert nb.page.locator("img[src='x']").count() == 0  # nor in the turn, the questions, a terminal
    assert not dialogs, dialogs
    nb.screenshot(f"realcli-{agent.name.split()[0]}-insert.png")


def _check_model_side(agent: Agent, asked: list[str], x_id: str, y_id: str, inserted_id: str) -> None:
    """What the model did and got back: the ids from the cells results, the answers whole."""
    why = _why(agent, asked)
    # the ACP kernel has no Python namespace: no execute, no variables
    assert sorted(tool_of(n) for n in notebook_tools(agent.entries())) == [
        "cells", "delete_cell", "edit_cell", "insert_cell"], why
    calls = agent.calls()
    assert [tool_of(c["name"]) for c in calls] == ["cells", "insert_cell", "cells", "edit_cell", "cells",
                                                    "delete_cell"], why
    assert [c["args"] for c in calls[1::2]] == [{"after": x_id, "source": HOSTILE}, {"cell_id": x_id, "source": "x = 10"},
                                              {"cell_id": y_id}], why
    results = [r.replace('\\"', '"') for r in agent.results()]  # (Codex: the content JSON, verbatim)
    assert len(results) == 6, why
    assert all(f'## Cell 2: code, id "{x_id}"' in r for r in results[0::2]), why
    inserted, rejected, deleted = results[1::2]
    assert f'Applied: inserted as cell "{inserted_id}"' in inserted, why
    assert "Rejected: the user did not accept the change" in rejected and f"The user's words: {WORDS}" in rejected, why
    assert f'Applied: cell "{y_id}" deleted' in deleted, why
    assert len(agent.servers) == 1, f"notebook servers under the Jupyter server: {agent.servers}; " + why


def test_a_real_agent_inserts_edits_and_deletes_cells_through_proposals(nb3: Notebook, agent: Agent) -> None:
    nb = nb3
    dialogs: list[str] = []
    nb.page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    expect(nb.panel).to_have_attribute(OPEN, "open", timeout=START)
    _, x_id, y_id = nb.cell_ids()
    asked: list[str] = []
    seconds: dict[str, float] = {}

    # 1. cells, then insert below x: the box on x's cell, the source as text; accepted.
    t0 = time.monotonic()
    out = _ask(nb, INSERT)
    box = nb.cell(1).locator(".acp-proposal-insert")
    try:
        _wait_box(out, box, asked)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; {_why(agent, asked)}") from None
    seconds["insert shown"] = round(time.monotonic() - t0, 1)
    agent.servers = servers_under(nb.lab.proc.pid)
    _check_insert_box(nb, box, agent, asked, dialogs)
    box.get_by_role("button", name="Accept").click()
    _end(out, asked)
    expect(box).to_have_attribute("data-state", "applied")
    assert nb.sources()[1:] == ["x = 1", HOSTILE, "y = 2"], _why(agent, asked)
    inserted_id = nb.cell_ids()[2]
    seconds["insert turn"] = round(time.monotonic() - t0, 1)

    # 2. cells, then an edit of x: rejected with the user's words.
    t0 = time.monotonic()
    out = _ask(nb, EDIT)
    box = nb.cell(1).locator(".acp-proposal-edit")
    _wait_box(out, box, asked)
    expect(box.locator(".acp-del")).to_have_text("- x = 1")
    expect(box.locator(".acp-add")).to_have_text("+ x = 10")
    box.locator(".acp-proposal-words").fill(WORDS)
    box.get_by_role("button", name="Reject").click()
    _end(out, asked)
    expect(box).to_have_attribute("data-state", "rejected")
    assert nb.sources()[1] == "x = 1", _why(agent, asked)
    seconds["edit turn"] = round(time.monotonic() - t0, 1)

    # 3. cells, then delete cell 4 (y, below the inserted cell): accepted.
    t0 = time.monotonic()
    out = _ask(nb, DELETE)
    box = nb.cell(3).locator(".acp-proposal-delete")
    _wait_box(out, box, asked)
    box.get_by_role("button", name="Accept").click()
    _end(out, asked)
    seconds["delete turn"] = round(time.monotonic() - t0, 1)

    # What the notebook holds: the insert applied, the edit not, y deleted.
    assert nb.sources()[1:] == ["x = 1", HOSTILE], _why(agent, asked)
    assert nb.cell_ids()[1:] == [x_id, inserted_id], _why(agent, asked)
    assert nb.page.locator("img[src='x']").count() == 0
    assert not dialogs, dialogs
    nb.screenshot(f"realcli-{agent.name}-done.png")
    _check_model_side(agent, asked, x_id, y_id, inserted_id)
    print(f"{agent.name}: {seconds}; the agent's own questions answered: {len(asked)} {asked}")


def _screen(out: Any) -> Any:
    """The rendered rows of the terminal view in a cell's output."""
    return out.locator(".acp-pty .xterm-rows")


def _typed(nb: Notebook, prompt: str, box: Any, asked: list[str]) -> Any:
    """Type ``prompt`` into the terminal from cell 0; wait for ``box``."""
    out = nb.run(0, prompt)
    try:
        expect(box).to_be_visible(timeout=TURN)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; the terminal shows: {_screen(out).text_content()!r}") from None
    return out


def _shown(nb: Notebook, out: Any, text: str) -> None:
    """The CLI's screen shows ``text`` (the model's quote of the tool result), then the cell ends."""
    expect(_screen(out)).to_contain_text(text, timeout=TURN)
    nb.wait_ran(0)


def test_claude_code_in_a_passthrough_terminal_inserts_edits_and_deletes_through_proposals(
        nb3_cli: Notebook, claude_cli: Agent) -> None:
    """The same through ``%passthrough claude`` in the ACP kernel: each prompt is typed into
    Claude Code's terminal in cell 0; the boxes and their answers are the same."""
    nb, agent = nb3_cli, claude_cli
    dialogs: list[str] = []
    nb.page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    expect(nb.panel).to_have_attribute(OPEN, "open", timeout=START)
    _, x_id, y_id = nb.cell_ids()
    asked: list[str] = []  # Claude Code asks nothing here: the profile allows mcp__notebook
    opened = nb.run(0, "%passthrough claude")
    expect(opened.locator(".acp-pty-status")).to_have_text("running", timeout=TURN)
    nb.wait_ran(0)
    t0 = time.monotonic()

    box = nb.cell(1).locator(".acp-proposal-insert")
    out = _typed(nb, INSERT, box, asked)
    agent.servers = servers_under(nb.lab.proc.pid)
    _check_insert_box(nb, box, agent, asked, dialogs)
    box.get_by_role("button", name="Accept").click()
    _shown(nb, out, "tool result: Applied: inserted")
    expect(box).to_have_attribute("data-state", "applied")
    assert nb.sources()[1:] == ["x = 1", HOSTILE, "y = 2"], _why(agent, asked)
    inserted_id = nb.cell_ids()[2]

    box = nb.cell(1).locator(".acp-proposal-edit")
    out = _typed(nb, EDIT, box, asked)
    expect(box.locator(".acp-add")).to_have_text("+ x = 10")
    box.locator(".acp-proposal-words").fill(WORDS)
    box.get_by_role("button", name="Reject").click()
    _shown(nb, out, "tool result: Rejected")
    assert nb.sources()[1] == "x = 1", _why(agent, asked)

    box = nb.cell(3).locator(".acp-proposal-delete")
    out = _typed(nb, DELETE, box, asked)
    box.get_by_role("button", name="Accept").click()
    _shown(nb, out, "tool result: Applied: cell")
    seconds = round(time.monotonic() - t0, 1)

    assert nb.sources()[1:] == ["x = 1", HOSTILE], _why(agent, asked)
    assert nb.page.locator("img[src='x']").count() == 0
    assert not dialogs, dialogs
    nb.screenshot("realcli-claude-passthrough-done.png")
    _check_model_side(agent, asked, x_id, y_id, inserted_id)
    print(f"claude passthrough: three prompts in {seconds} s")
