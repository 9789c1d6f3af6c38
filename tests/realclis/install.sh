#!/usr/bin/env bash
# Install the six real agent CLIs from their registries into a cache outside the repo.
# Idempotent: a package already at the cached version is not fetched again.
#   REALCLIS_HOME (default /tmp/realclis): npm/ holds the npm CLIs, kimi/ a venv for kimi-cli.
# CI does not run this; the realcli tests run only with ACP_REALCLIS=1 (then skip a CLI that is absent):
#   ACP_REALCLIS=1 python -m pytest -m realcli
set -euo pipefail
ROOT="${REALCLIS_HOME:-/tmp/realclis}"
mkdir -p "$ROOT/npm"
# the ACP adapters of Claude Code and Codex (test_notebook_mcp_real.py)
NPM_PKGS=(@anthropic-ai/claude-code @openai/codex @google/gemini-cli @earendil-works/pi-coding-agent opencode-ai
          @agentclientprotocol/claude-agent-acp @zed-industries/codex-acp)
missing=()
for p in "${NPM_PKGS[@]}"; do
  [ -f "$ROOT/npm/node_modules/$p/package.json" ] || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "npm install ${missing[*]} -> $ROOT/npm"
  npm install --prefix "$ROOT/npm" --no-fund --no-audit --loglevel=error "${missing[@]}"
fi
# the legacy Claude Code adapter (notebook_mcp_real.py --ask --action shell claude-legacy): a prefix of
# its own, so its Agent SDK does not meet claude-agent-acp's
if [ ! -f "$ROOT/legacy/node_modules/@zed-industries/claude-code-acp/package.json" ]; then
  echo "npm install @zed-industries/claude-code-acp -> $ROOT/legacy"
  mkdir -p "$ROOT/legacy"
  npm install --prefix "$ROOT/legacy" --no-fund --no-audit --loglevel=error @zed-industries/claude-code-acp
fi
# kimi-cli needs Python >= 3.12, and its interactive app crashes at start on 3.12.1 (a
# typing/dataclass bug of that release): the first of these found makes its venv.
PY=""
for c in python3.13 "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.13*/bin/python3 python3.12 "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.12*/bin/python3; do
  if command -v "$c" >/dev/null && "$c" -c 'import sys; assert sys.version_info >= (3, 12)' 2>/dev/null; then PY="$c"; break; fi
done
[ -n "$PY" ] || { echo "kimi-cli needs Python >= 3.12; none found" >&2; exit 1; }
want=$("$PY" -c 'import sys; print(sys.version.split()[0])')
have=$("$ROOT/kimi/bin/python" -c 'import sys; print(sys.version.split()[0])' 2>/dev/null || true)
if [ "$want" != "$have" ] || ! "$ROOT/kimi/bin/python" -m kimi_cli.cli --help >/dev/null 2>&1; then
  echo "pip install kimi-cli -> $ROOT/kimi (Python $want)"
  "$PY" -m venv --clear "$ROOT/kimi"
  "$ROOT/kimi/bin/pip" install -q kimi-cli
fi
echo "bin: $ROOT/npm/node_modules/.bin, $ROOT/legacy/node_modules/.bin and $ROOT/kimi/bin"
ls "$ROOT/npm/node_modules/.bin" "$ROOT/kimi/bin" | grep -E '^(claude|codex|gemini|pi|opencode|kimi|claude-agent-acp|codex-acp)$' || true
