"""Real-browser fixtures: a JupyterLab server and a headless Debian Chromium.

- ``lab``: JupyterLab on 127.0.0.1, a free port, a random token, a temp root
  dir, our kernelspec installed by our own installer into a private prefix,
  and every piece of acp-kernel state (sessions, config, demo agent state) in
  temp paths. Stopped by its process group at the end.
- ``browser_context``: Playwright driving Debian's chromium (``executable_path``;
  Playwright's own browser download is never used) with a fresh profile.
- ``nb``: a fresh notebook with the "ACP Agent" kernel, opened in the one
  JupyterLab page the tests share (``lab_page``; loading the app is most of a
  page's cost); closed, and its kernel shut down (and seen gone), when the test
  ends. ``nb7`` and the tests of page loads open pages of their own.

The whole directory is skipped only when chromium or playwright is missing
(``scripts/install-browser-deps.sh`` installs both; CI runs it).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
ARTIFACTS = HERE / "artifacts"
AGENTS = HERE.parent / "agents"

#: Waits on page state, in ms. A busy 2-core machine (a build, other test
#: runs) makes a kernel start or a turn take many times its usual second, so
#: every wait is generous: a limit is only where a wait that never ends stops.
#: Playwright's own defaults (5 s for expect, 30 s for actions) are replaced
#: in ``browser_context``. ACP_BROWSER_TIMEOUT_SCALE=2 doubles them all.
_SCALE = float(os.environ.get("ACP_BROWSER_TIMEOUT_SCALE", "1") or 1)
WAIT = int(30_000 * _SCALE)
"""An action (click, type) or an expectation about what is already on its way."""
TURN = int(90_000 * _SCALE)
"""Something an agent turn, a kernel or a terminal has to produce first."""
START = int(120_000 * _SCALE)
"""A page load and a kernel start."""


def _chromium() -> str | None:
    """Debian's chromium: the real binary if present (the /usr/bin wrapper is a shell script)."""
    explicit = os.environ.get("ACP_TEST_CHROMIUM")
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    for path in ("/usr/lib/chromium/chromium", shutil.which("chromium") or "", "/usr/bin/chromium"):
        if path and os.access(path, os.X_OK):
            return path
    return None


CHROMIUM = _chromium()
try:
    import playwright.sync_api  # noqa: F401 - only whether it imports

    HAVE_PLAYWRIGHT = True
except ImportError:
    HAVE_PLAYWRIGHT = False

#: Why the browser tests cannot run here ("" when they can). The test modules
#: skip on it; with ACP_REQUIRE_BROWSER=1 (for CI) they fail instead.
SKIP_REASON = ""
_missing = [what for what, ok in (("chromium", CHROMIUM), ("playwright (python)", HAVE_PLAYWRIGHT)) if not ok]
if _missing:
    SKIP_REASON = "browser tests need " + " and ".join(_missing) + ": run scripts/install-browser-deps.sh"
REQUIRED = os.environ.get("ACP_REQUIRE_BROWSER", "") not in ("", "0")


def skip_unless_browser() -> None:
    """Call at the top of a browser test module, before importing playwright."""
    if SKIP_REASON:
        if REQUIRED:
            raise RuntimeError(SKIP_REASON + " (ACP_REQUIRE_BROWSER is set)")
        pytest.skip(SKIP_REASON, allow_module_level=True)


CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

