"""The README's first command, as a newcomer runs it: `bash scripts/demo.sh
--headless` in a fresh clone, with a system Python that refuses system-wide
installs. It must make its own .venv, run the demos, write its files only to a
temporary directory, and leave the checkout clean."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from .machine import ROOT, clone_head, externally_managed_python, git_status, newcomer_env, site_dirs

pytestmark = pytest.mark.skipif(
    shutil.which("git") is None or not (ROOT / ".git").exists(), reason="needs git and a git checkout"
)

#: What the demo may leave in the checkout: all git-ignored.
ALLOWED_IGNORED = (".venv/", "acp_kernel/view/static/vendor/")


@pytest.fixture(scope="module")
def newcomer(tmp_path_factory) -> dict[str, Path | dict[str, str]]:
    base = tmp_path_factory.mktemp("newcomer")
    bindir = externally_managed_python(base / "system-python")
    (base / "home").mkdir()
    (base / "tmp").mkdir()
    return {"base": base, "bin": bindir, "env": newcomer_env(bindir, base / "home", base / "tmp")}


def test_the_stand_in_python_refuses_system_wide_installs(newcomer):
    """The premise: this python3 is one a plain `pip install` fails on."""
    env = newcomer["env"]
    assert shutil.which("python3", path=env["PATH"]) == str(newcomer["bin"] / "python3")
    out = subprocess.run(["python3", "-m", "pip", "install", "--dry-run", "--no-deps", "six"],
                         env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert out.returncode != 0
    assert "externally-managed-environment" in out.stdout + out.stderr


def test_a_script_that_installs_outside_a_venv_fails_here(newcomer, tmp_path):
    """The check below can fail: the old demo.sh's first step (pip into
    whatever python3 is first on PATH) stops at once on this machine."""
    checkout = clone_head(tmp_path / "clone")
    script = checkout / "scripts" / "demo.sh"
    lines = script.read_text().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.startswith("cd "))
    lines.insert(at + 1, 'python3 -m pip install -e ".[lab]"\n')
    script.write_text("".join(lines))
    out = subprocess.run(["bash", "scripts/demo.sh", "--headless"], cwd=checkout, env=newcomer["env"],
                         capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert out.returncode != 0
    assert "externally-managed-environment" in out.stdout + out.stderr
    assert not (checkout / ".venv").exists()


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_headless_demo_in_a_fresh_clone_with_an_externally_managed_python(newcomer):
    base: Path = newcomer["base"]
    env: dict[str, str] = newcomer["env"]
    checkout = clone_head(base / "clone")
    assert git_status(checkout) == []

    out = subprocess.run(["bash", "scripts/demo.sh", "--headless"], cwd=checkout, env=env,
                         capture_output=True, text=True, timeout=1700, stdin=subprocess.DEVNULL)
    log = out.stdout + out.stderr
    assert out.returncode == 0, log[-6000:]

    # It said what it was doing, made its own venv, and used it.
    assert f"==> creating {checkout}/.venv with {newcomer['bin']}/python3" in out.stdout, out.stdout[:2000]
    assert "==> installing acp-kernel + JupyterLab into .venv" in out.stdout
    assert (checkout / ".venv" / "pyvenv.cfg").read_text().count(str(newcomer["bin"])) >= 1
    system_site = [p.name for d in site_dirs(newcomer["bin"] / "python3") if d.is_dir() for p in d.iterdir()]
    assert system_site == ["pip"]  # nothing was installed into the system python

    # Everything it ran and wrote is in the temp dir it named.
    done = [line for line in out.stdout.splitlines() if line.startswith("==> done;")]
    assert len(done) == 1, out.stdout[-3000:]
    demo_dir = Path(done[0].rsplit(" in ", 1)[1])
    assert demo_dir.parent == base / "tmp"
    for name in ("01-acp-kernel-tour.ipynb", "02-magics.ipynb"):
        cells = json.loads((demo_dir / name).read_text())["cells"]
        outputs = [o for c in cells if c["cell_type"] == "code" for o in c["outputs"]]
        assert outputs and not [o for o in outputs if o["output_type"] == "error"], name
    # A clean first run: the steps that ask (a shell command, a file write) ran under allow-all.
    tour = {"".join(c["source"]): json.dumps(c["outputs"]) for c in
            json.loads((demo_dir / "01-acp-kernel-tour.ipynb").read_text())["cells"] if c["cell_type"] == "code"}
    assert "line 5 from" in tour["shell"] and "exit code 0" in tour["shell"], tour["shell"][-2000:]
    assert "Permission granted" in tour["permission"] and "✗ failed" not in tour["files"]
    assert "permission policy allow-all" in out.stdout
    assert (demo_dir / "acp-demo-notes.md").is_file()
    assert (demo_dir / "demo-permission.txt").is_file()
    assert "That was the tour." in out.stdout

    # The checkout is as cloned: nothing new but git-ignored build products.
    assert git_status(checkout) == []
    for line in git_status(checkout, ignored=True):
        path = line[3:]
        assert path.startswith(ALLOWED_IGNORED) or path.endswith("__pycache__/"), line
