"""The build step that bundles xterm.js: pinned files only, integrity checked.

A local registry on 127.0.0.1 stands in for npm: one serving a tampered
tarball must make the step fail, one serving the right bytes must produce the
vendored files (and nothing else). One serving nothing stands for a build
without network: a loud warning, or a failure for a release build."""

from __future__ import annotations

import base64
import hashlib
import http.server
import importlib.util
import io
import json
import os
import tarfile
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[1]


def load_hook(monkeypatch, registry: str, vendor: Path):
    monkeypatch.setenv("ACP_KERNEL_NPM_REGISTRY", registry)
    spec = importlib.util.spec_from_file_location("hatch_build_under_test", ROOT / "hatch_build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.VENDOR = vendor
    module.STAMP = vendor / "VERSION"
    return module


def tarball(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


@pytest.fixture
def registry():
    """An HTTP server on 127.0.0.1 serving ``routes`` (path -> bytes)."""
    routes: dict[str, bytes] = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's spelling
            body = routes.get(self.path)
            self.send_response(200 if body is not None else 404)
            self.end_headers()
            self.wfile.write(body or b"")

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", routes
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def fake_packages(module, routes: dict[str, bytes]) -> None:
    """Point the pins at small tarballs the local registry serves, with their real integrity."""
    packages = []
    for path, _, files in module.PACKAGES:
        contents = {member: f"// {member}\n//# sourceMappingURL=x.map\n".encode() for member in files}
        data = tarball(contents)
        routes["/" + path] = data
        integrity = "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()
        packages.append((path, integrity, files))
    module.PACKAGES = packages


def test_vendored_files_come_from_the_pinned_tarballs(monkeypatch, tmp_path, registry):
    url, routes = registry
    hook = load_hook(monkeypatch, url, tmp_path / "vendor")
    fake_packages(hook, routes)
    files = hook.vendor()
    names = sorted(p.name for p in files)
    assert names == sorted(["xterm.mjs", "xterm.css", "LICENSE.xterm", "addon-fit.mjs",
                            "LICENSE.addon-fit", "VERSION"])
    mjs = (tmp_path / "vendor" / "xterm.mjs").read_text()
    assert mjs == "// package/lib/xterm.mjs\n"  # the dangling source map line is gone
    routes.clear()  # a second build uses what is there: no network
    assert sorted(p.name for p in hook.vendor()) == names


def test_a_tampered_tarball_is_refused(monkeypatch, tmp_path, registry):
    url, routes = registry
    hook = load_hook(monkeypatch, url, tmp_path / "vendor")
    fake_packages(hook, routes)
    first = "/" + hook.PACKAGES[0][0]
    routes[first] = tarball({"package/lib/xterm.mjs": b"alert('pwned')"})
    with pytest.raises(RuntimeError, match="integrity mismatch"):
        hook.vendor()
    assert not (tmp_path / "vendor" / "xterm.mjs").exists()


def test_the_real_pins_are_sha512():
    spec = importlib.util.spec_from_file_location("hatch_build_pins", ROOT / "hatch_build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for path, integrity, _files in module.PACKAGES:
        assert path.startswith("@xterm/") and integrity.startswith("sha512-")
        assert len(base64.b64decode(integrity[len("sha512-"):])) == 64


def run_hook(hook, target: str = "wheel") -> dict:
    """The hook's ``initialize`` as hatchling calls it for ``target``."""
    build_data: dict = {}
    hook.VendorHook.initialize(SimpleNamespace(target_name=target), "0.1.0", build_data)
    return build_data


def test_a_build_without_the_registry_says_loudly_what_is_missing(monkeypatch, tmp_path, registry, capsys):
    url, routes = registry  # serves nothing: every tarball is a 404
    monkeypatch.delenv("ACP_KERNEL_RELEASE", raising=False)
    hook = load_hook(monkeypatch, url, tmp_path / "vendor")
    build_data = run_hook(hook)
    assert "artifacts" not in build_data
    err = capsys.readouterr().err
    assert "WARNING: xterm.js is NOT bundled" in err
    assert "404" in err  # the cause, as urllib put it
    assert "xterm.mjs, xterm.css" in err and "addon-fit.mjs" in err
    assert "passthrough terminals" in err and "will not draw" in err
    assert "ACP_KERNEL_RELEASE=1" in err


@pytest.mark.parametrize("value", ["1", "yes"])
def test_a_release_build_without_xterm_fails(monkeypatch, tmp_path, registry, capsys, value):
    url, _ = registry
    monkeypatch.setenv("ACP_KERNEL_RELEASE", value)
    hook = load_hook(monkeypatch, url, tmp_path / "vendor")
    with pytest.raises(RuntimeError, match="xterm.js is NOT bundled") as err:
        run_hook(hook)
    assert "passthrough terminals" in str(err.value)


def test_a_release_build_with_xterm_lists_it(monkeypatch, tmp_path, registry):
    url, routes = registry
    monkeypatch.setenv("ACP_KERNEL_RELEASE", "1")
    hook = load_hook(monkeypatch, url, tmp_path / "vendor")
    fake_packages(hook, routes)
    hook.ROOT = tmp_path
    artifacts = run_hook(hook)["artifacts"]
    assert sorted(artifacts) == sorted(f"vendor/{n}" for n in
                                       ["xterm.mjs", "xterm.css", "LICENSE.xterm", "addon-fit.mjs",
                                        "LICENSE.addon-fit", "VERSION"])


def test_only_wheel_builds_fetch(monkeypatch, tmp_path, registry, capsys):
    url, _ = registry
    monkeypatch.setenv("ACP_KERNEL_RELEASE", "1")
    hook = load_hook(monkeypatch, url, tmp_path / "vendor")
    assert run_hook(hook, target="sdist") == {}
    assert capsys.readouterr().err == ""


@pytest.mark.timeout(600)
def test_a_real_wheel_build_without_the_registry(tmp_path, registry):
    """`python -m build --wheel` in a clone, with the npm registry swapped
    for one that has nothing: a development build warns on stderr and makes
    a wheel without xterm.js; a release build fails and makes none."""
    import shutil
    import subprocess
    import sys
    import zipfile

    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs git and a git checkout")
    url, _ = registry
    checkout = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(checkout)], check=True, timeout=120)
    env = {k: v for k, v in os.environ.items() if k != "ACP_KERNEL_RELEASE"}
    env["ACP_KERNEL_NPM_REGISTRY"] = url

    def build(outdir: str, **extra: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(tmp_path / outdir)],
            cwd=checkout, env={**env, **extra}, capture_output=True, text=True, timeout=500,
            stdin=subprocess.DEVNULL)

    dev = build("dev")
    assert dev.returncode == 0, dev.stderr[-3000:]
    assert "xterm.js is NOT bundled" in dev.stderr and "will not draw" in dev.stderr
    (wheel,) = (tmp_path / "dev").glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert not [n for n in names if "/vendor/" in n]
    # The repository's magics/ ships inside the package, never as a top-level "magics".
    assert "acp_kernel/magics/__init__.py" in names and "acp_kernel/magics/runtime.py" in names
    assert not [n for n in names if n.startswith("magics/")]
    # The prebuilt front-end extension, as shared-data: installed where JupyterLab finds it.
    (data,) = {n.split("/")[0] for n in names if n.split("/")[0].endswith(".data")}
    shared = data + "/data/share/jupyter/labextensions/acp-kernel/"
    for rel in ("package.json", "install.json", "source-sha256"):
        assert shared + rel in names, names
    built = json.loads(zipfile.ZipFile(wheel).read(shared + "package.json"))
    assert shared + built["jupyterlab"]["_build"]["load"] in names
    assert not [n for n in names if n.startswith("acp_kernel/labextension/")]  # once, not twice
    # ... and the installed wheel imports it from itself, not through the checkout finder.
    target = tmp_path / "installed"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target), str(wheel)],
                   check=True, timeout=300, capture_output=True)
    probe = subprocess.run(
        [sys.executable, "-c",
         "import sys; sys.path.insert(0, sys.argv[1]); import acp_kernel, acp_kernel.magics as m, acp_kernel._checkout as c; "
         "print(m.__file__); print(any(isinstance(f, c._MagicsFinder) for f in sys.meta_path))", str(target)],
        capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert probe.returncode == 0, probe.stderr[-2000:]
    where, finder = probe.stdout.split()
    assert where == str(target / "acp_kernel" / "magics" / "__init__.py") and finder == "False"

    release = build("release", ACP_KERNEL_RELEASE="1")
    assert release.returncode != 0
    assert "xterm.js is NOT bundled" in release.stdout + release.stderr
    assert not list((tmp_path / "release").glob("*.whl"))
