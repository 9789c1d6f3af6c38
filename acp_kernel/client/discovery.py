"""Is an agent here? Installed, downloadable on first use, missing, or broken.

The I/O half of the registry (:mod:`acp_kernel.client.registry` holds the data):
programs are looked up on PATH, a launcher's package is looked for in its
cache on disk (never over the network), and, for ``acp-kernel agents`` only,
each program found is asked ``--version`` with a short timeout, so a CLI
that exists but cannot run is not called available.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import signal
import subprocess
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from .registry import INTERPRETER_OF, AgentSpec, LaunchedPackage, Passthrough, launched_package

State = Literal["installed", "downloadable", "missing", "broken"]

#: How long ``PROGRAM --version`` may take before the program counts as broken.
PROBE_SECONDS = 5.0


@dataclass(frozen=True)
class Availability:
    """One agent (or passthrough CLI) on this machine."""

    state: State
    #: One line for a person: what was found, what the first start downloads, what failed.
    detail: str = ""


def which(program: str, env: Mapping[str, str] | None = None) -> str | None:
    """The program's full path (a path with a separator is checked as is)."""
    if not program:
        return None
    if os.sep in program or (os.altsep and os.altsep in program):
        return program if os.path.isfile(program) and os.access(program, os.X_OK) else None
    path = (env or {}).get("PATH") or os.environ.get("PATH")
    return shutil.which(program, path=path)


# -- a launcher's cache, on disk ----------------------------------------------------


def _home(env: Mapping[str, str]) -> Path:
    return Path(env.get("HOME") or os.path.expanduser("~"))


def _npm_places(name: str, env: Mapping[str, str], launcher_path: str | None) -> Iterable[str]:
    cache = env.get("npm_config_cache") or env.get("NPM_CONFIG_CACHE") or str(_home(env) / ".npm")
    # npx (npm 7+) installs each package set under _npx/<hash>/node_modules.
    yield from glob.glob(os.path.join(glob.escape(cache), "_npx", "*", "node_modules", glob.escape(name), "package.json"))
    prefixes = [env.get("npm_config_prefix"), env.get("NPM_CONFIG_PREFIX")]
    if launcher_path:
        prefixes.append(os.path.dirname(os.path.dirname(os.path.realpath(launcher_path))))
    for prefix in filter(None, prefixes):  # a global install (npm install -g)
        yield os.path.join(prefix, "lib", "node_modules", name, "package.json")


def _uv_places(name: str, env: Mapping[str, str]) -> Iterable[str]:
    norm = re.sub(r"[-_.]+", "-", name).lower()
    data = env.get("XDG_DATA_HOME") or str(_home(env) / ".local" / "share")
    tools = env.get("UV_TOOL_DIR") or os.path.join(data, "uv", "tools")
    yield os.path.join(tools, norm)  # uv tool install
    cache = env.get("UV_CACHE_DIR") or os.path.join(env.get("XDG_CACHE_HOME") or str(_home(env) / ".cache"), "uv")
    for variant in {norm, norm.replace("-", "_")}:  # uvx's cached environments
        yield from glob.glob(os.path.join(glob.escape(cache), "environments-v*", glob.escape(variant) + "-*"))


def package_cached(launched: "LaunchedPackage", env: Mapping[str, str] | None = None) -> bool | None:
    """Whether the launcher already holds the package (True), does not (False),
    or this launcher's cache cannot be read cheaply (None). Disk only."""
    merged = {**os.environ, **(env or {})}
    kind = launched.launcher.cache
    if kind == "npm":
        places = _npm_places(launched.name, merged, which(launched.launcher.name, merged))
    elif kind == "uv":
        places = _uv_places(launched.name, merged)
    else:
        return None
    return any(os.path.exists(p) for p in places)


# -- a program that is there but cannot run -----------------------------------------


def probe(path: str, timeout: float = PROBE_SECONDS, env: Mapping[str, str] | None = None) -> str | None:
    """Run ``PATH --version`` (no stdin, its own process group); None when
    it exits 0, else what went wrong in one line."""
    return probe_argv((path, "--version"), timeout, env, shown="'--version'")


def _signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    try:
        proc.communicate(timeout=5)
    except subprocess.TimeoutExpired:  # pragma: no cover - a process that survives SIGKILL
        pass


# -- a passthrough CLI: its command words and its version probe -------------------------


def interpreter_of(program: str, env: Mapping[str, str] | None = None) -> str | None:
    """The interpreter on the ``#!`` line of ``program`` (found on PATH), or None.

    How a registry entry names "the python that runs kimi" (``{interpreter-of:kimi}``)
    without running the ``kimi`` script itself."""
    path = which(program, env)
    if path is None:
        return None
    try:
        with open(path, "rb") as f:
            first = f.readline(512)
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    words = first[2:].decode(errors="replace").split()
    if not words:
        return None
    if os.path.basename(words[0]) == "env" and len(words) > 1:  # #!/usr/bin/env python3
        return which(words[-1], env)
    return words[0] if os.path.isfile(words[0]) else None


def _resolved(argv: tuple[str, ...] | list[str], env: Mapping[str, str] | None,
              missing: Callable[[str], str]) -> tuple[str, ...]:
    merged = {**os.environ, **(env or {})}
    out = []
    for word in argv:
        found = INTERPRETER_OF.match(word)
        if found:
            interp = interpreter_of(found.group(1), merged)
            word = interp if interp is not None else missing(found.group(1))
        out.append(word)
    return tuple(out)


