#!/usr/bin/env bash
# Install acp-kernel with JupyterLab and open the tour notebook on the demo agent
# (no API key needed). `--headless` runs both demo notebooks through nbclient
# instead and prints where the executed copies are.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q -e ".[lab]"
if [[ "${1:-}" == "--headless" ]]; then
    out="$(mktemp -d)"
    cp notebooks/*.ipynb "$out/"
    for nb in "$out"/*.ipynb; do
        (cd "$out" && jupyter execute --inplace "$(basename "$nb")")
    done
    python3 -m acp_kernel prompt --agent demo --permissions allow-all tour
    echo "executed notebooks: $out"
    exit 0
fi
args=(--ip=127.0.0.1 --ServerApp.root_dir="$PWD")
[[ "$(id -u)" == 0 ]] && args+=(--allow-root)
exec jupyter lab "${args[@]}" notebooks/01-acp-kernel-tour.ipynb