#: JupyterLab settings: no news/update checks (no network, no toasts over the cells).
LAB_SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Lab:
    """A running JupyterLab: its URL, token, root dir, and a small REST client."""

    def __init__(self, proc: subprocess.Popen, port: int, token: str, root: Path, log: Path) -> None:
        self.proc, self.port, self.token, self.root, self.log = proc, port, token, root, log
        self.base = f"http://127.0.0.1:{port}"

    def api(self, method: str, path: str, body: Any = None, timeout: float = WAIT / 1000) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            self.base + path, data=data, method=method,
            headers={"Authorization": f"token {self.token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            raw = resp.read()
        return json.loads(raw) if raw else None

    def url(self, path: str) -> str:
        sep = "&" if "?" in path else "?"
        return f"{self.base}{path}{sep}token={self.token}"

    def new_notebook(self, name: str, cells: list[str] | None = None, kernel: str = "acp") -> str:
        spec, language = KERNELS[kernel]
        nb = {
            "nbformat": 4,
            "nbformat_minor": 5,
            "metadata": {
                "kernelspec": {"name": kernel, "display_name": spec, "language": language},
                "language_info": {"name": language},
            },
            "cells": [
                {"cell_type": "code", "id": uuid.uuid4().hex[:8], "metadata": {}, "source": src,
                 "outputs": [], "execution_count": None}
                for src in (cells or [""])
            ],
        }
        self.api("PUT", f"/api/contents/{name}", {"type": "notebook", "format": "json", "content": nb})
        return name

    def kernel_pids(self) -> set[int]:
        """The server's descendants: kernels and everything they started."""
        from acp_kernel.protocol import proctree

        return proctree.tree(self.proc.pid) - {self.proc.pid}

    def log_tail(self, n: int = 4000) -> str:
        try:
            return self.log.read_text(errors="replace")[-n:]
        except OSError:
            return ""


@pytest.fixture(scope="package")
def lab(tmp_path_factory) -> Any:
    """JupyterLab."""
    yield from _serve(tmp_path_factory.mktemp("lab"), "jupyterlab", [
        "--LabApp.news_url=",
        "--LabServerApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        # window.jupyterapp, for ``lab_page`` to open each test's notebook in one loaded app
        "--LabApp.expose_app_in_browser=True",
    ])


@pytest.fixture(scope="package")
def notebook7(tmp_path_factory) -> Any:
    """Jupyter Notebook 7 (the same kernelspec and state setup as ``lab``)."""
    yield from _serve(tmp_path_factory.mktemp("nb7"), "notebook", [])


def isolated_env(base: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """An environment for a Jupyter server under ``base``: our kernelspec installed in
    ``base/prefix`` and first on JUPYTER_PATH, config, runtime and the kernel's and demo
    agent's state all in ``base``, none of the caller's agent or policy choices."""
    from acp_kernel.frontends.install import install

    prefix = base / "prefix"
    install(prefix=str(prefix))
    env = dict(os.environ)
    for var in ("ACP_KERNEL_AGENT", "ACP_KERNEL_PERMISSIONS", "JPY_SESSION_NAME"):
        env.pop(var, None)
    env.update({
        "JUPYTER_PATH": os.pathsep.join(filter(None, [str(prefix / "share" / "jupyter"), env.get("JUPYTER_PATH")])),
        "JUPYTER_CONFIG_DIR": str(base / "config"),
        "JUPYTER_RUNTIME_DIR": str(base / "runtime"),
        "ACP_KERNEL_STATE": str(base / "state" / "sessions.json"),
        "ACP_KERNEL_CONFIG": str(base / "acp_kernel.json"),
        "ACP_DEMO_STATE_DIR": str(base / "demo-state"),
        "PYTHONUNBUFFERED": "1",
        **(extra or {}),
    })
    return env


def _serve(base: Path, app: str, extra: list[str]) -> Any:
    """Start ``python -m <app>`` on 127.0.0.1 with a token, our kernelspec and
    temp state; yield a :class:`Lab` once ``/api/status`` answers; stop its group."""
    root = base / "root"
    root.mkdir()
    settings = base / "lab-settings"
    for rel, value in LAB_SETTINGS.items():
        path = settings / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(value))
    # No build check on each page load (JupyterLab asks the server, which runs its build
    # check for about a second of CPU: nothing is ever built here).
    labconfig = base / "config" / "labconfig"
    labconfig.mkdir(parents=True, exist_ok=True)
    page_config = labconfig / "page_config.json"
    page = json.loads(page_config.read_text()) if page_config.exists() else {}
    page_config.write_text(json.dumps({**page, "buildCheck": False, "buildAvailable": False}))
    env = isolated_env(base, {
        "JUPYTERLAB_SETTINGS_DIR": str(settings),
        "JUPYTERLAB_WORKSPACES_DIR": str(base / "workspaces"),
    })
    sockets = Path(tempfile.mkdtemp(prefix="acp-test-lab-"))  # short: a Unix socket path is at most 107 bytes
    port = _free_port()
    token = secrets.token_hex(24)
    log = base / "jupyterlab.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable, "-m", app,
                "--no-browser", "--allow-root",
                "--ip=127.0.0.1", f"--port={port}", "--port-retries=0",
                f"--IdentityProvider.token={token}",
                f"--ServerApp.root_dir={root}",
                # Its kernels on Unix sockets too (tests/kernels.py says why), named apart by number.
                "--KernelManager.transport=ipc", f"--KernelManager.ip={sockets / 'k'}",
                *extra,
            ],
            cwd=str(root), env=env, stdout=out, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True,
        )
    server = Lab(proc, port, token, root, log)
    try:
        deadline = time.monotonic() + START / 1000
        while True:  # waiting on a server to come up: poll with a deadline
            if proc.poll() is not None:
                raise RuntimeError(f"{app} exited with {proc.returncode}:\n{server.log_tail()}")
            try:
                server.api("GET", "/api/status", timeout=2)
                break
            except (urllib.error.URLError, ConnectionError, OSError) as exc:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{app} did not answer /api/status in {START // 1000} s:\n{server.log_tail()}") from exc
                time.sleep(0.1)
        yield server
    finally:
        _stop_group(proc)
        shutil.rmtree(sockets, ignore_errors=True)


def _stop_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # whatever is left in the group
    except ProcessLookupError:
        pass
    proc.wait(timeout=10)


@pytest.fixture(scope="package")
def browser_context(tmp_path_factory) -> Any:
    from playwright.sync_api import expect, sync_playwright

    profile = tmp_path_factory.mktemp("chromium-profile")
    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(profile),
            executable_path=CHROMIUM,
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1280, "height": 900},
        )
        context.set_default_timeout(WAIT)
        context.set_default_navigation_timeout(START)
        expect.set_options(timeout=WAIT)
        try:
            yield context
        finally:
            context.close()


