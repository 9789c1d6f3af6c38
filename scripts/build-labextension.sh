#!/usr/bin/env bash
# Build the JupyterLab 4 / Notebook 7 front-end extension (labextension/) into
# acp_kernel/labextension/, the prebuilt bundle that is committed and shipped in the
# wheel (`pip install` needs no Node). Run after any change to labextension/src or its
# package files; tests/test_labextension.py fails until you do. Needs node and npm (20+)
# and the project's .venv (scripts/test.sh makes it) for JupyterLab's builder.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-$PWD/.venv/bin/python}"
[[ -x "$PYTHON" ]] || { echo "error: no $PYTHON: run scripts/test.sh first (it makes .venv), or set PYTHON" >&2; exit 2; }
# JupyterLab's builder (`jupyter labextension build` is `jupyter-builder build` since
# JupyterLab 4.6), from the venv; its node half (@jupyter/builder) and the shared
# packages' versions (@jupyterlab/core-meta) are pinned in package-lock.json.
export PATH="$(dirname "$PYTHON"):$PATH"
command -v npm >/dev/null || { echo "error: npm is needed to build the extension" >&2; exit 2; }
cd labextension
npm ci --no-audit --no-fund
npx tsc -p .
rm -rf ../acp_kernel/labextension
jupyter-builder build .
cp install.json ../acp_kernel/labextension/  # who installed it, for `jupyter labextension list`
cd ..
"$PYTHON" scripts/labextension_stamp.py write
