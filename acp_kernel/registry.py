"""Known agents and user configuration, as data.

Per-agent differences (launch commands, passthrough settings, install hints)
live in the table below and in the user's config file, never in ``if agent
== ...`` branches elsewhere. The config file is
``<jupyter config dir>/acp_kernel.json`` (or ``$ACP_KERNEL_CONFIG``)::

    {
      "default_agent": "claude",
      "permissions": "allow-reads",
      "agents": {
        "claude": {"env": {"ANTHROPIC_API_KEY": "..."}},
        "mine": {"title": "My agent", "command": ["my-agent", "--acp"]}
      },
      "mcp_servers": [{"name": "fs", "command": "mcp-fs", "args": [], "env": []}]
    }
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import AcpError
from .host import LIMIT_NAMES, ClientSettings, Limits


@dataclass(frozen=True)
class Passthrough:
    """How to run the agent's own interactive CLI under a PTY."""

    command: tuple[str, ...]
    submit: str = "\r"
    bracketed_paste: bool = True  # when the application asks for it (mode 2004)
    idle_seconds: float = 1.0  # no output this long: ready, or the reply is done
    submit_delay: float = 0.15  # longest wait for the paste to be taken before submit


@dataclass(frozen=True)
class AgentSpec:
    name: str
    title: str
    command: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    install: str = ""
    passthrough: Optional[Passthrough] = None
    source: str = "built-in"

    def program(self) -> str:
        return self.command[0] if self.command else ""

    def available(self) -> bool:
        """Whether the launch program resolves on this machine."""
        program = self.program()
        if os.sep in program:
            return os.path.exists(program)
        return shutil.which(program) is not None


def _npx(package: str) -> tuple[str, ...]:
    return ("npx", "--yes", "--prefer-offline", package)


NODE_HINT = "Install Node.js (which provides npx)"

BUILTIN: dict[str, AgentSpec] = {
    spec.name: spec
    for spec in [
        AgentSpec(
            "demo",
            "Demo agent (scripted, no model)",
            (sys.executable, "-m", "acp_kernel.demo_agent"),
            install="ships with acp-kernel",
            passthrough=Passthrough((sys.executable, "-m", "acp_kernel.demo_cli"), idle_seconds=0.5),
        ),
        AgentSpec(
            "claude",
            "Claude Code",
            _npx("@agentclientprotocol/claude-agent-acp"),
            install=NODE_HINT + "; log in with `claude` once",
            passthrough=Passthrough(("claude",)),
        ),
        AgentSpec(
            "codex",
            "Codex",
            _npx("@zed-industries/codex-acp"),
            install=NODE_HINT + "; log in with `codex login` or set OPENAI_API_KEY",
            passthrough=Passthrough(("codex",)),
        ),
        AgentSpec(
            "gemini",
            "Gemini CLI",
            ("gemini", "--acp"),
            install="npm install -g @google/gemini-cli",
            passthrough=Passthrough(("gemini",)),
        ),
        AgentSpec(
            "kimi",
            "Kimi CLI",
            ("kimi", "acp"),
            install="pip install kimi-cli",
            passthrough=Passthrough(("kimi",)),
        ),
        AgentSpec(
            "goose",
            "Goose",
            ("goose", "acp"),
            install="see Goose's install guide",
            passthrough=Passthrough(("goose", "session")),
        ),
        AgentSpec(
            "opencode",
            "OpenCode",
            ("opencode", "acp"),
            install="npm install -g opencode-ai",
            passthrough=Passthrough(("opencode",)),
        ),
        AgentSpec(
            "qwen",
            "Qwen Code",
            ("qwen", "--acp"),
            install="npm install -g @qwen-code/qwen-code",
            passthrough=Passthrough(("qwen",)),
        ),
        AgentSpec(
            "copilot",
            "GitHub Copilot CLI",
            ("copilot", "--acp"),
            install="npm install -g @github/copilot",
            passthrough=Passthrough(("copilot",)),
        ),
        AgentSpec(
            "cursor",
            "Cursor",
            ("cursor-agent", "acp"),
            install="install Cursor's CLI (cursor-agent)",
            passthrough=Passthrough(("cursor-agent",)),
        ),
        AgentSpec(
            "pi",
            "Pi",
            _npx("pi-acp"),
            install=NODE_HINT + "; npm install -g --ignore-scripts @earendil-works/pi-coding-agent",
            passthrough=Passthrough(("pi",)),
        ),
    ]
}