@pytest.fixture(autouse=True)
def no_process_left_behind(request):
    """Overrides the repository-wide check: the browser's own processes come
    and go, so here the check is on what the server started (kernels, their
    agents and terminals), which the ``nb`` fixture shuts down and waits for."""
    yield


@pytest.fixture(scope="package", autouse=True)
def _artifacts_dir() -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    for old in ARTIFACTS.glob("FAILED-*.png"):  # only this run's failures stay
        old.unlink(missing_ok=True)  # (each xdist worker's package scope runs this)
    return ARTIFACTS


#: Kernels a test notebook can use: name -> (display name, language).
KERNELS = {"acp": ("ACP Agent", "markdown"), "python3": ("Python 3 (ipykernel)", "python")}


class Notebook:
    """One open notebook page with helpers for cells and outputs."""

    def __init__(self, lab: Lab, page: Any, name: str) -> None:
        self.lab, self.page, self.name = lab, page, name

    @property
    def panel(self) -> Any:
        """The visible notebook panel (toolbar and cells)."""
        return self.page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")

    @property
    def cells(self) -> Any:
        return self.panel.locator(".jp-Notebook .jp-Cell")

    def cell(self, i: int) -> Any:
        return self.cells.nth(i)

    def output(self, i: int) -> Any:
        return self.cell(i).locator(".jp-OutputArea")

    def run(self, i: int, text: str) -> Any:
        """Type ``text`` into cell ``i`` and run it with Shift+Enter; return its output area."""
        from playwright.sync_api import expect

        editor = self.cell(i).locator(".cm-content")
        editor.click()
        self.page.keyboard.press("ControlOrMeta+a")
        self.page.keyboard.insert_text(text)
        expect(editor).to_have_text(text.replace("\n", ""), use_inner_text=False)
        self.page.keyboard.press("Shift+Enter")
        return self.output(i)

    def wait_ran(self, i: int) -> None:
        """Wait until cell ``i`` has finished (its prompt shows a number).

        A passthrough prompt cell redraws its output when it ends, which drops the
        terminal's focus and selection: click into it only after this.
        (The cell's prompt, not the kernel's status: comm traffic makes that flicker.)
        """
        from playwright.sync_api import expect

        expect(self.cell(i).locator(".jp-InputPrompt")).to_have_text(re.compile(r"\[\d+\]:"), timeout=TURN)

    def cell_ids(self) -> list[str]:
        """The cells' ids in the live model (JupyterLab's ``jupyterapp``; not Notebook 7)."""
        return self.page.evaluate(
            "() => { const m = window.jupyterapp.shell.currentWidget.content.model;"
            " return Array.from({length: m.cells.length}, (_, i) => m.cells.get(i).id); }")

    def sources(self) -> list[str]:
        """The cells' sources in the live model, unsaved edits included (JupyterLab)."""
        return self.page.evaluate(
            "() => { const m = window.jupyterapp.shell.currentWidget.content.model;"
            " return Array.from({length: m.cells.length}, (_, i) => m.cells.get(i).sharedModel.getSource()); }")

    def screenshot(self, name: str) -> Path:
        path = ARTIFACTS / name
        self.page.screenshot(path=str(path), full_page=True)
        return path

    def save(self) -> None:
        """Save with the keyboard and wait for the server to have it."""
        def is_save(resp: Any) -> bool:
            return resp.request.method == "PUT" and f"/api/contents/{self.name}" in resp.url

        with self.page.expect_response(is_save) as saved:
            self.page.keyboard.press("ControlOrMeta+s")
        assert saved.value.ok, saved.value.status


