"""Writes that can run code or change who can get in.

A write inside the session's directory is not asked (the agent asked before
its edit). Some files there still act on their own the next time something
ordinary happens: ``core.fsmonitor`` in ``.git/config`` runs on the next
``git status``, a hook on the next commit, ``~/.bashrc`` in the next shell,
``~/.ssh/authorized_keys`` lets a key log in, a kernelspec's ``argv`` runs
when a notebook starts, an executable keeps its x bit when it is replaced.
Such a write is asked even when the agent did not ask (see
:mod:`acp_kernel.services.files` for the policy).

:func:`classify` is the rule: pure, over a path and the places of
:class:`Places`; the only I/O is ``os.stat`` of the target (its x bit) and of
a few neighbours (``pyvenv.cfg`` beside a ``bin/``, ``HEAD`` and ``objects``
of a git directory), through a :class:`Probe`.

Both the resolved path (symlinks followed: ``ws/link -> ~/.ssh`` counts) and
the path as asked, made absolute and ``..``-collapsed (``~/.bashrc ->
dotfiles/bashrc`` counts) are classified; either one being sensitive is
enough. Names and places are compared case-folded and NFC-normalized (a
case-insensitive file system reads ``.GIT/config`` as git's config); that
asks more on Linux, never less.

Left out on purpose: ``.gitmodules`` and ``.gitattributes`` (they name
commands only through configuration git keeps in ``.git/config``, and
agents edit them as project files); files that run only when the person runs
the project (``Makefile``, ``package.json``, ``conftest.py``, ``setup.py``,
``.pre-commit-config.yaml``, ``.vscode/tasks.json``): changing them is the
agent's work and their effect shows in the diff; and reads (this is about
what a write can start).
"""

from __future__ import annotations

import os
import stat
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

CODE = "can run code"
ACCESS = "changes who can log in"
SECRETS = "holds credentials"


@dataclass(frozen=True)
class Reason:
    """Why a write is sensitive: ``what`` (:data:`CODE`, :data:`ACCESS`,
    :data:`SECRETS`) and a short ``detail`` naming the kind of file."""

    what: str
    detail: str

    def __str__(self) -> str:
        return f"{self.what}: {self.detail}"


@dataclass(frozen=True)
class Places:
    """Directories whose files act by themselves, as configured now.

    Each is kept as given and resolved (:func:`current_places`); callers
    building one by hand should do the same.
    """

    homes: tuple[str, ...] = ()
    #: IPython's directory (``$IPYTHONDIR``, ``~/.ipython``): profiles, start-up files.
    ipython: tuple[str, ...] = ()
    #: Jupyter data, config and runtime directories: kernelspecs, extensions, config.
    jupyter: tuple[str, ...] = ()
    #: ``$XDG_CONFIG_HOME`` (when it is not under a home already).
    config: tuple[str, ...] = ()


class Probe(Protocol):
    def mode(self, path: str) -> int | None:
        """``st_mode`` of ``path`` (followed), or None when there is none."""

    def is_file(self, path: str) -> bool: ...

    def is_dir(self, path: str) -> bool: ...


@dataclass(frozen=True)
class OsProbe:
    """The real file system (``os.stat``; any error means "not there")."""

    def mode(self, path: str) -> int | None:
        try:
            return os.stat(path).st_mode
        except (OSError, ValueError):
            return None

    def is_file(self, path: str) -> bool:
        m = self.mode(path)
        return m is not None and stat.S_ISREG(m)

    def is_dir(self, path: str) -> bool:
        m = self.mode(path)
        return m is not None and stat.S_ISDIR(m)


# -- names ----------------------------------------------------------------------

