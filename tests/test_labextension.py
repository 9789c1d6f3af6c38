"""The prebuilt front-end extension (labextension/ built into acp_kernel/labextension/):
the committed bundle is the build of the committed sources, and this environment's
JupyterLab lists it enabled and OK (scripts/test.sh installs the package editable,
which copies the shared-data into .venv/share/jupyter/labextensions)."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BUILT = ROOT / "acp_kernel" / "labextension"
REBUILD = "run `bash scripts/build-labextension.sh` and commit acp_kernel/labextension/"


def stamp_module():
    spec = importlib.util.spec_from_file_location("labextension_stamp", ROOT / "scripts" / "labextension_stamp.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_built_bundle_is_the_build_of_the_sources() -> None:
    stamp = stamp_module()
    assert stamp.STAMP.exists(), f"no build stamp: {REBUILD}"
    assert stamp.STAMP.read_text().strip() == stamp.digest(), (
        f"labextension/src or its package files changed since the last build: {REBUILD}")


def test_the_stamp_covers_the_sources_and_the_package_files(tmp_path) -> None:
    stamp = stamp_module()
    copy = tmp_path / "labextension"
    (copy / "src").mkdir(parents=True)
    for path in stamp.sources():
        target = copy / path.relative_to(stamp.SOURCE)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(path.read_bytes())
    before = stamp.digest(copy)
    assert before == stamp.digest()
    (copy / "src" / "index.ts").write_text((copy / "src" / "index.ts").read_text() + "\n")
    assert stamp.digest(copy) != before
    (copy / "src" / "index.ts").write_bytes((stamp.SOURCE / "src" / "index.ts").read_bytes())
    (copy / "src" / "new.ts").write_text("export {};\n")
    assert stamp.digest(copy) != before
    (copy / "src" / "new.ts").unlink()
    package = json.loads((copy / "package.json").read_text())
    package["dependencies"]["left-pad"] = "1.0.0"
    (copy / "package.json").write_text(json.dumps(package))
    assert stamp.digest(copy) != before


def test_the_bundle_names_its_entry_point() -> None:
    package = json.loads((BUILT / "package.json").read_text())
    assert package["name"] == "acp-kernel"
    load = package["jupyterlab"]["_build"]["load"]
    assert (BUILT / load).is_file(), load
    assert json.loads((BUILT / "install.json").read_text())["packageName"] == "acp-kernel"


def test_jupyterlab_lists_the_extension_enabled_and_ok() -> None:
    """What the browser tests load: this environment's copy is enabled, OK and current."""
    pytest.importorskip("jupyterlab")
    out = subprocess.run([sys.executable, "-m", "jupyter", "labextension", "list"], capture_output=True,
                         text=True, timeout=120, stdin=subprocess.DEVNULL, env={"NO_COLOR": "1", **_env()})
    listing = re.sub(r"\x1b\[[0-9;]*m", "", out.stdout + out.stderr)
    assert re.search(r"^\s*acp-kernel v\S+ enabled OK \(python, acp-kernel\)", listing, re.M), listing
    installed = Path(sys.prefix) / "share" / "jupyter" / "labextensions" / "acp-kernel" / "source-sha256"
    if installed.exists():  # an editable install copies the bundle: a stale copy means reinstall
        assert installed.read_text() == (BUILT / "source-sha256").read_text(), (
            "this environment holds an older build of the extension: reinstall (scripts/test.sh does)")


def _env() -> dict[str, str]:
    """No test run's JUPYTER_PATH or config: the environment's own extensions."""
    return {k: v for k, v in os.environ.items() if not k.startswith("JUPYTER")}


def test_the_page_and_the_kernel_agree_on_the_comm() -> None:
    """The TypeScript constants against docwire's: the target, the protocol, and ceilings no
    lower than the caps the kernel asks for (the page clamps to them)."""
    from acp_kernel.notebook_mcp import docwire

    source = (ROOT / "labextension" / "src" / "index.ts").read_text()
    assert f"const TARGET = '{docwire.DOCUMENT_TARGET}';" in source
    assert f"const PROTOCOL = {docwire.PROTOCOL};" in source
    block = source[source.index("const CEILINGS: Caps = {"):]
    block = block[: block.index("};")]
    ceilings = {k: int(v.replace("_", "")) for k, v in re.findall(r"(\w+): ([\d_]+)", block)}
    caps = docwire.Caps().model_dump()
    assert set(ceilings) == set(caps)
    assert all(ceilings[k] >= caps[k] for k in caps), (ceilings, caps)
