"""``jupyter console --kernel acp`` driven through a pseudo-terminal (pexpect),
with the scripted agent as the configured default agent."""

from __future__ import annotations

import os
import re
import sys

import pytest

from tests.headless.conftest import use_scripted_agent
from tests.kernel.conftest import kernel_env, kernelspec_path  # noqa: F401 - fixtures

pexpect = pytest.importorskip("pexpect")

PROMPT = re.compile(r"In \[\d+\]: ")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r")


class Console:
    """One ``jupyter console`` session (or, with ``argv``, another terminal
    frontend such as terminal IPython); ``run(cell)`` returns what it printed."""

    def __init__(self, env: dict[str, str], cwd: str, kernel: str = "acp", argv: list[str] | None = None) -> None:
        argv = argv or ["-m", "jupyter_console", "--kernel", kernel, "--simple-prompt",
                        "--ZMQTerminalInteractiveShell.kernel_timeout=60"]
        self.child = pexpect.spawn(sys.executable, argv, env=env, cwd=cwd, encoding="utf-8", timeout=60,
                                   dimensions=(50, 200))
        self.child.expect(PROMPT)
        self.busy = False  # a cell was sent and its prompt has not come back

    def run(self, cell: str, timeout: float = 60) -> str:
        self.busy = True
        self.child.sendline(cell)
        self.child.expect(PROMPT, timeout=timeout)
        self.busy = False
        return ANSI.sub("", self.child.before)

    def run_until(self, cell: str, pattern: str, timeout: float = 60) -> str:
        """Send a cell and read until ``pattern`` (e.g. an input prompt)."""
        self.busy = True
        self.child.sendline(cell)
        self.child.expect(pattern, timeout=timeout)
        return ANSI.sub("", self.child.before)

    def answer(self, line: str, timeout: float = 60) -> str:
        self.child.sendline(line)
        self.child.expect(PROMPT, timeout=timeout)
        self.busy = False
        return ANSI.sub("", self.child.before)

    def close(self) -> None:
        """Leave as a user does (Ctrl-C if a cell still runs, then ``exit``);
        if the console does not end, kill it and every process under it, by pid."""
        if self.child.isalive() and self.busy:
            self.child.sendintr()
            try:
                self.child.expect(PROMPT, timeout=10)
            except (pexpect.TIMEOUT, pexpect.EOF):
                pass
        if self.child.isalive():
            self.child.sendline("exit")
            try:
                self.child.expect(pexpect.EOF, timeout=20)
            except pexpect.TIMEOUT:
                pass
        if self.child.isalive():
            for pid in [*descendants(self.child.pid), self.child.pid]:
                try:
                    os.kill(pid, 9)
                except ProcessLookupError:
                    pass
        self.child.close(force=True)


def descendants(pid: int) -> list[int]:
    """Every process under ``pid`` (from /proc), deepest last."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


@pytest.fixture
def console(kernel_env, tmp_path):  # noqa: F811
    """Start a console whose kernel runs ``scenario`` (call the returned function)."""
    made: list[Console] = []

    def start(scenario: dict, kernel: str = "acp", argv: list[str] | None = None) -> Console:
        """``kernel="python3"``: the magics and the Python API in a console;
        ``argv``: another terminal frontend (terminal IPython)."""
        env = dict(kernel_env)
        env["JUPYTER_PATH"] = os.environ["JUPYTER_PATH"]
        env["JUPYTER_RUNTIME_DIR"] = str(tmp_path / "runtime")
        env["TERM"] = "dumb"
        env["HOME"] = str(tmp_path)  # no user IPython profile or history
        use_scripted_agent(env, scenario)
        c = Console(env, str(tmp_path / "work"), kernel, argv)
        made.append(c)
        return c

    yield start
    for c in made:
        c.close()