SHELL_STARTUP = frozenset({
    ".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".bash_aliases", ".profile",
    ".zshrc", ".zprofile", ".zshenv", ".zlogin", ".zlogout", ".kshrc", ".mkshrc", ".cshrc",
    ".tcshrc", ".login", ".logout", ".inputrc", ".xprofile", ".xinitrc", ".xsession",
    ".xsessionrc", "config.fish",
})
PYTHON_STARTUP = frozenset({".pythonrc", ".pythonrc.py", ".pythonstartup", "sitecustomize.py", "usercustomize.py"})
ACCESS_NAMES = frozenset({"authorized_keys", "authorized_keys2", ".rhosts", ".shosts", ".k5login"})
SECRET_NAMES = {
    ".netrc": "~/.netrc", "_netrc": "~/.netrc", ".git-credentials": "git credentials",
    ".pypirc": "PyPI credentials",
}
#: Project files some tool runs or obeys on its own.
TOOL_NAMES = {
    ".envrc": "direnv (.envrc runs on cd)",
    ".npmrc": "npm config (.npmrc can set node options and scripts' shell)",
    ".gitconfig": "git config (~/.gitconfig)",
    ".condarc": "conda config",
    "pyvenv.cfg": "virtual environment (pyvenv.cfg picks the Python that runs)",
}
KERNEL_FILES = frozenset({"kernel.json", "kernel.js"})


def key(path: str) -> str:
    """How names and paths are compared: NFC-normalized and case-folded."""
    return unicodedata.normalize("NFC", path).casefold()


def within(path_key: str, root_key: str) -> bool:
    """``path_key`` is ``root_key`` or below it (both from :func:`key`, absolute)."""
    root = root_key.rstrip(os.sep) or os.sep
    return path_key == root or path_key.startswith(root if root.endswith(os.sep) else root + os.sep)


def below(path_key: str, roots: Iterable[str]) -> list[str] | None:
    """The components of ``path_key`` below the first of ``roots`` holding it ([] for a root itself)."""
    for root in roots:
        r = key(root)
        if within(path_key, r):
            rel = path_key[len(r.rstrip(os.sep)):].strip(os.sep)
            return rel.split(os.sep) if rel else []
    return None


# -- the rule --------------------------------------------------------------------


def _git_dir(index: int, path: str, probe: Probe) -> bool:
    """Is the directory made of the first ``index`` components a git directory
    under another name (a bare repository, ``--separate-git-dir``)?"""
    if index <= 0:
        return False
    d = os.sep + os.path.join(*path.strip(os.sep).split(os.sep)[:index])
    return probe.is_file(os.path.join(d, "HEAD")) and probe.is_dir(os.path.join(d, "objects")) \
        and probe.is_dir(os.path.join(d, "refs"))


def classify_path(path: str, places: Places, probe: Probe) -> Reason | None:
    """Why writing the absolute, normalized ``path`` can run code or change
    access, or None. ``probe`` answers the few stats (see module docstring)."""
    k = key(path)
    names = k.strip(os.sep).split(os.sep) if k.strip(os.sep) else []
    if not names:
        return None
    name = names[-1]
    dirs = names[:-1]

    # git: .git/ (config, hooks, anything), a .git file (a worktree's gitdir pointer),
    # and a git directory under another name.
    if ".git" in dirs:
        rest = dirs[dirs.index(".git") + 1:]
        return Reason(CODE, "git hook" if "hooks" in rest else "git config (.git/)" if name == "config" and not rest
                      else "git repository internals (.git/)")
    if name == ".git":
        return Reason(CODE, "git directory pointer (.git)")
    for i in range(len(dirs), max(len(dirs) - 2, 0), -1):
        if _git_dir(i, path, probe):
            return Reason(CODE, "git hook" if "hooks" in dirs[i:] else "git repository (bare or separate git dir)")

    if ".ssh" in dirs or name in ACCESS_NAMES:
        return Reason(ACCESS, "~/.ssh" if ".ssh" in dirs else name)
    if ".gnupg" in dirs:
        return Reason(ACCESS, "~/.gnupg (trusted keys)")
    if name in SECRET_NAMES:
        return Reason(SECRETS, SECRET_NAMES[name])
    if name in SHELL_STARTUP or ("fish" in dirs and ".config" in dirs):
        return Reason(CODE, "shell start-up file")
    if name in PYTHON_STARTUP or name.endswith(".pth"):
        return Reason(CODE, "Python start-up (.pth, sitecustomize, PYTHONSTARTUP)")
    if name in TOOL_NAMES:
        return Reason(CODE, TOOL_NAMES[name])

    if ".ipython" in dirs or below(k, places.ipython) is not None:
        return Reason(CODE, "IPython profile or start-up file")
    if name.startswith("ipython") and "config" in name and name.endswith((".py", ".json")):
        return Reason(CODE, "IPython config")
    if name in KERNEL_FILES and len(dirs) >= 2 and dirs[-2] == "kernels":
        return Reason(CODE, "a kernelspec (its argv runs when a notebook starts)")
    if name.startswith("jupyter") and name.endswith(("_config.py", "_config.json")):
        return Reason(CODE, "Jupyter config")
    if below(k, places.jupyter) is not None:
        return Reason(CODE, "Jupyter data or config (kernelspecs, extensions, config)")

    # A virtual environment's scripts: bin/ (Scripts/) beside a pyvenv.cfg, or any .venv/bin.
    for i, d in enumerate(dirs):
        if d in ("bin", "scripts"):
            if i > 0 and dirs[i - 1] == ".venv":
                return Reason(CODE, "a virtual environment's bin/")
            parent = os.sep + os.path.join(*path.strip(os.sep).split(os.sep)[:i]) if i else os.sep
            if probe.is_file(os.path.join(parent, "pyvenv.cfg")):
                return Reason(CODE, "a virtual environment's bin/")

    home_rel = below(k, places.homes)
    if home_rel:
        first = home_rel[0]
        if first.startswith("."):
            return Reason(CODE, f"a hidden file of the home directory (~/{first})")
        if first == "bin":
            return Reason(CODE, "~/bin (on PATH)")
    if below(k, places.config) is not None:
        return Reason(CODE, "the configuration directory ($XDG_CONFIG_HOME)")
    return None


