# Sourced by demo.sh and test.sh (not run on its own): make or reuse the
# project's virtual environment, .venv in the checkout, and put it first on
# PATH. Everything the scripts install goes there, so they work with a system
# Python that refuses system-wide installs (PEP 668, "externally-managed-
# environment": Debian 12, Ubuntu 23.04 and later).
#
# PYTHON=/path/to/python3.x picks the interpreter that makes the venv;
# otherwise the first of python3, python3.13, python3.12, python3.11 that is
# 3.11 or newer (acp-kernel's floor: ipykernel 7.4 needs it).

step() { printf '==> %s\n' "$*"; }
die() { printf 'error: %s\n' "$*" >&2; exit 2; }

# The interpreter to make the venv with: new enough, or a clear message.
_pick_python() {
    local candidates=("${PYTHON:-}" python3 python3.13 python3.12 python3.11) py
    for py in "${candidates[@]}"; do
        [[ -n "$py" ]] && command -v "$py" >/dev/null 2>&1 || continue
        if "$py" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
            command -v "$py"
            return 0
        fi
        [[ -n "${PYTHON:-}" ]] && die "PYTHON=$PYTHON is $("$py" -V 2>&1); acp-kernel needs Python 3.11 or newer"
    done
    die "acp-kernel needs Python 3.11 or newer, and python3 here is $(python3 -V 2>&1 || echo missing). Install one (e.g. apt-get install python3.11, or pyenv) and run again with PYTHON=/path/to/python3.11"
}

# Debian and Ubuntu ship venv's pip bootstrap (ensurepip) as a separate package.
_install_venv_package() {
    local py="$1" version
    version="$("$py" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')"
    command -v apt-get >/dev/null 2>&1 \
        || die "$py cannot make a virtual environment (no ensurepip); install its venv module and run again"
    local sudo=""
    if [[ "$(id -u)" != 0 ]]; then
        command -v sudo >/dev/null 2>&1 \
            || die "$py cannot make a virtual environment; as root run: apt-get install python3-venv python${version}-venv"
        sudo="sudo"
    fi
    step "installing python${version}-venv with apt-get (Debian/Ubuntu ship venv's pip separately)"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "python${version}-venv" \
        || DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq python3-venv
}

# ensure_venv ROOT: sets VENV and VENV_PYTHON, exports VIRTUAL_ENV and PATH.
ensure_venv() {
    VENV="$1/.venv"
    VENV_PYTHON="$VENV/bin/python"
    if [[ -x "$VENV_PYTHON" ]] && "$VENV_PYTHON" -m pip --version >/dev/null 2>&1; then
        step "using $VENV ($("$VENV_PYTHON" -V 2>&1))"
    else
        local py
        py="$(_pick_python)" || exit 2
        [[ -e "$VENV" ]] && step "$VENV is incomplete or broken: making it again" && rm -rf "$VENV"
        step "creating $VENV with $py ($("$py" -V 2>&1))"
        if ! "$py" -m venv "$VENV" 2>/dev/null; then
            rm -rf "$VENV"
            _install_venv_package "$py"
            "$py" -m venv "$VENV" || die "could not create $VENV with $py"
        fi
    fi
    export VIRTUAL_ENV="$VENV"
    export PATH="$VENV/bin:$PATH"
    hash -r
}

# pip hides the build hook's own warning, so say it here: without xterm.js
# (fetched from the npm registry at install time) passthrough terminals do not draw.
check_xterm_bundle() {
    [[ -f acp_kernel/view/static/vendor/xterm.mjs ]] && return 0
    printf 'warning: xterm.js was not fetched from the npm registry during the install, so passthrough terminals will show plain text; with network, run: %s hatch_build.py\n' "$VENV_PYTHON" >&2
}

# venv_install ARGS...: install into $VENV_PYTHON's environment (or $PYTHON's).
# With uv (itself pip-installed into that environment, one small wheel) when it
# can be had: it fetches and unpacks in parallel, a fresh .venv in under a
# minute where pip alone takes several. ACP_INSTALLER=pip keeps plain pip, and
# so does any failure to get uv (pip then does the same install, only slower).
venv_install() {
    local py="${VENV_PYTHON:-${PYTHON:-python3}}" uv
    uv="$(dirname "$py")/uv"
    if [[ "${ACP_INSTALLER:-uv}" != pip ]]; then
        [[ -x "$uv" ]] || "$py" -m pip install -q uv >/dev/null 2>&1 || true
        if [[ -x "$uv" ]]; then
            "$uv" pip install --python "$py" "$@" && return 0
            step "uv could not install; trying again with pip"
        fi
    fi
    "$py" -m pip install --progress-bar on "$@"
}
