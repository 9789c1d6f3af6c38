#!/usr/bin/env bash
# Install acp-kernel with JupyterLab into the project's .venv (made on first
# run) and open the tour notebook on the demo agent (no API key needed).
# `--headless` runs both demo notebooks through nbclient and the demo agent's
# tour in the terminal instead, all in a temporary directory, and prints where
# the executed copies are. Nothing is written to the checkout but .venv (and
# the git-ignored xterm.js bundle).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/project-venv.sh
ensure_venv "$PWD"

step "installing acp-kernel + JupyterLab into .venv (first run: about a minute, as it downloads; later: seconds)"
venv_install -e ".[lab]"
check_xterm_bundle
# The kernelspecs of this .venv ("ACP Agent", Python 3) before any a user-wide
# install may have left in ~/.local/share/jupyter from another Python.
export JUPYTER_PATH="$VENV/share/jupyter${JUPYTER_PATH:+:$JUPYTER_PATH}"

if [[ "${1:-}" == "--headless" ]]; then
    out="$(mktemp -d "${TMPDIR:-/tmp}/acp-kernel-demo.XXXXXX")"
    # The demo agent writes its files in its working directory, and keeps its
    # state (and the kernel its session list) where these say: all in $out.
    export ACP_DEMO_STATE_DIR="$out/demo-state"
    export ACP_KERNEL_STATE="$out/sessions.json"
    cp notebooks/*.ipynb "$out/"
    cd "$out"
    for nb in *.ipynb; do
        step "running $nb (headless, demo agent)"
        jupyter execute --inplace "$nb"
    done
    step "running the demo agent's tour: acp-kernel prompt --agent demo --permissions allow-all tour"
    python -m acp_kernel prompt --agent demo --permissions allow-all tour
    step "done; executed notebooks and the demo agent's files are in $out"
    exit 0
fi
args=(--ip=127.0.0.1 --ServerApp.root_dir="$PWD")
[[ "$(id -u)" == 0 ]] && args+=(--allow-root)
step "starting JupyterLab on 127.0.0.1 (Ctrl-C stops it)"
exec jupyter lab "${args[@]}" notebooks/01-acp-kernel-tour.ipynb
