#!/usr/bin/env bash
# The gates that catch what tests miss, each in seconds: ruff (pyflakes, bugbear,
# syntax), no import of the package's own modules hidden in a function, the
# layer contracts (import-linter, pyproject.toml) and mypy. scripts/test.sh runs
# this before pytest; on its own: `bash scripts/lint.sh` (with the `test` extra
# installed: the project's .venv after scripts/test.sh, or any environment).
# Every gate runs; the exit status is 1 if any was red.
set -uo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-}"
if [[ -z "$PY" ]]; then
    if [[ -x .venv/bin/python ]]; then PY=.venv/bin/python; else PY=python3; fi
fi
failed=()
gate() {
    local name="$1"; shift
    local start=$SECONDS
    printf '==> %s\n' "$name"
    if "$@"; then
        printf '    %s: green (%d s)\n' "$name" $((SECONDS - start))
    else
        printf '    %s: RED (%d s)\n' "$name" $((SECONDS - start))
        failed+=("$name")
    fi
}
gate "ruff" "$PY" -m ruff check
gate "lazy imports" "$PY" scripts/check_lazy_imports.py
# lint-imports sits next to the interpreter (a venv's bin, or PATH).
LINT_IMPORTS="$(dirname "$(command -v "$PY")")/lint-imports"
[[ -x "$LINT_IMPORTS" ]] || LINT_IMPORTS=lint-imports
gate "import layers" "$LINT_IMPORTS" --no-cache
gate "mypy" "$PY" -m mypy
if ((${#failed[@]})); then
    printf 'lint: red: %s\n' "${failed[*]}" >&2
    exit 1
fi
echo "lint: all gates green"