def classify(requested: str, real: str, places: Places, probe: Probe | None = None) -> Reason | None:
    """Why a write of ``requested`` (resolved: ``real``) can run code or change
    access, or None.

    ``real`` comes from ``os.path.realpath`` and decides first (where the
    bytes go); ``requested`` is also judged as written, made absolute and
    ``..``-collapsed (a link named ``~/.bashrc`` into a dotfiles repository
    still starts shells). An existing target with any x bit counts: the write
    keeps the mode.
    """
    probe = probe or OsProbe()
    reason = classify_path(real, places, probe)
    if reason is None and requested:
        reason = classify_path(os.path.normpath(os.path.join(os.sep, requested)), places, probe)
    if reason is not None:
        return reason
    mode = probe.mode(real)
    if mode is not None and stat.S_ISREG(mode) and mode & 0o111:
        return Reason(CODE, "an executable file (the write keeps its mode)")
    return None


def current_places(env: dict[str, str] | None = None) -> Places:
    """The places as configured now (``HOME``, ``IPYTHONDIR``, Jupyter's paths,
    ``XDG_CONFIG_HOME``), each given and resolved."""
    import pwd

    from jupyter_core.paths import jupyter_config_path, jupyter_path, jupyter_runtime_dir

    env = dict(os.environ) if env is None else env

    def both(paths: Iterable[str]) -> tuple[str, ...]:
        out: list[str] = []
        for p in paths:
            if p and os.path.isabs(p):
                for q in (os.path.normpath(p), os.path.realpath(p)):
                    if q not in out and q != os.sep:
                        out.append(q)
        return tuple(out)

    homes = [os.path.expanduser("~")]
    try:
        homes.append(pwd.getpwuid(os.getuid()).pw_dir)
    except (KeyError, OSError):
        pass
    ipython = [env.get("IPYTHONDIR") or "", os.path.join(homes[0], ".ipython")]
    jupyter = [*jupyter_path(), *jupyter_config_path(), jupyter_runtime_dir()]
    return Places(homes=both(homes), ipython=both(ipython), jupyter=both(jupyter),
                  config=both([env.get("XDG_CONFIG_HOME") or ""]))


__all__ = ["ACCESS", "CODE", "SECRETS", "OsProbe", "Places", "Probe", "Reason", "classify", "classify_path",
           "current_places"]