def resolve_command(argv: tuple[str, ...] | list[str], env: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """``argv`` with each ``{interpreter-of:PROGRAM}`` word replaced; raises
    ``LookupError(PROGRAM)`` when PROGRAM is not installed as a script."""
    def missing(program: str) -> str:
        raise LookupError(program)

    return _resolved(argv, env, missing)


def shown_command(argv: tuple[str, ...] | list[str], env: Mapping[str, str] | None = None) -> str:
    """``argv`` for people: its ``{interpreter-of:PROGRAM}`` words resolved, or, where
    PROGRAM is not installed, said as "(PROGRAM's interpreter)", never the template."""
    return " ".join(_resolved(argv, env, lambda program: f"({program}'s interpreter)"))


def probe_argv(argv: tuple[str, ...], timeout: float = PROBE_SECONDS, env: Mapping[str, str] | None = None,
               *, shown: str | None = None) -> str | None:
    """Run a version probe (``argv``, no stdin, its own process group); None
    when it exits 0, else what went wrong in one line, naming the probe as
    ``shown`` (by default the command, its program's base name)."""
    if shown is None:
        shown = "'" + " ".join(os.path.basename(argv[0]) if i == 0 else w for i, w in enumerate(argv)) + "'"
    try:
        proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True,
                                env={**os.environ, **(env or {})})
    except OSError as exc:
        return f"cannot run: {exc.strerror or exc}"
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        return f"{shown} gave no answer within {timeout:g} s"
    if proc.returncode == 0:
        return None
    said = next((ln.strip() for ln in (err + b"\n" + out).decode(errors="replace").splitlines() if ln.strip()), "")
    status = (f"killed by {_signal_name(-proc.returncode)}" if proc.returncode < 0
              else f"exit status {proc.returncode}")
    return f"{shown} failed ({status})" + (f": {said[:200]}" if said else "")


def passthrough_availability(settings: "Passthrough", env: Mapping[str, str] | None = None, *,
                             probe_version: bool = True) -> Availability:
    """Whether an agent's own CLI is installed: found, and (``probe_version``)
    its version probe (the registry's ``version_command``) exits 0. The
    install hint is the registry's ``install`` for the CLI."""
    merged = {**os.environ, **(env or {})}
    hint = f" ({settings.install})" if settings.install else ""
    try:
        argv = resolve_command(settings.command, merged)
        probe_cmd = resolve_command(settings.version_argv(), merged)
    except LookupError as exc:
        return Availability("missing", f"{exc.args[0]} not found{hint}")
    path = which(argv[0] if argv else "", merged)
    if path is None:
        return Availability("missing", f"{os.path.basename(argv[0]) if argv else '(no program)'} not found{hint}")
    if probe_version and probe_cmd:
        problem = probe_argv(probe_cmd, env=merged)
        if problem:
            return Availability("broken", problem + hint)
    return Availability("installed", path)


# -- an agent --------------------------------------------------------------------------


def availability(spec: "AgentSpec", *, probe_version: bool = False,
                 probes: dict[str, str | None] | None = None) -> Availability:
    """Installed / downloadable / missing / broken for one agent's ACP command.

    ``probe_version`` runs the program with ``--version`` (``acp-kernel
    agents`` only); ``probes`` gives results already known, by full path."""
    env = {**os.environ, **spec.env}
    program = spec.program()
    path = which(program, env)
    launched = launched_package(spec.command)
    if path is None:
        via = f" (runs {launched.spec} with it)" if launched else ""
        return Availability("missing", f"{os.path.basename(program) or '(no program)'} not found{via}")
    problem = _probed(path, env, probe_version, probes)
    if problem:
        return Availability("broken", f"{os.path.basename(program)}: {problem}")
    if launched is None:
        return Availability("installed", path)
    cached = package_cached(launched, spec.env)
    if cached:
        return Availability("installed", f"{launched.name} is in the {launched.launcher.cache} cache")
    return Availability("downloadable", f"downloads on first use ({launched.spec} via {launched.launcher.name})")


def program_availability(argv: "tuple[str, ...] | Passthrough", env: Mapping[str, str] | None = None, *,
                         probe_version: bool = False, probes: dict[str, str | None] | None = None) -> Availability:
    """The same for a plain program (an agent's own CLI for passthrough terminals).
    Given the agent's :class:`Passthrough`, its own version probe decides
    (:func:`passthrough_availability`)."""
    if not isinstance(argv, (tuple, list)):
        return passthrough_availability(argv, env, probe_version=probe_version)
    merged = {**os.environ, **(env or {})}
    path = which(argv[0] if argv else "", merged)
    if path is None:
        return Availability("missing", "not installed")
    problem = _probed(path, merged, probe_version, probes)
    return Availability("broken", problem) if problem else Availability("installed", path)


def _probed(path: str, env: Mapping[str, str], wanted: bool, probes: dict[str, str | None] | None) -> str | None:
    if not wanted:
        return None
    if probes is not None and path in probes:
        return probes[path]
    return probe(path, env=env)


def probe_all(paths: Iterable[str], workers: int = 8) -> dict[str, str | None]:
    """``--version`` for many programs at once (each once): path -> problem or None."""
    unique = sorted(set(paths))
    if not unique:
        return {}
    with ThreadPoolExecutor(max_workers=min(workers, len(unique))) as pool:
        return dict(zip(unique, pool.map(probe, unique)))


def first_start_download(spec: AgentSpec) -> str | None:
    """The package the agent's launcher will download before it first
    starts, or None (not a launcher, or the package is already in the
    launcher's cache: checked on disk, no network). For "Starting X…" lines."""
    launched = launched_package(spec.command)
    if launched is None:
        return None
    return None if package_cached(launched, spec.env) else launched.spec
