"""How to run each real agent CLI against the stub model server, offline.

One :class:`Profile` per CLI: the executable (from the cache that install.sh fills),
the arguments, the environment and the files of a throwaway HOME that point it at
the stub and skip its first-run screens (onboarding, trust, login, theme, update
checks, telemetry), all through the CLI's own config. Pure data plus one function
that writes the files; nothing here starts a process.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

ROOT = Path(os.environ.get("REALCLIS_HOME", "/tmp/realclis"))
NPM_BIN = ROOT / "npm" / "node_modules" / ".bin"
KIMI_BIN = ROOT / "kimi" / "bin"
#: ``REALCLIS_BIN_<NAME>`` (e.g. ``REALCLIS_BIN_CLAUDE``) runs another build of a CLI (a second
#: version installed beside the cache) with the same profile.
STUB_KEY = "sk-stub-0123456789abcdefghijklmnop"  # no real key anywhere: the stub ignores it


@dataclass(frozen=True)
class Setup:
    """What one run needs: argv, environment additions and files to write under HOME."""

    argv: list[str]
    env: dict[str, str]
    files: dict[str, str] = field(default_factory=dict)  # path relative to HOME -> content


@dataclass(frozen=True)
class Profile:
    name: str  # the acp-kernel registry name
    package: str
    executable: Path
    version_args: tuple[str, ...]
    make: Callable[[str, Path, Path], Setup]  # (stub url, home, cwd) -> Setup

    def installed(self) -> bool:
        return self.executable.exists()


def exe(name: str, default: Path) -> Path:
    """The CLI's executable: ``$REALCLIS_BIN_<NAME>`` if set, else the cached one."""
    return Path(os.environ.get(f"REALCLIS_BIN_{name.upper()}") or default)


def _common_env(home: Path) -> dict[str, str]:
    return {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        "TERM": "xterm-256color",
        "COLORTERM": "truecolor",
        "NO_UPDATE_NOTIFIER": "1",
        "DO_NOT_TRACK": "1",
        "CI": "",  # some TUIs go non-interactive under CI=true
        "PATH": f"{NPM_BIN}:{KIMI_BIN}:{os.environ.get('PATH', '/usr/bin:/bin')}",
    }


def claude(url: str, home: Path, cwd: Path) -> Setup:
    state = {
        "hasCompletedOnboarding": True,
        "theme": "dark",
        "numStartups": 5,
        "autoUpdates": False,
        "hasSeenTasksHint": True,
        "lastReleaseNotesSeen": "9.9.9",
        "customApiKeyResponses": {"approved": [STUB_KEY[-20:]], "rejected": []},
        "projects": {str(cwd): {"hasTrustDialogAccepted": True, "hasCompletedProjectOnboarding": True,
                                "allowedTools": [], "projectOnboardingSeenCount": 5}},
    }
    # "mcp__notebook": every tool of the notebook MCP server (issue 16) without the TUI's
    # "Do you want to proceed?" question; acp-kernel asks for execute itself, by its own policy.
    settings = {"env": {}, "includeCoAuthoredBy": False, "spinnerTipsEnabled": False,
                "permissions": {"allow": ["mcp__notebook"]}}
    env = {
        "ANTHROPIC_BASE_URL": url,
        "ANTHROPIC_API_KEY": STUB_KEY,
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "CLAUDE_CODE_IDE_SKIP_AUTO_INSTALL": "1",
    }
    return Setup([str(exe("claude", NPM_BIN / "claude"))], env,
                 {".claude.json": json.dumps(state), ".claude/settings.json": json.dumps(settings)})


def codex(url: str, home: Path, cwd: Path) -> Setup:
    toml = f"""model = "gpt-5-codex"
model_provider = "stub"
check_for_update_on_startup = false
approval_policy = "on-request"
sandbox_mode = "workspace-write"

[model_providers.stub]
name = "Stub"
base_url = "{url}/v1"
env_key = "STUB_API_KEY"
wire_api = "responses"

[projects."{cwd}"]
trust_level = "trusted"

[notice]
hide_full_access_warning = true
hide_rate_limit_model_nudge = true

[analytics]
enabled = false

[feedback]
enabled = false
"""
    env = {"CODEX_HOME": str(home / ".codex"), "STUB_API_KEY": STUB_KEY}
    return Setup([str(NPM_BIN / "codex")], env, {".codex/config.toml": toml})


def gemini(url: str, home: Path, cwd: Path) -> Setup:
    settings = {
        "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}},
        "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
        "privacy": {"usageStatisticsEnabled": False},
        "ui": {"theme": "Default", "hideTips": True, "hideBanner": True},
        "ide": {"enabled": False, "hasSeenNudge": True},
        "model": {"name": "gemini-2.5-pro"},
    }
    env = {"GEMINI_API_KEY": STUB_KEY, "GOOGLE_GEMINI_BASE_URL": url, "GEMINI_CLI_NO_RELAUNCH": "true"}
    return Setup([str(NPM_BIN / "gemini")], env, {".gemini/settings.json": json.dumps(settings)})


