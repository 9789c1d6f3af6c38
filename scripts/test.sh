#!/usr/bin/env bash
# Install everything the tests need into the project's .venv (made on first
# run: the package with its test and lab extras, Playwright), Debian's
# Chromium with apt-get (root or sudo; skipped when already there), run the
# gates (scripts/lint.sh) and then the whole suite. Extra arguments go to
# pytest, e.g. `-m "not slow"`.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/project-venv.sh
ensure_venv "$PWD"

step "installing acp-kernel with its test and lab extras into .venv (first run: about a minute, as it downloads; later: seconds)"
venv_install -e ".[test,lab]"
check_xterm_bundle
step "checking the browser tests' dependencies (Chromium, fonts, Playwright, JupyterLab extensions)"
PYTHON="$VENV_PYTHON" bash scripts/install-browser-deps.sh
# The browser deps are installed above, so the browser tests must run, not skip.
export ACP_REQUIRE_BROWSER=1
# The gates first (seconds, not minutes): lint, layers and types. A red gate stops the run
# before the suite starts; `bash scripts/lint.sh` runs them alone.
step "running the gates (scripts/lint.sh: ruff, lazy imports, import layers, mypy)"
PYTHON="$VENV_PYTHON" bash scripts/lint.sh
# Four workers on a 2-core machine: tests wait on processes (kernels, agents, PTYs, a
# browser) between bursts of CPU; with bytecode cached (below) the run uses about 650
# CPU-seconds, and on a quiet machine `.ci/run` took 463 s from a fresh clone with four
# workers where CI's last run with three took 545 s. Tests that share servers
# (JupyterLab, Chromium, the real CLIs) run in groups, one worker each (tests/conftest.py
# groups them and stops the run if pytest-xdist loses a group); `-n 0` runs everything in
# this process.
step "running the tests (the whole suite on four workers)"
# The suite starts hundreds of Python processes (kernels, agents, servers, pytest's own
# workers): with PYTHONDONTWRITEBYTECODE set (as on this project's CI machines), each one
# compiles every module it imports anew, a JupyterLab server 1-2 CPU-s more, and pytest
# rewrites every test module in every worker. Cached bytecode is safe (Python checks each
# source's mtime), so the test run writes it.
unset PYTHONDONTWRITEBYTECODE
exec python -m pytest -n 4 --dist loadgroup -o console_output_style=count "$@"
