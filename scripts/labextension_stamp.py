"""The built front-end extension's stamp: a sha256 over the sources it was built from.

``scripts/build-labextension.sh`` writes it into the built output
(``acp_kernel/labextension/source-sha256``); ``tests/test_labextension.py`` computes it
again, so a change to ``labextension/src`` or its package files without a rebuild fails.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "labextension"
BUILT = ROOT / "acp_kernel" / "labextension"
STAMP = BUILT / "source-sha256"
#: What the build reads, besides src/: the package, its pinned tree and the compiler's settings.
FILES = ("package.json", "package-lock.json", "tsconfig.json", "install.json")


def sources(root: Path = SOURCE) -> list[Path]:
    return sorted([root / name for name in FILES] + [p for p in (root / "src").rglob("*") if p.is_file()])


def digest(root: Path = SOURCE) -> str:
    """sha256 over each source's relative path and bytes, in sorted order."""
    h = hashlib.sha256()
    for path in sources(root):
        h.update(path.relative_to(root).as_posix().encode() + b"\0")
        h.update(path.read_bytes() + b"\0")
    return h.hexdigest()


if __name__ == "__main__":
    if sys.argv[1:] != ["write"]:
        print(digest())
    else:
        STAMP.write_text(digest() + "\n")
        print(f"wrote {STAMP.relative_to(ROOT)}")
