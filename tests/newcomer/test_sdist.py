"""The source release carries the project and its licence, and none of what
running the tests and scripts leaves in a checkout (hypothesis' database,
browser screenshots, the .venv, caches, the fetched xterm.js)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile

import pytest

from .machine import ROOT, clone_head

pytestmark = pytest.mark.skipif(
    shutil.which("git") is None or not (ROOT / ".git").exists(), reason="needs git and a git checkout"
)

#: What a checkout holds after `scripts/test.sh` and `scripts/demo.sh`; none of it is source.
LEFTOVERS = {
    ".hypothesis/examples/0a/1b": b"x",
    "tests/.hypothesis/examples/2c": b"x",
    "tests/browser/artifacts/tools.png": b"\x89PNG",
    "tests/browser/artifacts/FAILED-x.ipynb.png": b"\x89PNG",
    "tests/browser/artifacts/x.ipynb.console.log": b"log",
    ".venv/bin/python": b"",
    ".venv/pyvenv.cfg": b"home = /usr/bin\n",
    ".pytest_cache/v/cache/lastfailed": b"{}",
    ".benchmarks/Linux/0001.json": b"{}",
    "acp_kernel/__pycache__/cli.cpython-311.pyc": b"",
    "tests/__pycache__/conftest.cpython-311-pytest-8.pyc": b"",
    "acp_kernel/view/static/vendor/xterm.mjs": b"//",
    "notebooks/.ipynb_checkpoints/01-acp-kernel-tour-checkpoint.ipynb": b"{}",
    "benchmarks/.node/node": b"",
    "labextension/node_modules/@jupyterlab/application/package.json": b"{}",
    "labextension/lib/index.js": b"//",
    "labextension/tsconfig.tsbuildinfo": b"{}",
}

EXPECTED = [
    "LICENSE", "README.md", "pyproject.toml", "hatch_build.py", "PKG-INFO",
    "acp_kernel/__init__.py", "acp_kernel/kernelspec/acp/kernel.json", "magics/__init__.py",
    "tests/conftest.py", "tests/agents/scripted_agent.py", "tests/browser/conftest.py",
    "notebooks/01-acp-kernel-tour.ipynb", "binder/runtime.txt", "binder/postBuild",
    "scripts/demo.sh", "scripts/test.sh", "scripts/project-venv.sh",
    "labextension/src/index.ts", "labextension/package.json", "labextension/package-lock.json",
    "acp_kernel/labextension/package.json", "scripts/build-labextension.sh",
]


@pytest.mark.timeout(600)
def test_the_sdist_holds_the_project_and_no_leftovers(tmp_path):
    checkout = clone_head(tmp_path / "clone")
    for rel, data in LEFTOVERS.items():
        path = checkout / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    dist = tmp_path / "dist"
    out = subprocess.run([sys.executable, "-m", "build", "--sdist", "--no-isolation", "--outdir", str(dist)],
                         cwd=checkout, capture_output=True, text=True, timeout=500, stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    (sdist,) = dist.glob("acp_kernel-*.tar.gz")
    with tarfile.open(sdist) as tar:
        top = sdist.name[: -len(".tar.gz")]
        names = [n.removeprefix(top + "/") for n in tar.getnames()]
        pkg_info = tar.extractfile(f"{top}/PKG-INFO").read().decode()
        licence = tar.extractfile(f"{top}/LICENSE").read().decode()

    junk = (".hypothesis/", ".venv/", ".pytest_cache/", ".benchmarks/", "__pycache__/", ".pyc",
            "/artifacts/", "/vendor/", "/.ipynb_checkpoints/", "/.node/",
            "/node_modules/", "labextension/lib/", ".tsbuildinfo")
    leaked = [n for n in names if n in LEFTOVERS or any(j in "/" + n + "/" for j in junk)]
    assert not leaked, leaked
    missing = [n for n in EXPECTED if n not in names]
    assert not missing, missing
    assert "License-Expression: BSD-3-Clause" in pkg_info
    assert "License-File: LICENSE" in pkg_info
    assert licence.startswith("BSD 3-Clause License") and "acp-kernel developers" in licence