# -- the config file, validated at the edge ----------------------------------


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PassthroughConfig(_Strict):
    command: list[str] = Field(min_length=1)
    submit: str = "\r"
    bracketed_paste: bool = True
    idle_seconds: float = Field(1.0, gt=0)
    submit_delay: float = Field(0.15, ge=0)


class AgentConfig(_Strict):
    title: Optional[str] = None
    command: Optional[list[str]] = Field(None, min_length=1)
    env: dict[str, str] = Field(default_factory=dict)
    install: Optional[str] = None
    passthrough: Optional[PassthroughConfig] = None


class ConfigFile(_Strict):
    default_agent: Optional[str] = None
    permissions: Optional[Literal["ask", "allow-reads", "allow-all", "deny"]] = None
    shell_fallback: Optional[bool] = None
    extra_roots: list[str] = Field(default_factory=list)
    #: How often a streaming answer is redrawn. 10/s keeps the browser cheap;
    #: higher shows each word sooner (lower latency) for more frontend traffic.
    refresh_hz: Optional[float] = Field(None, gt=0, le=240)
    agents: dict[str, AgentConfig] = Field(default_factory=dict)
    #: Overrides of :class:`acp_kernel.host.Limits` (names as there).
    limits: dict[str, float] = Field(default_factory=dict)
    mcp_servers: list[dict[str, Any]] = Field(default_factory=list)


class ConfigError(AcpError):
    """A config file that cannot be used; the message names the key and the fix."""


def config_path() -> Path:
    explicit = os.environ.get("ACP_KERNEL_CONFIG")
    if explicit:
        return Path(explicit)
    try:
        from jupyter_core.paths import jupyter_config_dir

        base = jupyter_config_dir()
    except Exception:  # pragma: no cover - jupyter_core is a dependency
        base = os.path.expanduser("~/.jupyter")
    return Path(base) / "acp_kernel.json"


_FIXES = {
    "extra_forbidden": "remove it, or check its spelling",
    "missing": "add it",
    "list_type": 'give a list of strings, e.g. ["my-agent", "--acp"]',
    "too_short": "give at least one item (the program)",
    "literal_error": "use one of the allowed values",
    "string_type": "give a string",
    "bool_type": "give true or false",
    "dict_type": "give an object",
    "greater_than": "give a larger number",
    "greater_than_equal": "give a larger number",
    "less_than_equal": "give a smaller number",
    "float_parsing": "give a number",
    "float_type": "give a number",
}


def _explain(path: Path, exc: ValidationError) -> str:
    lines = [f"{path}: invalid configuration"]
    for err in exc.errors():
        key = ".".join(str(p) for p in err["loc"]) or "(top level)"
        fix = _FIXES.get(err["type"], "")
        lines.append(f"  {key}: {err['msg']}" + (f" -> fix: {fix}" if fix else ""))
    return "\n".join(lines)


@dataclass
class Config:
    """The merged view: built-in agents plus the user's file."""

    agents: dict[str, AgentSpec]
    default_agent: str = "demo"
    permissions: str | None = None
    shell_fallback: bool = True
    extra_roots: list[str] = field(default_factory=list)
    mcp_servers: list[dict[str, Any]] = field(default_factory=list)
    refresh_hz: float = 10.0
    limits: Limits = field(default_factory=Limits)
    path: Path | None = None

    def client_settings(self, permissions: str | None = None) -> ClientSettings:
        """How clients serve the agent: ``permissions`` (a command-line or
        kernel choice) over the file's policy, else ``ask``."""
        return ClientSettings(
            permissions=permissions or self.permissions or "ask",  # type: ignore[arg-type]
            shell_fallback=self.shell_fallback,
            extra_roots=list(self.extra_roots),
            limits=dataclasses.replace(self.limits),
        )

    def agent(self, name: str) -> AgentSpec:
        try:
            return self.agents[name]
        except KeyError:
            known = ", ".join(sorted(self.agents))
            raise AcpError(
                f"unknown agent {name!r}; known agents: {known}. "
                f"Add it under \"agents\" in {self.path or config_path()}, or pass a command."
            ) from None


