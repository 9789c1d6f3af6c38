#!/usr/bin/env bash
# Install what tests/browser needs: Debian's chromium, JupyterLab and the
# Playwright Python package (driven with executable_path=/usr/bin/chromium;
# `playwright install` is never run: its browser download is not used here).
# Idempotent: safe to run again. Needs apt-get, and root (or sudo) for it
# when chromium or the emoji font is missing. Python packages go into
# $PYTHON's environment: the project's .venv by default (scripts/test.sh makes
# it), never a system Python.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/project-venv.sh  # venv_install

if [[ -z "${PYTHON:-}" ]]; then
  [[ -x .venv/bin/python ]] || { echo "error: no .venv here: run scripts/test.sh (it makes one), or set PYTHON" >&2; exit 2; }
  PYTHON=.venv/bin/python
fi
CHROMIUM="${CHROMIUM:-/usr/bin/chromium}"

# chromium itself, and a colour emoji font: the tool call rows' kind icons are
# emoji, and screenshots of a font-less container show empty boxes instead.
apt_packages=()
[ -x "$CHROMIUM" ] || apt_packages+=(chromium)
dpkg -s fonts-noto-color-emoji >/dev/null 2>&1 || apt_packages+=(fonts-noto-color-emoji)
if [ "${#apt_packages[@]}" -gt 0 ]; then
  echo "==> installing ${apt_packages[*]} with apt-get"
  command -v apt-get >/dev/null 2>&1 || {
    echo "error: the browser tests need ${apt_packages[*]} and this is not a Debian/Ubuntu system (no apt-get): install them by hand (set CHROMIUM=/path/to/chromium)" >&2
    exit 2
  }
  SUDO=""
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null 2>&1 || { echo "error: apt-get needs root: run as root, or install sudo" >&2; exit 2; }
    SUDO="sudo"
  fi
  $SUDO apt-get update
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends "${apt_packages[@]}"
fi
"$CHROMIUM" --version 2>/dev/null

# jupyterlab_widgets (ipywidgets' labextension) and anywidget's labextension
# ship as prebuilt extensions inside these Python packages; acp-kernel's own
# (labextension/) inside acp-kernel, installed before this runs (scripts/test.sh).
echo "==> installing JupyterLab, Playwright, ipywidgets and anywidget into $("$PYTHON" -c 'import sys; print(sys.prefix)')"
VENV_PYTHON="$PYTHON" venv_install jupyterlab playwright ipywidgets anywidget

"$PYTHON" -m jupyter lab --version
listing="$("$PYTHON" -m jupyter labextension list 2>&1)"
echo "$listing"
missing=0
for ext in "@jupyter-widgets/jupyterlab-manager" "anywidget" "acp-kernel"; do
  if ! printf '%s\n' "$listing" | grep -E "^[[:space:]]*${ext}[[:space:]].*enabled.*OK" >/dev/null; then
    echo "ERROR: the JupyterLab extension ${ext} is not installed, enabled and OK" >&2
    missing=1
  fi
done
"$PYTHON" -c "import playwright.sync_api" 
exit "$missing"
