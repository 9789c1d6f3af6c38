"""A newcomer's machine, in a temp dir: a fresh clone and a Python that refuses
system-wide installs (PEP 668), as Debian 12 and recent Ubuntu ship it.

pip refuses to install into an interpreter whose ``sysconfig.get_path("stdlib")``
holds an ``EXTERNALLY-MANAGED`` file, unless it runs inside a virtual
environment. A venv of ours would not do (pip skips the check in a venv), so
this makes a throwaway *prefix*: a copy of the running interpreter's binary,
its standard library linked entry by entry, the marker, and a site directory
with only pip in it (Debian's python3-pip is there too, and refuses). Which
site directory is the copied interpreter's own answer (``site.getsitepackages``):
a pyenv or python.org build looks in ``lib/python3.X/site-packages``, Debian's
own python3 only in ``dist-packages`` folders.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

MARKER = """[externally-managed]
Error=This Python is the system's (a test stand-in for Debian's): install into a virtual environment.
"""


def externally_managed_python(prefix: Path) -> Path:
    """Make the prefix; return its ``bin`` directory (``python3`` in it)."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    bindir = prefix / "bin"
    bindir.mkdir(parents=True)
    # A copy, not a link: the interpreter finds its prefix from where its binary really is.
    real = Path(getattr(sys, "_base_executable", sys.executable)).resolve()
    shutil.copy2(real, bindir / version)
    (bindir / "python3").symlink_to(version)
    stdlib = Path(sysconfig.get_path("stdlib"))
    lib = prefix / "lib" / version
    lib.mkdir(parents=True)
    for entry in stdlib.iterdir():
        if entry.name not in ("site-packages", "EXTERNALLY-MANAGED"):
            (lib / entry.name).symlink_to(entry)
    site = site_dirs(bindir / "python3")[-1]
    assert site.is_relative_to(prefix), f"the copied python3 did not find its own prefix: {site}"
    site.mkdir(parents=True)
    import pip

    (site / "pip").symlink_to(Path(pip.__file__).resolve().parent)
    (lib / "EXTERNALLY-MANAGED").write_text(MARKER)
    return bindir


def site_dirs(python: Path) -> list[Path]:
    """The interpreter's own site-packages folders (existing or not), in its order;
    the last is under ``prefix/lib`` on every build seen (Debian adds ``local`` ones first)."""
    out = subprocess.run([str(python), "-S", "-c", "import site, json; print(json.dumps(site.getsitepackages()))"],
                         capture_output=True, text=True, check=True, timeout=60, stdin=subprocess.DEVNULL,
                         env={"PATH": os.environ.get("PATH", "")})
    return [Path(p) for p in json.loads(out.stdout)]


def clone_head(dest: Path) -> Path:
    """``git clone`` of this repository's committed state (HEAD) into ``dest``."""
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(dest)], check=True, timeout=120,
                   stdin=subprocess.DEVNULL)
    return dest


def newcomer_env(bindir: Path, home: Path, tmpdir: Path) -> dict[str, str]:
    """The environment of someone who has just cloned the repository: the
    refusing ``python3`` first on PATH, a fresh HOME, no venv active, nothing
    of this test run's Jupyter or acp-kernel settings. pip and uv keep their
    usual cache and index settings (so wheels are reused, not fetched again:
    the fresh HOME would otherwise make uv download JupyterLab anew)."""
    pip_cache = subprocess.run([sys.executable, "-m", "pip", "cache", "dir"], capture_output=True,
                               text=True, timeout=60).stdout.strip()
    uv = Path(sys.executable).with_name("uv")
    uv_cache = subprocess.run([str(uv), "cache", "dir"], capture_output=True, text=True,
                              timeout=60).stdout.strip() if uv.is_file() else ""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("JUPYTER", "ACP_", "PYTHON", "XDG_", "VIRTUAL_ENV", "CONDA"))}
    env.update({"PATH": os.pathsep.join([str(bindir), env.get("PATH", "")]), "HOME": str(home),
                "TMPDIR": str(tmpdir)})
    if pip_cache and not pip_cache.startswith("ERROR"):
        env["PIP_CACHE_DIR"] = pip_cache
    if uv_cache and "UV_CACHE_DIR" not in env:
        env["UV_CACHE_DIR"] = uv_cache
    return env


def git_status(checkout: Path, *, ignored: bool = False) -> list[str]:
    args = ["git", "status", "--porcelain"] + (["--ignored"] if ignored else [])
    out = subprocess.run(args, cwd=checkout, capture_output=True, text=True, check=True, timeout=60)
    return out.stdout.splitlines()
