"""The ACP agent registry: its published index, read as hostile data.

The format is the one the registry publishes (read in
``github.com/agentclientprotocol/registry`` at commit
``3de1678346d1b37b6c3f07de503043ebcbb9cbdb``, 2026-02-07: ``FORMAT.md``,
``registry.schema.json``, ``agent.schema.json`` and
``.github/workflows/build_registry.py``, which builds the index served at
``https://cdn.agentclientprotocol.com/registry/v1/latest/registry.json``)::

    {"version": "1.0.0",
     "agents": [{"id": "gemini", "name": "Gemini CLI", "version": "0.27.3",
                 "description": "...", "repository": "https://...", "authors": ["..."],
                 "license": "Apache-2.0", "icon": "https://.../gemini.svg",
                 "distribution": {"npx": {"package": "@google/gemini-cli@0.27.3",
                                          "args": ["--experimental-acp"], "env": {}},
                                  "uvx": {"package": "name@1.0", "args": [...]},
                                  "binary": {"linux-x86_64": {"archive": "https://...tar.gz",
                                                              "cmd": "./agent", "args": [], "env": {}}}}}],
     "extensions": [...]}

What we run: an ``npx`` distribution as ``npx --yes --prefer-offline PACKAGE
ARGS...`` and a ``uvx`` one as ``uvx PACKAGE ARGS...``, argv words, never a
shell line. ``binary`` distributions are skipped (we do not download and
unpack archives; the entry's skip note says to install the agent and add it
under ``agents`` in the config file), and so are kinds we do not know.

Every entry is validated on its own (:class:`RegistryEntry`): bounded sizes,
an id as the schema says (``^[a-z][a-z0-9-]*$``), a package name that is a
package name (no spaces, no leading ``-`` that npx or uvx would read as an
option, no shell metacharacters), no control or format characters in any
string, and no environment variable that steers the launcher or the loader
(``PATH``, ``NODE_OPTIONS``, ``LD_PRELOAD``...). A bad entry is skipped with
a note naming it; the others stay. A duplicated id is skipped in all its
copies (which one would be the agent?). Unknown keys are ignored (a newer
registry may add some).

Where it comes from: a path is read as it is each time; an ``http(s)://``
or ``file://`` URL is fetched at most once per :data:`TTL_SECONDS` into
:func:`acp_kernel.paths.registry_cache_dir`, at most :data:`MAX_BYTES`,
within :data:`FETCH_SECONDS` in all. A fetch that fails keeps the last copy
(and says so); with no copy there are no registry agents, and a note says why.
Nothing here raises for the registry's sake: :func:`read_registry` returns a
:class:`Listing` whose ``notes`` say what went wrong.

The merge with our own table is :func:`acp_kernel.client.registry.merge_registry`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Optional

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..errors import AcpError
from ..paths import registry_cache_dir

#: The registry's own address (its README, "Usage").
DEFAULT_URL = "https://cdn.agentclientprotocol.com/registry/v1/latest/registry.json"
#: The largest index read (the real one is about 30 KB).
MAX_BYTES = 2 * 1024 * 1024
#: At most this many agent entries are looked at.
MAX_AGENTS = 500
#: The whole fetch (connect, headers, body) within this many seconds.
FETCH_SECONDS = 5.0
#: A cached copy younger than this is used without fetching.
TTL_SECONDS = 24 * 3600.0
#: After a failed fetch, the same process does not try again for this long (a kernel reads its config often).
RETRY_SECONDS = 300.0
#: Cached copies kept (one per URL), the newest.
KEEP_CACHED = 8
#: Launchers we can run, in the order preferred when an entry offers several.
RUNNABLE = ("npx", "uvx")


# -- the entry, validated at the edge ------------------------------------------------


def _printable(value: str) -> str:
    """No control, format (bidi overrides, zero-width), surrogate or unassigned characters."""
    for ch in value:
        if unicodedata.category(ch).startswith("C"):
            raise ValueError(f"contains the control or format character U+{ord(ch):04X}")
    return value


Id = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[a-z][a-z0-9-]*$")]
Name = Annotated[str, Field(min_length=1, max_length=200), AfterValidator(_printable)]
Description = Annotated[str, Field(min_length=1, max_length=2000), AfterValidator(_printable)]
License = Annotated[str, Field(max_length=100), AfterValidator(_printable)]
Arg = Annotated[str, Field(max_length=1024), AfterValidator(_printable)]
EnvName = Annotated[str, Field(max_length=128, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]
EnvValue = Annotated[str, Field(max_length=4096), AfterValidator(_printable)]
Version = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[0-9]+\.[0-9]+\.[0-9]+[0-9A-Za-z.+-]*$")]
Url = Annotated[str, Field(max_length=2048, pattern=r"^https?://[^\s]+$"), AfterValidator(_printable)]

#: npm: ``@scope/name`` or ``name``, then ``@version-or-tag``.
NPM_PACKAGE = re.compile(r"^(@[a-z0-9][a-z0-9._~-]*/)?[a-z0-9][a-z0-9._~-]*(@[0-9A-Za-z][0-9A-Za-z.+_-]*)?$")
#: PyPI (uvx): a name, extras, then ``@version`` or ``==version``.
PYPI_PACKAGE = re.compile(
    r"^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?(?:\[[A-Za-z0-9._,-]+\])?(?:(?:@|==)[0-9A-Za-z][0-9A-Za-z.+!_-]*)?$")
PACKAGE_PATTERNS = {"npx": NPM_PACKAGE, "uvx": PYPI_PACKAGE}

#: Variables an entry may not set: they steer the launcher (npx, uvx), the loader or the shell,
#: not the agent (matched on the upper-cased name; a trailing ``*`` is a prefix).
LAUNCHER_ENV = ("PATH", "HOME", "SHELL", "ENV", "BASH_ENV", "IFS", "LD_*", "DYLD_*", "NODE_*", "NPM_CONFIG_*",
                "UV_*", "PYTHON*", "PIP_*", "VIRTUAL_ENV", "COREPACK_*")


def _launcher_env(name: str) -> bool:
    upper = name.upper()
    return any(upper.startswith(p[:-1]) if p.endswith("*") else upper == p for p in LAUNCHER_ENV)


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", defer_build=True, frozen=True)


class PackageDistribution(_Model):
    package: str = Field(min_length=1, max_length=214)
    args: list[Arg] = Field(default_factory=list, max_length=64)
    env: dict[EnvName, EnvValue] = Field(default_factory=dict, max_length=32)

    @field_validator("env")
    @classmethod
    def _no_launcher_env(cls, value: dict[str, str]) -> dict[str, str]:
        bad = sorted(name for name in value if _launcher_env(name))
        if bad:
            raise ValueError(f"sets {', '.join(bad)}, which steers the launcher or the loader, not the agent")
        return value


class BinaryTarget(_Model):
    archive: str = Field(max_length=2048)
    cmd: str = Field(max_length=256)


class Distribution(_Model):
    npx: Optional[PackageDistribution] = None
    uvx: Optional[PackageDistribution] = None
    binary: Optional[dict[Annotated[str, Field(max_length=32)], BinaryTarget]] = Field(None, max_length=16)


class RegistryEntry(_Model):
    """One agent of the index (``agent.schema.json``), bounded."""

    id: Id
    name: Name
    version: Version
    description: Description
    repository: Optional[Url] = None
    license: Optional[License] = None
    distribution: Distribution

    def package(self, kind: str) -> Optional[PackageDistribution]:
        dist = getattr(self.distribution, kind, None)
        return dist if isinstance(dist, PackageDistribution) else None


# -- what the merge gets --------------------------------------------------------------


@dataclass(frozen=True)
class RegistryAgent:
    """A registry entry we can run: its launch argv and what it says about itself."""

    id: str
    name: str
    version: str
    description: str
    homepage: str
    #: ``npx`` or ``uvx``.
    kind: str
    command: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)


@dataclass
class Listing:
    """What a registry gave: the agents we can run, in its order, and what went wrong or was skipped."""

    source: str = ""
    #: The data had an index's shape (an ``agents`` list): worth keeping in the cache.
    index: bool = False
    agents: list[RegistryAgent] = field(default_factory=list)
    #: Ids of entries we read but cannot run (binary only), to recognise them.
    listed: dict[str, RegistryEntry] = field(default_factory=dict)
    #: Entries not used, each with why: an id (or ``agents[N]`` when it has none worth showing) -> reason.
    skipped: dict[str, str] = field(default_factory=dict)
    #: What went wrong with the index as a whole (fetching, reading, its shape).
    notes: list[str] = field(default_factory=list)


def launch_argv(kind: str, dist: PackageDistribution) -> tuple[str, ...]:
    """The argv for a package distribution (``npx``/``uvx``), checked again here: only a package name."""
    pattern = PACKAGE_PATTERNS.get(kind)
    if pattern is None:
        raise ValueError(f"cannot run {kind!r} distributions (only {', '.join(RUNNABLE)})")
    if not pattern.fullmatch(dist.package):
        raise ValueError(f"{kind} package {dist.package[:80]!r} is not a package name")
    launcher = ("npx", "--yes", "--prefer-offline") if kind == "npx" else ("uvx",)
    return (*launcher, dist.package, *dist.args)


def _short(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:3]:
        where = ".".join(str(p) for p in err["loc"])
        parts.append(f"{where}: {err['msg']}" if where else err["msg"])
    more = exc.error_count() - 3
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")


def _label(raw: Any, index: int) -> str:
    rid = raw.get("id") if isinstance(raw, dict) else None
    if isinstance(rid, str) and re.fullmatch(r"[a-z][a-z0-9-]{0,63}", rid):
        return rid
    return f"agents[{index}]"


def parse_registry(data: Any, source: str = "") -> Listing:
    """The runnable agents of a decoded index, and a note for each entry skipped. Never raises."""
    out = Listing(source=source)
    if not isinstance(data, dict) or not isinstance(data.get("agents"), list):
        out.notes.append('not an ACP registry index (no "agents" list)')
        return out
    out.index = True
    raw_agents = data["agents"]
    if len(raw_agents) > MAX_AGENTS:
        out.notes.append(f"{len(raw_agents)} agents: only the first {MAX_AGENTS} read")
        raw_agents = raw_agents[:MAX_AGENTS]
    entries: list[tuple[str, RegistryEntry | None, str]] = []
    for index, raw in enumerate(raw_agents):
        try:
            entries.append((_label(raw, index), RegistryEntry.model_validate(raw), ""))
        except ValidationError as exc:
            entries.append((_label(raw, index), None, _short(exc)))
    counts: dict[str, int] = {}
    for _, entry, _ in entries:
        if entry is not None:
            counts[entry.id] = counts.get(entry.id, 0) + 1
    for label, entry, problem in entries:
        if entry is None:
            out.skipped.setdefault(label, f"invalid: {problem}")
            continue
        if counts[entry.id] > 1:
            out.skipped[entry.id] = f"listed {counts[entry.id]} times (none used)"
            continue
        out.listed[entry.id] = entry
        kind = next((k for k in RUNNABLE if entry.package(k) is not None), None)
        if kind is None:
            offered = ", ".join(k for k in ("binary", *RUNNABLE) if getattr(entry.distribution, k) is not None)
            out.skipped[entry.id] = (
                f"{offered or 'no'} distribution only: acp-kernel runs npx and uvx packages and does not "
                "download archives (install it and add it under \"agents\" in the config file)")
            continue
        dist = entry.package(kind)
        assert dist is not None
        try:
            argv = launch_argv(kind, dist)
        except ValueError as exc:
            out.skipped[entry.id] = str(exc)
            continue
        out.agents.append(RegistryAgent(
            id=entry.id, name=entry.name, version=entry.version, description=entry.description,
            homepage=entry.repository or "", kind=kind, command=argv, env=dict(dist.env)))
    return out


def parse_bytes(raw: bytes, source: str = "") -> Listing:
    """:func:`parse_registry` of an index's bytes (UTF-8 JSON, at most :data:`MAX_BYTES`)."""
    if len(raw) > MAX_BYTES:
        return Listing(source=source, notes=[f"larger than {MAX_BYTES // 1024} KB: not read"])
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        return Listing(source=source, notes=["not UTF-8 text"])
    except json.JSONDecodeError as exc:
        return Listing(source=source, notes=[f"not valid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"])
    except RecursionError:
        return Listing(source=source, notes=["nested too deeply to read"])
    return parse_registry(data, source)