def _describe(pid: int) -> str:
    try:
        return f"{pid}: " + Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:300]
    except OSError:
        return f"{pid}: (gone)"


def _wait_gone(pids: set[int], timeout: float) -> set[int]:
    from acp_kernel.protocol import proctree

    deadline = time.monotonic() + timeout
    left = {p for p in pids if proctree.alive(p)}
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = {p for p in left if proctree.alive(p)}
    return left


#: Console errors JupyterLab logs itself, with or without this extension:
#: - a settings-schema race on the shared page (Notebook 7.6 logs it on load also with this
#:   extension disabled, checked with ``disabledExtensions`` in its page config);
#: - the debugger asking a kernel being replaced to restore its state (the change cancels it);
#: - a comm's subshell still being created when its kernel restarts or shuts down: JupyterLab
#:   asks for one subshell per comm target (``commsOverSubshells``, default ``perCommTarget``),
#:   the restart disposes the pending ``create_subshell_request`` and its kernel connection
#:   logs the cancelled future with ``console.error``. On a loaded machine a test that
#:   restarts right after the comm opened, or closes a notebook, meets it.
NOT_OURS = ("Cannot read properties of undefined (reading 'schema')", "Could not restore the debugger state",
            "Error: Canceled future for create_subshell_request message")


def ours(errors: list[str]) -> list[str]:
    """Console errors not in NOT_OURS."""
    return [e for e in errors if not e.startswith(NOT_OURS)]