def load_config(path: Path | None = None) -> Config:
    path = path or config_path()
    data: dict[str, Any] = {}
    if path.exists():
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{path}: cannot read ({exc})") from exc
        except json.JSONDecodeError as exc:
            raise ConfigError(
                f"{path}: not valid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
            ) from exc
    try:
        cfg = ConfigFile.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_explain(path, exc)) from None
    agents = dict(BUILTIN)
    for name, over in cfg.agents.items():
        base = agents.get(name)
        if base is None and over.command is None:
            raise ConfigError(
                f"{path}: agents.{name}: a new agent needs a command -> fix: add "
                f'"command": ["program", "arg", ...]'
            )
        passthrough = (
            Passthrough(**{**over.passthrough.model_dump(), "command": tuple(over.passthrough.command)})
            if over.passthrough else (base.passthrough if base else None)
        )
        agents[name] = AgentSpec(
            name=name,
            title=over.title or (base.title if base else name),
            command=tuple(over.command) if over.command else base.command,  # type: ignore[union-attr]
            env={**(base.env if base else {}), **over.env},
            install=over.install or (base.install if base else ""),
            passthrough=passthrough,
            source=str(path) if base is None else f"built-in, overridden in {path}",
        )
    default = os.environ.get("ACP_KERNEL_AGENT") or cfg.default_agent or "demo"
    if default not in agents:
        raise ConfigError(
            f"{path}: default_agent {default!r} is not a known agent -> fix: use one of "
            + ", ".join(sorted(agents))
        )
    return Config(
        agents=agents,
        default_agent=default,
        permissions=cfg.permissions,
        shell_fallback=True if cfg.shell_fallback is None else cfg.shell_fallback,
        extra_roots=cfg.extra_roots,
        mcp_servers=cfg.mcp_servers,
        refresh_hz=_refresh_hz(cfg.refresh_hz, path),
        limits=_limits(cfg.limits, path),
        path=path,
    )


def _limits(given: dict[str, float], path: Path) -> Limits:
    """The file's ``limits`` over the defaults; unknown names and values <= 0 say the fix."""
    out = Limits()
    for name, value in given.items():
        if name not in LIMIT_NAMES:
            raise ConfigError(f"{path}: limits.{name}: unknown limit -> fix: use one of " + ", ".join(LIMIT_NAMES))
        if isinstance(value, bool) or not value > 0:
            raise ConfigError(f"{path}: limits.{name}: {value!r} -> fix: a number above 0")
        kind = type(getattr(out, name))
        if kind is int and value != int(value):
            raise ConfigError(f"{path}: limits.{name}: {value!r} -> fix: a whole number")
        setattr(out, name, kind(value))
    return out


def _refresh_hz(configured: float | None, path: Path) -> float:
    """``ACP_KERNEL_REFRESH_HZ`` over the file's ``refresh_hz``, else 10."""
    raw = os.environ.get("ACP_KERNEL_REFRESH_HZ")
    if not raw:
        return configured or 10.0
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if not 0 < value <= 240:
        raise ConfigError(f"ACP_KERNEL_REFRESH_HZ={raw!r}: not a rate -> fix: a number of refreshes "
                          "per second, above 0 and at most 240")
    return value


def adhoc_agent(command: str | list[str], name: str = "custom") -> AgentSpec:
    """An agent from a command line given by the user (``--agent-command``)."""
    argv = shlex.split(command) if isinstance(command, str) else list(command)
    if not argv:
        raise AcpError("empty agent command")
    return AgentSpec(name=name, title=" ".join(argv), command=tuple(argv), source="command line")

