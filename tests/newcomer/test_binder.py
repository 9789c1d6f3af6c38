"""Binder builds: binder/ pins a Python that acp-kernel and every dependency
accept, and requires-python says the real floor.

repo2docker itself (``--no-build --debug`` prints the Dockerfile it would
build; no Docker engine needed) tells which Python it picks and what it runs.
uv resolves the dependencies for that Python (``pip compile --python-version``,
in seconds where pip's dry run took minutes), holding every distribution's own
Requires-Python to it: pip before 23.3 did not (pypa/pip#12216: it picked
ipykernel 7.4, which needs 3.11, for Binder's old default 3.10)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
BINDER = ROOT / "binder"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def runtime_python() -> str:
    """binder/runtime.txt's ``python-X.Y``, repo2docker's format."""
    text = (BINDER / "runtime.txt").read_text().strip()
    match = re.fullmatch(r"python-(\d+\.\d+)", text)
    assert match, f"binder/runtime.txt should read python-X.Y, not {text!r}"
    return match.group(1)


def requires_python() -> SpecifierSet:
    return SpecifierSet(PYPROJECT["project"]["requires-python"])


def floor() -> Version:
    """The lowest X.Y that requires-python admits."""
    spec = requires_python()
    lows = [Version(s.version) for s in spec if s.operator in (">=", "~=", "==")]
    assert lows, f"requires-python {spec} has no lower bound"
    low = max(lows)
    return Version(f"{low.major}.{low.minor}")


UV = Path(sys.executable).parent / "uv"


def compile_for(python: str, tmp_path: Path) -> subprocess.CompletedProcess:
    """uv's resolution, for ``python``, of our dependencies plus binder's (wheels only, as Binder's pip installs them)."""
    reqs = tmp_path / f"requirements-{python}.txt"
    extra = [line.strip() for line in (BINDER / "requirements.txt").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    reqs.write_text("\n".join(PYPROJECT["project"]["dependencies"] + extra) + "\n")
    return subprocess.run(
        [str(UV), "pip", "compile", "--quiet", "--no-header", "--python-version", python,
         "--only-binary", ":all:", str(reqs)],
        capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL,
    )


def resolve(python: str, tmp_path: Path) -> dict[str, str]:
    """What would be installed for ``python``, name -> version (there must be a resolution)."""
    out = compile_for(python, tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    pins = (line.split("==") for line in out.stdout.splitlines() if "==" in line and not line.startswith(" "))
    return {name.strip().lower(): version.strip() for name, version in pins}


def test_runtime_txt_pins_a_python_that_requires_python_admits():
    assert requires_python().contains(runtime_python())
    assert Version(runtime_python()) >= floor()


def test_post_build_installs_this_package_and_its_kernelspec():
    lines = [line.strip() for line in (BINDER / "postBuild").read_text().splitlines()]
    assert (BINDER / "postBuild").stat().st_mode & 0o111, "postBuild must be executable"
    installs = [line for line in lines if re.match(r"python3? -m pip install\b", line)]
    assert installs and installs[0].split()[-1] == ".", installs
    assert any(line.startswith("acp-kernel install") for line in lines)


@pytest.mark.skipif(shutil.which("repo2docker") is None and not (Path(sys.executable).parent / "repo2docker").exists(),
                    reason="jupyter-repo2docker is in the test extra")
def test_repo2docker_picks_the_pinned_python_and_runs_post_build():
    exe = shutil.which("repo2docker") or str(Path(sys.executable).parent / "repo2docker")
    out = subprocess.run([exe, "--no-build", "--debug", "--no-run", str(ROOT)], capture_output=True,
                         text=True, timeout=300, stdin=subprocess.DEVNULL)
    log = out.stdout + out.stderr
    assert out.returncode == 0, log[-3000:]
    assert "Python version unspecified" not in log
    picked = re.search(r"Building conda environment for python=(\d+\.\d+)", log)
    assert picked and picked.group(1) == runtime_python(), log[:1000]
    assert f"environment.py-{runtime_python()}-linux-64.lock" in log.replace("-2e", ".").replace("-2d", "-")
    assert 'pip install --no-cache-dir -r "binder/requirements.txt"' in log
    assert "RUN ./binder/postBuild" in log


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_every_dependency_accepts_binders_python_and_the_floor(tmp_path):
    for python in sorted({runtime_python(), str(floor())}):
        installs = resolve(python, tmp_path)
        assert "ipykernel" in installs and "jupyterlab" in installs, f"for Python {python}: {installs}"


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_requires_python_is_not_lower_than_a_dependency_allows(tmp_path):
    """One minor version below the floor, some dependency says no (today:
    ipykernel 7.4 needs 3.11): uv finds no resolution for it and names the
    dependency. Were nothing to say no, the floor would be set higher than needed."""
    low = floor()
    below = f"{low.major}.{low.minor - 1}"
    out = compile_for(below, tmp_path)
    assert out.returncode != 0, f"uv resolved our dependencies for Python {below}:\n{out.stdout}"
    assert re.search(r"depends on Python>=\S+", out.stderr), out.stderr[-3000:]
