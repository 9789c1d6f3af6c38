#!/usr/bin/env bash
# Install everything the tests need (the package, its test extra, JupyterLab,
# Playwright and Debian's Chromium) and run the whole suite. Extra arguments
# go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q -e ".[test,lab]"
bash scripts/install-browser-deps.sh
# The browser deps are installed above, so the browser tests must run, not skip.
export ACP_REQUIRE_BROWSER=1
exec python3 -m pytest -q "$@"
