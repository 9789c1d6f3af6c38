"""The build step that bundles xterm.js: pinned files only, integrity checked.

A local registry on 127.0.0.1 stands in for npm: one serving a tampered
tarball must make the step fail, one serving the right bytes must produce the
vendored files (and nothing else)."""

from __future__ import annotations

import base64
import hashlib
import http.server
import importlib.util
import io
import tarfile
import threading
from pathlib import Path

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
    for path, integrity, files in module.PACKAGES:
        assert path.startswith("@xterm/") and integrity.startswith("sha512-")
        assert len(base64.b64decode(integrity[len("sha512-"):])) == 64
