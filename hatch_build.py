"""Build hook: bundle xterm.js into the package at build time (no CDN at run time).

The passthrough terminal widget renders with xterm.js. Its prebuilt ES
modules come from the npm registry as pinned tarballs whose sha512 integrity
is checked before anything is extracted; only the files the widget loads
(and the licences) land in ``acp_kernel/view/static/vendor/``. Node is not
needed. Runs for wheel and editable builds; ``python hatch_build.py`` does the
same by hand in a source checkout.

Without network a development build still succeeds, with a loud warning on
stderr naming what is missing (the passthrough terminal then cannot draw and
falls back to plain text); a release build (``ACP_KERNEL_RELEASE=1``) fails
instead, so no published wheel lacks xterm.js.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import sys
import tarfile
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENDOR = ROOT / "acp_kernel" / "view" / "static" / "vendor"
REGISTRY = os.environ.get("ACP_KERNEL_NPM_REGISTRY", "https://registry.npmjs.org").rstrip("/")

#: (tarball path on the registry, sha512 integrity, {member in the tarball: file name in vendor/})
PACKAGES = [
    (
        "@xterm/xterm/-/xterm-6.0.0.tgz",
        "sha512-TQwDdQGtwwDt+2cgKDLn0IRaSxYu1tSUjgKarSDkUM0ZNiSRXFpjxEsvc/Zgc5kq5omJ+V0a8/kIM2WD3sMOYg==",
        {"package/lib/xterm.mjs": "xterm.mjs", "package/css/xterm.css": "xterm.css",
         "package/LICENSE": "LICENSE.xterm"},
    ),
    (
        "@xterm/addon-fit/-/addon-fit-0.11.0.tgz",
        "sha512-jYcgT6xtVYhnhgxh3QgYDnnNMYTcf8ElbxxFzX0IZo+vabQqSPAjC3c1wJrKB5E19VwQei89QCiZZP86DCPF7g==",
        {"package/lib/addon-fit.mjs": "addon-fit.mjs", "package/LICENSE": "LICENSE.addon-fit"},
    ),
]
STAMP = VENDOR / "VERSION"
#: Set (to anything but "" or "0") for a release build: no xterm.js, no wheel.
RELEASE_ENV = "ACP_KERNEL_RELEASE"


def _stamp_text() -> str:
    return "\n".join(path for path, _, _ in PACKAGES) + "\n"


def _fetch(path: str, integrity: str) -> bytes:
    with urllib.request.urlopen(f"{REGISTRY}/{path}", timeout=60) as response:
        data = response.read()
    algo, _, expected = integrity.partition("-")
    got = base64.b64encode(hashlib.new(algo, data).digest()).decode()
    if got != expected:
        raise RuntimeError(f"{path}: integrity mismatch (got {algo}-{got})")
    return data


def _strip_source_map(text: bytes) -> bytes:
    """The maps are not shipped; a dangling ``sourceMappingURL`` would only 404."""
    lines = text.rstrip(b"\n").split(b"\n")
    if lines and lines[-1].startswith(b"//# sourceMappingURL="):
        lines.pop()
    return b"\n".join(lines) + b"\n"


def vendor(force: bool = False) -> list[Path]:
    """Download and extract the pinned files unless they are already there."""
    wanted = [VENDOR / name for _, _, files in PACKAGES for name in files.values()]
    if not force and STAMP.exists() and STAMP.read_text() == _stamp_text() and all(p.exists() for p in wanted):
        return wanted + [STAMP]
    VENDOR.mkdir(parents=True, exist_ok=True)
    for path, integrity, files in PACKAGES:
        with tarfile.open(fileobj=io.BytesIO(_fetch(path, integrity)), mode="r:gz") as tar:
            for member, name in files.items():
                extracted = tar.extractfile(member)
                if extracted is None:
                    raise RuntimeError(f"{path}: {member} is not a file")
                data = extracted.read()
                if name.endswith(".mjs"):
                    data = _strip_source_map(data)
                (VENDOR / name).write_bytes(data)
    STAMP.write_text(_stamp_text())
    return wanted + [STAMP]


def release_build() -> bool:
    return os.environ.get(RELEASE_ENV, "") not in ("", "0")


def missing_bundle_message(exc: BaseException) -> str:
    """What a build without xterm.js lacks, what that breaks, and how to fix it."""
    missing = [name for _, _, files in PACKAGES for name in files.values()
               if not (VENDOR / name).exists()]
    rule = "=" * 78
    where = VENDOR.relative_to(ROOT) if VENDOR.is_relative_to(ROOT) else VENDOR
    return "\n".join([
        rule,
        f"acp-kernel build WARNING: xterm.js is NOT bundled into this build ({exc}).",
        f"  missing from {where}/: {', '.join(missing) or '(the VERSION stamp)'}",
        "  effect: passthrough terminals (%passthrough, %auth) will not draw; the widget shows",
        "          plain text instead.",
        f"  fix: build with access to {REGISTRY} (or set ACP_KERNEL_NPM_REGISTRY to a mirror),",
        "       or run `python hatch_build.py` once with network, then build again.",
        f"  A release build ({RELEASE_ENV}=1) stops here instead of making this wheel.",
        rule,
    ])


try:
    from hatchling.builders.hooks.plugin.interface import BuildHookInterface
except ImportError:  # run by hand, outside a build
    BuildHookInterface = object  # type: ignore[misc,assignment]


class VendorHook(BuildHookInterface):  # type: ignore[misc,valid-type]
    """Puts the vendored files into wheels (they are git-ignored, so listed as artifacts),
    and the magics under the package."""

    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict) -> None:
        if self.target_name != "wheel":  # editable installs are wheel builds too
            return
        if version != "editable":
            # The repository's top-level magics/ ships inside the package, as
            # acp_kernel.magics (an editable install finds it through
            # acp_kernel/_checkout.py instead: hatchling cannot map a folder
            # under another package in dev mode).
            build_data.setdefault("force_include", {})[str(ROOT / "magics")] = "acp_kernel/magics"
        try:
            files = vendor()
        except Exception as exc:  # noqa: BLE001 - a development build without network still works
            message = missing_bundle_message(exc)
            if release_build():
                raise RuntimeError(message) from exc
            print(message, file=sys.stderr, flush=True)
            return
        build_data.setdefault("artifacts", []).extend(str(p.relative_to(ROOT)) for p in files)


if __name__ == "__main__":
    for p in vendor(force="--force" in sys.argv):
        print(p.relative_to(ROOT))
