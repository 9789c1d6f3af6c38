#!/usr/bin/env bash
# Install acp-kernel with JupyterLab into the project's .venv (made on first
# run) and open the tour notebook on the demo agent (no API key needed), in a
# workspace folder of its own (demo-workspace/, git-ignored: the notebooks are
# copied there once, and the agent's files go there, not into notebooks/).
# `--headless` runs both demo notebooks through nbclient and the demo agent's
# tour in the terminal instead, all in a temporary directory, and prints where
# the executed copies are. Nothing else is written to the checkout but .venv
# (and the git-ignored xterm.js bundle).
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
    # Nobody can click a question in a headless run: the demo agent's requests (a shell
    # command, a file write) are allowed, so each step of the tour runs instead of being
    # rejected. The agent is a script and works only in $out.
    export ACP_KERNEL_PERMISSIONS=allow-all
    cp notebooks/*.ipynb "$out/"
    cd "$out"
    step "the notebooks run with the permission policy allow-all: nobody is there to answer the questions"
    for nb in *.ipynb; do
        step "running $nb (headless, demo agent)"
        jupyter execute --inplace "$nb"
    done
    step "running the demo agent's tour: acp-kernel prompt --agent demo --permissions allow-all tour"
    python -m acp_kernel prompt --agent demo --permissions allow-all tour
    step "done; executed notebooks and the demo agent's files are in $out"
    exit 0
fi
workspace="$PWD/demo-workspace"
mkdir -p "$workspace"
for nb in notebooks/*.ipynb; do  # copied once: your edits there are kept
    [[ -e "$workspace/$(basename "$nb")" ]] || cp "$nb" "$workspace/"
done
args=(--ip=127.0.0.1 --ServerApp.root_dir="$workspace")
[[ "$(id -u)" == 0 ]] && args+=(--allow-root)
step "the demo's workspace: $workspace (the agent's files go here; the notebooks were copied from notebooks/)"
step "starting JupyterLab on 127.0.0.1 (Ctrl-C stops it)"
exec jupyter lab "${args[@]}" "$workspace/01-acp-kernel-tour.ipynb"