def pi(url: str, home: Path, cwd: Path) -> Setup:
    models = {"providers": {"stub": {
        "baseUrl": f"{url}/v1", "api": "openai-completions", "apiKey": STUB_KEY,
        "compat": {"supportsDeveloperRole": False, "supportsReasoningEffort": False},
        "models": [{"id": "stub-model", "name": "Stub model"}]}}}
    settings = {"defaultProvider": "stub", "defaultModel": "stub-model", "quietStartup": True,
                "collapseChangelog": True, "enableInstallTelemetry": False}
    env = {"PI_OFFLINE": "1", "PI_SKIP_VERSION_CHECK": "1", "PI_TELEMETRY": "0"}
    return Setup([str(NPM_BIN / "pi"), "--provider", "stub", "--model", "stub-model"], env,
                 {".pi/agent/models.json": json.dumps(models), ".pi/agent/settings.json": json.dumps(settings)})


def kimi(url: str, home: Path, cwd: Path) -> Setup:
    toml = f"""default_model = "stub"
telemetry = false

[models.stub]
provider = "stub"
model = "kimi-k2"
max_context_size = 131072

[providers.stub]
type = "kimi"
base_url = "{url}/v1"
api_key = "{STUB_KEY}"
"""
    # Every console script of kimi-cli 1.52 (`kimi`, `kimi-cli`) is a deprecation gate:
    # no arguments pipes a remote installer into bash. The original Typer app is still
    # reachable as `python -m kimi_cli.cli` (see FINDINGS.md).
    env = {"KIMI_CLI_NO_AUTO_UPDATE": "1", "KIMI_SHARE_DIR": str(home / ".kimi")}
    # `kimi acp` refuses session/new (auth_required) without a Kimi Code OAuth token file, even
    # when the model's provider has its own key: a stub token, never sent (the provider is the stub).
    token = {"access_token": "stub-token", "refresh_token": "stub-refresh", "expires_at": 4_102_444_800.0,
             "scope": "stub", "token_type": "Bearer", "expires_in": 3600}
    return Setup([str(KIMI_BIN / "python"), "-m", "kimi_cli.cli"], env,
                 {".kimi/config.toml": toml, ".kimi/credentials/kimi-code.json": json.dumps(token)})


def opencode(url: str, home: Path, cwd: Path) -> Setup:
    config = {
        "$schema": "https://opencode.ai/config.json",
        "model": "stub/stub-model",
        "small_model": "stub/stub-model",
        "autoupdate": False,
        "share": "disabled",
        "provider": {"stub": {"npm": "@ai-sdk/openai-compatible", "name": "Stub",
                              "options": {"baseURL": f"{url}/v1", "apiKey": STUB_KEY},
                              "models": {"stub-model": {"name": "Stub model"}}}},
    }
    env = {"OPENCODE_CONFIG_CONTENT": json.dumps(config), "OPENCODE_DISABLE_AUTOUPDATE": "1",
           "OPENCODE_DISABLE_MODELS_FETCH": "1", "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
           "OPENCODE_DISABLE_SHARE": "1", "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1"}
    return Setup([str(NPM_BIN / "opencode")], env)


PROFILES: dict[str, Profile] = {p.name: p for p in [
    Profile("claude", "@anthropic-ai/claude-code (npm)", exe("claude", NPM_BIN / "claude"), ("--version",), claude),
    Profile("codex", "@openai/codex (npm)", NPM_BIN / "codex", ("--version",), codex),
    Profile("gemini", "@google/gemini-cli (npm)", NPM_BIN / "gemini", ("--version",), gemini),
    Profile("pi", "@earendil-works/pi-coding-agent (npm)", NPM_BIN / "pi", ("--version",), pi),
    Profile("kimi", "kimi-cli (PyPI)", KIMI_BIN / "kimi-cli", ("-m", "kimi_cli.cli", "--version"), kimi),
    Profile("opencode", "opencode-ai (npm)", NPM_BIN / "opencode", ("--version",), opencode),
]}


def prepare(name: str, url: str, home: Path, cwd: Path) -> Setup:
    """Write the CLI's config files under ``home`` and return its argv and environment."""
    setup = PROFILES[name].make(url, home, cwd)
    home.mkdir(parents=True, exist_ok=True)
    cwd.mkdir(parents=True, exist_ok=True)
    for rel, text in setup.files.items():
        target = home / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    return Setup(setup.argv, {**_common_env(home), **setup.env}, setup.files)