class Console:
    """What a page logs: every console line and page error, and the errors alone."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.errors: list[str] = []

    def clear(self) -> None:
        """Start anew (a shared page's next test): the lists are emptied in place."""
        self.lines.clear()
        self.errors.clear()

    def listen(self, page: Any) -> None:
        page.on("pageerror", self._on_pageerror)
        page.on("console", self._on_console)

    def _on_pageerror(self, exc: Any) -> None:
        self.errors.append(str(exc))
        self.lines.append(f"pageerror: {exc}")

    def _on_console(self, msg: Any) -> None:
        self.lines.append(f"{msg.type}: {msg.text}")
        if msg.type == "error":
            self.errors.append(msg.text)


class LabPage:
    """One JupyterLab page for the tests on ``lab``: loading the app is most of a
    page's cost (seconds of CPU), so each test opens its notebook in the loaded
    app and closes it after. A test that fails gets the page replaced, so what
    it left behind (a dialog, a half-typed cell) never reaches the next one.
    Tests of a page load itself (a saved notebook reopened) open pages of their own."""

    def __init__(self, lab: Lab, context: Any) -> None:
        self.lab, self.context = lab, context
        self.page: Any = None
        self.console = Console()

    def get(self) -> Any:
        """The loaded page, opened on first use or after a failure closed it."""
        if self.page is None or self.page.is_closed():
            page = self.context.new_page()
            self.console.listen(page)
            page.goto(self.lab.url(f"/lab/workspaces/{uuid.uuid4().hex[:12]}"))
            # Waits with a limit: page.evaluate of a promise would wait on it for ever.
            page.wait_for_function("() => window.jupyterapp !== undefined", timeout=START)
            page.evaluate("() => { window.jupyterapp.restored.then(() => { window.acpTestRestored = true; }); }")
            page.wait_for_function("() => window.acpTestRestored === true", timeout=START)
            self.page = page
        return self.page

    def open(self, name: str) -> Any:
        """Open ``name`` in the app; the page's console from here on is this test's."""
        page = self.get()
        self.console.clear()
        # Not awaited here: the caller waits, with limits, for the kernel's name and idle state.
        page.evaluate("(path) => { window.jupyterapp.commands.execute('docmanager:open', {path, factory: 'Notebook'}); }", name)
        return page

    def close_all(self, keep: bool) -> None:
        """Close every document without saving (a test saves what it means to), or
        with ``keep`` false, the page itself; also the page when a dialog is left open."""
        if self.page is None or self.page.is_closed():
            return
        if keep:
            left = self.page.evaluate("""() => {
                for (const w of Array.from(window.jupyterapp.shell.widgets('main'))) {
                    if (w.context) { w.context.model.dirty = false; }
                    w.dispose();
                }
                return document.querySelectorAll('.jp-Dialog').length;
            }""")
            keep = left == 0
        if not keep:
            self.discard()

    def discard(self) -> None:
        if self.page is not None and not self.page.is_closed():
            self.page.close()
        self.page = None


@pytest.fixture(scope="package")
def lab_page(lab: Lab, browser_context: Any) -> Any:
    shared = LabPage(lab, browser_context)
    try:
        yield shared
    finally:
        shared.discard()


@pytest.fixture
def nb(lab: Lab, lab_page: LabPage, request) -> Any:
    """A new notebook with the "ACP Agent" kernel, open and idle in the shared JupyterLab page."""
    yield from _open_notebook(lab, lab_page, request)


@pytest.fixture
def nb7(notebook7: Lab, browser_context: Any, request) -> Any:
    """The same in Jupyter Notebook 7's notebook page (a page of its own)."""
    yield from _open_notebook(notebook7, browser_context, request, "/notebooks/{name}")


@pytest.fixture
def pynb(lab: Lab, lab_page: LabPage, request) -> Any:
    """A new notebook with a stock python3 kernel (for the magics) and six empty cells, open and idle in JupyterLab."""
    yield from _open_notebook(lab, lab_page, request, kernel="python3", cells=[""] * 6)


def _open_notebook(lab: Lab, where: Any, request: Any, path: str | None = None, kernel: str = "acp",
                   cells: list[str] | None = None, reloads: int = 0) -> Any:
    """Open a new notebook and wait until its kernel is idle: in the shared
    JupyterLab page when ``where`` is a :class:`LabPage`, else in a new page of
    the browser context ``where`` at ``path``. With ``reloads`` (a page of its
    own only), a page whose kernel is not idle after WAIT is loaded again (a new
    websocket) up to that many times; the console log says each time."""
    from playwright.sync_api import expect

    name = re.sub(r"[^A-Za-z0-9_]+", "_", request.node.name)[:60] + ".ipynb"
    lab.new_notebook(name, cells, kernel)
    shared = where if isinstance(where, LabPage) else None
    if shared is not None:
        page = shared.open(name)
        recorded = shared.console
    else:
        assert path is not None
        page = where.new_page()
        recorded = Console()
        recorded.listen(page)
        page.goto(lab.url(path.format(name=name)))
    errors, console = recorded.errors, recorded.lines
    notebook = Notebook(lab, page, name)
    notebook.console_errors = errors  # type: ignore[attr-defined]
    ready = False
    try:
        # The kernel is up when the toolbar shows its name and the indicator is idle.
        for attempt in range(reloads + 1):
            last = attempt == reloads
            try:
                expect(notebook.panel.locator(".jp-KernelName")).to_have_text(KERNELS[kernel][0], timeout=START)
                expect(notebook.panel.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']")).to_have_count(
                    1, timeout=START if last else WAIT)
                break
            except AssertionError:
                if last:
                    raise
                console.append(f"-- the kernel was not idle after {WAIT // 1000} s: loading the page again")
                page.reload()
        ready = True
        yield notebook
    finally:
        # The page's console (and a screenshot on failure), also when the notebook never got ready.
        (ARTIFACTS / f"{name}.console.log").write_text("\n".join(console) + "\n")
        rep = getattr(request.node, "rep_call", None)
        if not ready or (rep is not None and rep.failed):
            try:
                notebook.screenshot(f"FAILED-{name}.png")
            except Exception as exc:  # noqa: BLE001 - a screenshot must not hide the failure
                print(f"no failure screenshot: {exc}")
        if shared is not None:
            # A failed test's page goes: the next test gets none of its leftovers.
            shared.close_all(keep=ready and not (rep is not None and rep.failed))
        before = lab.kernel_pids()
        try:
            for sess in lab.api("GET", "/api/sessions"):
                lab.api("DELETE", f"/api/sessions/{sess['id']}", timeout=TURN / 1000)
            for kernel in lab.api("GET", "/api/kernels"):
                lab.api("DELETE", f"/api/kernels/{kernel['id']}", timeout=TURN / 1000)
        finally:
            if shared is None:
                page.close()
        left = _wait_gone(before, WAIT / 1000)
        assert not left, "processes left behind by the kernel:\n" + "\n".join(_describe(p) for p in sorted(left))



def pytest_collection_modifyitems(items) -> None:
    """pytest-timeout's 120 s suits one wait, not a browser test of several
    generous ones: these get room for their own limits to be the ones that
    fire (with a screenshot), unless a test says otherwise."""
    for item in items:
        if HERE in Path(str(item.fspath)).parents and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(int(12 * TURN / 1000)))


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.when == "call":
        item.rep_call = rep