# -- where it comes from: a path, or a URL fetched into the cache ----------------------


class FetchError(AcpError):
    """The index could not be fetched; the message says why, in a few words."""


def is_url(source: str) -> bool:
    return bool(re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", source))


def fetch(url: str, *, timeout: float = FETCH_SECONDS, max_bytes: int = MAX_BYTES) -> bytes:
    """The body at ``url`` (http, https or file), at most ``max_bytes``, or :class:`FetchError`.
    Each wait is at most ``timeout`` and the body is abandoned once ``timeout`` has passed in all
    (so at most about twice ``timeout``). Redirects go to http(s) only."""
    import urllib.error
    import urllib.request

    scheme = url.split(":", 1)[0].lower()
    if scheme not in ("http", "https", "file"):
        raise FetchError(f"{scheme}: URLs are not fetched (http, https or file only)")
    opener = urllib.request.OpenerDirector()
    for handler in (urllib.request.ProxyHandler(), urllib.request.HTTPHandler(), urllib.request.HTTPSHandler(),
                    urllib.request.FileHandler(), urllib.request.HTTPRedirectHandler(),
                    urllib.request.HTTPDefaultErrorHandler(), urllib.request.HTTPErrorProcessor(),
                    urllib.request.UnknownHandler()):
        opener.add_handler(handler)
    deadline = time.monotonic() + timeout
    request = urllib.request.Request(url, headers={"User-Agent": "acp-kernel", "Accept": "application/json"})
    try:
        with opener.open(request, timeout=timeout) as response:
            read = getattr(response, "read1", response.read)
            chunks, size = [], 0
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise FetchError(f"took longer than {timeout:g} s")
                # read1: what has arrived (at least a byte, each wait within the socket's
                # timeout), so a server that drips bytes meets the deadline too
                chunk = read(min(65536, max_bytes + 1 - size))
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
                if size > max_bytes:
                    raise FetchError(f"larger than {max_bytes // 1024} KB")
            return b"".join(chunks)
    except FetchError:
        raise
    except urllib.error.HTTPError as exc:
        raise FetchError(f"HTTP {exc.code} {exc.reason}") from None
    except urllib.error.URLError as exc:
        reason = exc.reason
        raise FetchError(f"timed out after {timeout:g} s" if isinstance(reason, TimeoutError)
                         else str(getattr(reason, "strerror", None) or reason)) from None
    except TimeoutError:
        raise FetchError(f"timed out after {timeout:g} s") from None
    except (OSError, ValueError) as exc:  # a reset connection, a bad URL
        raise FetchError(str(exc) or type(exc).__name__) from None


def cache_file(url: str, cache_dir: Path | None = None) -> Path:
    """Where the copy of ``url`` is kept."""
    digest = hashlib.sha256(url.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return (cache_dir or registry_cache_dir()) / f"{digest}.json"


def _store(path: Path, body: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_bytes(body)
    os.replace(tmp, path)
    copies = sorted(path.parent.glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in copies[KEEP_CACHED:]:
        old.unlink(missing_ok=True)


def _age(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.0f} h"


#: url -> monotonic time of the last failed fetch in this process.
_FAILED: dict[str, float] = {}
#: (path, mtime_ns, size) -> its listing: a kernel reads its config often.
_PARSED: dict[tuple[str, int, int], Listing] = {}


def _read_cached(path: Path, source: str) -> Listing | None:
    try:
        st = path.stat()
        key = (str(path), st.st_mtime_ns, st.st_size)
        if key not in _PARSED:
            if st.st_size > MAX_BYTES:
                return Listing(source=source, notes=[f"larger than {MAX_BYTES // 1024} KB: not read"])
            _PARSED.clear()  # one or two sources at a time: keep the last only
            _PARSED[key] = parse_bytes(path.read_bytes(), source)
    except OSError:
        return None
    cached = _PARSED[key]
    return Listing(cached.source, cached.index, list(cached.agents), dict(cached.listed), dict(cached.skipped),
                   list(cached.notes))


def read_registry(source: str, *, cache_dir: Path | None = None, refresh: bool = False,
                  timeout: float = FETCH_SECONDS, now: float | None = None) -> Listing:
    """The listing of ``source`` (a path, or a URL through the cache). Never raises."""
    if not is_url(source):
        path = Path(source).expanduser()
        listing = _read_cached(path, source)
        if listing is None:
            return Listing(source=source, notes=["cannot read the file (no such file, or not readable)"])
        return listing
    path = cache_file(source, cache_dir)
    now = time.time() if now is None else now
    try:
        age: float | None = now - path.stat().st_mtime
    except OSError:
        age = None
    failed = _FAILED.get(source)
    recently_failed = failed is not None and time.monotonic() - failed < RETRY_SECONDS
    if refresh or ((age is None or age >= TTL_SECONDS) and not recently_failed):
        try:
            body = fetch(source, timeout=timeout)
        except FetchError as exc:
            _FAILED[source] = time.monotonic()
            why = f"cannot fetch ({exc})"
        else:
            _FAILED.pop(source, None)
            fresh = parse_bytes(body, source)
            if fresh.index:
                try:
                    _store(path, body)
                except OSError as exc:
                    fresh.notes.append(f"cannot keep a copy in {path.parent} ({exc.strerror or exc})")
                return fresh
            why = "the fetched copy is unusable (" + fresh.notes[0] + ")"
        cached = _read_cached(path, source) if age is not None else None
        if cached is None:
            return Listing(source=source, notes=[f"{why}; no copy cached: registry agents left out"])
        cached.notes.insert(0, f"{why}; using the copy fetched {_age(age or 0.0)} ago")
        return cached
    cached = _read_cached(path, source)
    if cached is None:
        return Listing(source=source, notes=["cannot fetch (an earlier try failed); no copy cached: "
                                             "registry agents left out"])
    return cached
