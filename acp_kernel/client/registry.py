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
      "mcp_servers": [{"name": "fs", "command": "mcp-fs", "args": [], "env": []}],
      "mcp": true
    }

``mcp`` (default true) offers every session, inside a Jupyter kernel, the
``notebook`` MCP server (:mod:`acp_kernel.notebook_mcp`): false turns it off.

An agent's ``passthrough`` entry overrides the built-in :class:`Passthrough`
field by field (``{"passthrough": {"submit_delay": 0.3}}`` keeps the rest), e.g.
``cancel_keys`` (``["\u001b"]``, or ``[["\u001b", 0.25], "\u001b"]`` with a pause),
``ready_pattern``/``busy_pattern``/``chrome_pattern``/``input_pattern``/
``input_placeholder``/``startup_pattern``/``dialog_pattern`` (regular expressions on the rendered
screen), ``idle_seconds``, ``ready_timeout``, ``cell_timeout`` (0: none),
``clear_input``, ``version_command``, ``resume_args``, ``mcp_args``.

``registry`` (or ``$ACP_KERNEL_REGISTRY``, which wins) names an ACP agent
registry index, a path or a URL (the registry's own is
:data:`acp_kernel.client.acp_registry.DEFAULT_URL`), read and cached by
:mod:`acp_kernel.client.acp_registry` and merged by :func:`merge_registry`:
our table first, the registry adds agents we do not know, the config file
has the last word.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..errors import AcpError
from .acp_registry import Listing, is_url, read_registry
from ..paths import config_path, default_config_path  # config_path re-exported (its old home)
from .host import LIMIT_NAMES, ClientSettings, Limits



#: A key and the pause after it, in seconds (a cancel sequence is a tuple of these).
Key = tuple[str, float]


@dataclass(frozen=True)
class Passthrough:
    """How to run and drive the agent's own interactive CLI under a PTY.

    Every difference between CLIs is a value here (see ``PASSTHROUGH`` for the
    built-in ones and the config file's ``agents.NAME.passthrough`` for a
    user's), never a branch on the agent's name. Screen patterns are regular
    expressions searched in the *rendered* screen (a terminal emulator's
    text), not in the raw output.
    """

    command: tuple[str, ...]
    submit: str = "\r"
    bracketed_paste: bool = True  # when the application asks for it (mode 2004)
    #: The rendered screen unchanged this long (and not busy): ready, or the reply is done.
    idle_seconds: float = 1.0
    #: Seconds from the paste to the submit key, a write of its own (an early
    #: Enter inside an Ink app's paste burst becomes a newline).
    submit_delay: float = 0.15
    #: Keys that empty the input box before a paste ("" none; Ctrl-U is "\x15").
    clear_input: str = ""
    #: What an interrupt sends: keys, each with the pause after it.
    cancel_keys: tuple[Key, ...] = (("\x03", 0.0),)
    #: Wait for the program to leave canonical mode (raw input) before typing.
    raw_mode: bool = True
    #: On the screen once the CLI takes input (its input box); "" none.
    ready_pattern: str = ""
    #: On the screen while the CLI works: a cell never ends while it matches.
    busy_pattern: str = ""
    #: Lines of the screen that are the CLI's own chrome (input box, footer), left out of a reply.
    chrome_pattern: str = ""
    #: The input box on the screen (multi-line; the last match counts), its group 1 (else the
    #: whole match) the text typed in it: a prompt is typed only into an empty box, and a
    #: submit counts once the text has left it. "" none (the screen's changes stand in).
    input_pattern: str = ""
    #: What an empty input box shows in it (a placeholder, matched against the whole text).
    input_placeholder: str = ""
    #: On the screen while the CLI is still starting (a notice, "Waiting for startup"): not ready.
    startup_pattern: str = ""
    #: A question the CLI asks in its own TUI (an approval dialog; group 1, else the whole
    #: match, its text): the cell shows it and waits for the person's answer in the terminal,
    #: and no prompt is typed while it shows (its keys would answer it). "" none.
    dialog_pattern: str = ""
    #: Seconds the first prompt waits for the CLI to become ready.
    ready_timeout: float = 60.0
    #: Seconds a cell waits for the reply to end (0: no limit).
    cell_timeout: float = 600.0
    #: argv that asks "does it run?" (exit status 0 = yes); () means COMMAND[0] --version.
    version_command: tuple[str, ...] = ()
    #: Arguments added to ``command`` to continue the latest conversation (() none).
    resume_args: tuple[str, ...] = ()
    #: Arguments that load a generated MCP config file (``{config}``: its path),
    #: added last to ``command`` when the ``notebook`` MCP server is offered to
    #: the CLI (:mod:`acp_kernel.passthrough.notebook`); () when the CLI has no
    #: such flag. The file is ``{"mcpServers": {"notebook": {command, args, env}}}``.
    mcp_args: tuple[str, ...] = ()
    #: How to install the CLI, for the not-found message.
    install: str = ""

    def version_argv(self) -> tuple[str, ...]:
        return self.version_command or ((self.command[0], "--version") if self.command else ())


#: The command word ``{interpreter-of:PROGRAM}`` stands for the interpreter named
#: on PROGRAM's ``#!`` line (kimi: its own venv's python, never the bare script).
INTERPRETER_OF = re.compile(r"^\{interpreter-of:([^{}]+)\}$")


@dataclass(frozen=True)
class AgentSpec:
    name: str
    title: str
    command: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    #: How to get the program (a command or an instruction), shown when it is missing.
    install: str = ""
    passthrough: Optional[Passthrough] = None
    source: str = "built-in"
    #: Environment variables holding an API key the agent accepts instead of a login.
    env_keys: tuple[str, ...] = ()
    #: The command a person runs once to sign the agent in (its own CLI).
    login: str = ""
    #: Why the agent may take an MCP server and not start it, and what to do, shown
    #: by ``%status`` while it has not started the notebook server.
    mcp_note: str = ""
    #: The ids an ACP agent registry gives this agent (when not its name): data, for the merge.
    registry_ids: tuple[str, ...] = ()
    #: What a registry says of it (shown by ``acp-kernel agents``; never how it runs).
    version: str = ""
    description: str = ""
    homepage: str = ""
    #: For our own agents a registry also lists: "REGISTRY as ID VERSION".
    listed: str = ""

    def program(self) -> str:
        return self.command[0] if self.command else ""

    def display_name(self) -> str:
        """What a person calls this agent: its title, or for a command given
        on the command line the program (a launcher's package), not the whole line."""
        if self.source != "command line" or not self.command:
            return self.title
        launched = launched_package(self.command)
        return launched.name if launched else os.path.basename(self.program())


# -- launchers: programs that fetch the agent's package on first use ------------


@dataclass(frozen=True)
class Launcher:
    """A program that downloads a package (once, into its cache) and runs it.

    The package is the value of one of ``package_options`` if given, else the
    first argument that is not an option (nor the value of one of
    ``value_options``)."""

    name: str
    #: Whose cache holds the package ("npm", "uv"), or "" when it cannot be checked.
    cache: str = ""
    package_options: frozenset[str] = frozenset()
    value_options: frozenset[str] = frozenset()


LAUNCHERS: dict[str, Launcher] = {
    launcher.name: launcher
    for launcher in [
        Launcher("npx", "npm", frozenset({"-p", "--package"}),
                 frozenset({"-c", "--call", "--cache", "--registry", "--userconfig", "-w", "--workspace"})),
        Launcher("pnpx", "", frozenset({"--package"}), frozenset({"--dir", "-C"})),
        Launcher("bunx", "", frozenset({"-p", "--package"}), frozenset()),
        Launcher("uvx", "uv", frozenset({"--from"}),
                 frozenset({"--with", "--with-editable", "--with-requirements", "-p", "--python", "--index",
                            "--default-index", "-i", "--index-url", "--extra-index-url", "--cache-dir",
                            "-c", "--constraints", "--overrides", "--directory", "--project", "--config-file"})),
    ]
}


@dataclass(frozen=True)
class LaunchedPackage:
    launcher: Launcher
    #: As given on the command line (may carry a version: ``pkg@1.2``, ``pkg==1.2``).
    spec: str
    #: The package's name alone (``@scope/name``, ``name``).
    name: str


def _package_name(spec: str, cache: str) -> str:
    if cache == "uv" or "==" in spec or ">=" in spec:
        return re.split(r"[=<>!~\[;@ ]", spec, maxsplit=1)[0] or spec
    at = spec.find("@", 1)  # "@scope/name@1.2": the scope's "@" is the first character
    return spec[:at] if at > 0 else spec


def launched_package(command: tuple[str, ...] | list[str]) -> LaunchedPackage | None:
    """The package a launcher command (``npx --yes pkg``, ``uvx --from pkg cmd``) runs, or None."""
    if not command:
        return None
    launcher = LAUNCHERS.get(os.path.basename(command[0]))
    if launcher is None:
        return None
    args = list(command[1:])
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            i += 1
            break
        opt, eq, value = arg.partition("=")
        if opt in launcher.package_options:
            spec = value if eq else (args[i + 1] if i + 1 < len(args) else "")
            return LaunchedPackage(launcher, spec, _package_name(spec, launcher.cache)) if spec else None
        if arg.startswith("-"):
            i += 1 if eq or opt not in launcher.value_options else 2
            continue
        break
    if i >= len(args):
        return None
    spec = args[i]
    return LaunchedPackage(launcher, spec, _package_name(spec, launcher.cache))


def _npx(package: str) -> tuple[str, ...]:
    return ("npx", "--yes", "--prefer-offline", package)


ESC, CTRL_C, CTRL_U = "\x1b", "\x03", "\x15"
#: Lines no reply is made of: the input box and footers of the CLIs below.
_INK_CHROME = r"^\s*[>❯›]\s*$|\? for shortcuts|esc to (interrupt|cancel)"

#: The six real CLIs as they behaved under a PTY (tests/realclis/FINDINGS.md: claude-code
#: 2.1.197, codex 0.171, gemini-cli 0.61, pi 0.74, kimi-cli 1.52, opencode 1.18).
#:
#: ``mcp_args`` (a flag that loads an ``mcpServers`` JSON file), from each CLI's
#: ``--help`` and source in those versions:
#: - claude: ``--mcp-config <configs...>`` ("Load MCP servers from JSON files or
#:   strings"; variadic, so it goes last in argv);
#: - kimi: ``--mcp-config-file FILE`` (repeatable; ``json.loads`` of the file,
#:   ``mcpServers`` as claude's; ``--mcp-config`` takes a JSON *string*);
#: - codex: none (servers live in ``config.toml``; ``-c mcp_servers.NAME.command=...``
#:   overrides carry values, not a file);
#: - gemini: none (``settings.json`` ``mcpServers``; ``--allowed-mcp-server-names`` only filters);
#: - opencode: none (its ``mcp`` key in ``opencode.json`` / ``$OPENCODE_CONFIG``, another format, not argv);
#: - pi: none (no MCP client).
#: The other built-in agents (goose, qwen, copilot, cursor) were not installed to
#: check: none until someone does (a user can set ``agents.NAME.passthrough.mcp_args``).
PASSTHROUGH: dict[str, Passthrough] = {
    "claude": Passthrough(
        ("claude",), clear_input=CTRL_U, cancel_keys=((ESC, 0.0),),
        # busy: "esc to interrupt", cut short ("esc to inter…") when a notice shares the footer row
        ready_pattern=r"\? for shortcuts|❯", busy_pattern=r"esc to int",
        chrome_pattern=_INK_CHROME + r"|Ctrl\+Y to paste|^\s*[✻✽✶✳✢·]\s+\w+(ing…|ed for \d)|esc to int",
        # the input box: `❯ text` and indented continuation rows between two full-width rules (2.1.197)
        input_pattern=r"^─{20,}.*\n❯ ?(.*(?:\n(?!─{20,}).*)*)\n─{20,}",
        resume_args=("--continue",),
        # --allowedTools: the notebook server's tools without Claude Code's own "Do you want to
        # proceed?" (the server asks for execute itself); both flags take several values, so last.
        mcp_args=("--mcp-config", "{config}", "--allowedTools", "mcp__notebook"),
        install="npm install -g @anthropic-ai/claude-code"),
    "codex": Passthrough(
        ("codex",), clear_input=CTRL_U, cancel_keys=((ESC, 0.0),),  # Ctrl-C opens a dialog
        ready_pattern=r"Ask Codex to do anything|\? for shortcuts", busy_pattern=r"esc to interrupt|Working \(",
        chrome_pattern=_INK_CHROME + r"|Ask Codex to do anything|context left|^\s*›",
        # 0.171: the composer `› text` (its placeholder when empty), continuation rows indented; keys
        # typed during its start-up splash are dropped, and a submit then waits under "Waiting for startup"
        input_pattern=r"^› (.*(?:\n  \S.*)*)", input_placeholder=r"Ask Codex to do anything",
        startup_pattern=r"Waiting for startup",
        resume_args=("resume", "--last"), install="npm install -g @openai/codex"),
    "gemini": Passthrough(
        ("gemini",), clear_input=CTRL_U, cancel_keys=((ESC, 0.0),),  # a second Ctrl-C quits
        ready_pattern=r"Type your message", busy_pattern=r"esc to cancel",
        chrome_pattern=_INK_CHROME + r"|Type your message|context left|no sandbox",
        # 0.61: the input box ` > text` between a ▄ and a ▀ rule (the transcript echoes prompts in the
        # same box; the last one is the input), its placeholder when empty; keys typed while it starts are dropped
        input_pattern=r"^▄{20,}\n >(.*(?:\n(?!▀{20,}).*)*)\n▀{20,}",
        input_placeholder=r"Type your message or @path/to/file",
        resume_args=("--resume", "latest"), install="npm install -g @google/gemini-cli"),
    "pi": Passthrough(
        ("pi",), clear_input=CTRL_U, cancel_keys=((ESC, 0.0),),  # Ctrl-C only clears the editor
        ready_pattern=r"\d+\.\d%/\d+k", busy_pattern=r"Working\.\.\.",
        chrome_pattern=r"\d+\.\d%/\d+k", resume_args=("--continue",),
        install="npm install -g --ignore-scripts @earendil-works/pi-coding-agent"),
    "kimi": Passthrough(
        # kimi-cli 1.52's `kimi` script with no arguments pipes a remote installer into bash.
        ("{interpreter-of:kimi}", "-m", "kimi_cli.cli"),
        version_command=("{interpreter-of:kimi}", "-m", "kimi_cli.cli", "--version"),
        clear_input=CTRL_U, cancel_keys=((ESC, 0.0),),
        ready_pattern=r"── input ──", busy_pattern=r"Composing\.\.\.|[🌑🌒🌓🌔🌕🌖🌗🌘]",
        chrome_pattern=r"── input ──", resume_args=("--continue",),
        # 1.52 asks in its own TUI before every MCP tool call (no per-tool allow; --yolo would
        # approve its shell and file tools too): a box under its input rule, e.g.
        # "╭─ approval ─…╮ / │ execute is requesting approval to mcp:execute: │ / … / │ → [1] Approve
        # once │ … / │ ▲/▼ select  1/2/3/4 choose  ↵ confirm │ / ╰─…╯" (tests/realclis/FINDINGS.md)
        dialog_pattern=r"^╭─ approval ─.*\n((?:│.*\n?)+)",
        mcp_args=("--mcp-config-file", "{config}"), install="pip install kimi-cli"),
    "opencode": Passthrough(
        ("opencode",), clear_input=CTRL_U, cancel_keys=((ESC, 0.25), (ESC, 0.0)),  # Ctrl-C quits
        ready_pattern=r"Ask anything|ctrl\+p commands", busy_pattern=r"esc (again to )?interrupt",
        # its input box's agent/model row ("┃  Build · Stub model Stub") is no reply either: under load
        # it was all a first cell "got" before opencode's request (1.18.33, issue 23 sixth session)
        chrome_pattern=r"Ask anything|ctrl\+p commands|esc (again to )?interrupt|tab (agents|switch)|^\s*┃\s.* · ",
        resume_args=("--continue",), install="npm install -g opencode-ai"),
}


NODE_HINT = "install Node.js (which provides npx)"

BUILTIN: dict[str, AgentSpec] = {
    spec.name: spec
    for spec in [
        AgentSpec(
            "demo",
            "Demo agent (scripted, no model)",
            (sys.executable, "-m", "acp_kernel.demo.agent"),
            install="ships with acp-kernel",
            passthrough=Passthrough((sys.executable, "-m", "acp_kernel.demo.cli"), idle_seconds=0.5,
                                    clear_input=CTRL_U, ready_pattern=r"(?m)^>", busy_pattern=r"thinking…"),
        ),
        AgentSpec(
            "claude",
            "Claude Code",
            _npx("@agentclientprotocol/claude-agent-acp"),
            install=NODE_HINT,
            passthrough=PASSTHROUGH["claude"],
            env_keys=("ANTHROPIC_API_KEY",),
            login="claude",
            registry_ids=("claude-code-acp", "claude-acp"),
        ),
        AgentSpec(
            "codex",
            "Codex",
            _npx("@zed-industries/codex-acp"),
            install=NODE_HINT,
            passthrough=PASSTHROUGH["codex"],
            env_keys=("OPENAI_API_KEY",),
            login="codex login",
            registry_ids=("codex-acp",),
        ),
        AgentSpec(
            "gemini",
            "Gemini CLI",
            ("gemini", "--acp"),
            install="npm install -g @google/gemini-cli",
            passthrough=PASSTHROUGH["gemini"],
            env_keys=("GEMINI_API_KEY",),
            login="gemini",
            mcp_note=("Gemini CLI starts no MCP server in a folder it does not trust (its default): run `gemini` "
                      "in this folder once and trust it, or add the folder to ~/.gemini/trustedFolders.json"),
        ),
        AgentSpec(
            "kimi",
            "Kimi CLI",
            ("kimi", "acp"),
            install="pip install kimi-cli",
            passthrough=PASSTHROUGH["kimi"],
        ),
        AgentSpec(
            "goose",
            "Goose",
            ("goose", "acp"),
            install="see Goose's install guide",
            passthrough=Passthrough(("goose", "session")),
            login="goose configure",
        ),
        AgentSpec(
            "opencode",
            "OpenCode",
            ("opencode", "acp"),
            install="npm install -g opencode-ai",
            passthrough=PASSTHROUGH["opencode"],
            login="opencode auth login",
        ),
        AgentSpec(
            "qwen",
            "Qwen Code",
            ("qwen", "--acp"),
            install="npm install -g @qwen-code/qwen-code",
            passthrough=Passthrough(("qwen",)),
            login="qwen",
            registry_ids=("qwen-code",),
        ),
        AgentSpec(
            "copilot",
            "GitHub Copilot CLI",
            ("copilot", "--acp"),
            install="npm install -g @github/copilot",
            passthrough=Passthrough(("copilot",)),
            registry_ids=("github-copilot",),
        ),
        AgentSpec(
            "cursor",
            "Cursor",
            ("cursor-agent", "acp"),
            install="install Cursor's CLI (cursor-agent)",
            passthrough=Passthrough(("cursor-agent",)),
            env_keys=("CURSOR_API_KEY",),
            login="cursor-agent login",
        ),
        AgentSpec(
            "pi",
            "Pi",
            _npx("pi-acp"),
            install=NODE_HINT + "; for its own CLI: npm install -g --ignore-scripts @earendil-works/pi-coding-agent",
            passthrough=PASSTHROUGH["pi"],
        ),
    ]
}


# -- the config file, validated at the edge ----------------------------------


class _Strict(BaseModel):
    # Built when a config file is first validated, not at import (most starts have no file).
    model_config = ConfigDict(extra="forbid", defer_build=True)


class PassthroughConfig(_Strict):
    """Overrides of a :class:`Passthrough`: the fields given replace the built-in ones."""

    command: Optional[list[str]] = Field(None, min_length=1)
    submit: Optional[str] = None
    bracketed_paste: Optional[bool] = None
    idle_seconds: Optional[float] = Field(None, gt=0)
    submit_delay: Optional[float] = Field(None, ge=0)
    clear_input: Optional[str] = None
    #: Keys, each a string or ``[keys, pause seconds]``.
    cancel_keys: Optional[list[Union[str, tuple[str, float]]]] = Field(None, min_length=1)
    raw_mode: Optional[bool] = None
    ready_pattern: Optional[str] = None
    busy_pattern: Optional[str] = None
    chrome_pattern: Optional[str] = None
    input_pattern: Optional[str] = None
    input_placeholder: Optional[str] = None
    startup_pattern: Optional[str] = None
    dialog_pattern: Optional[str] = None
    ready_timeout: Optional[float] = Field(None, gt=0)
    cell_timeout: Optional[float] = Field(None, ge=0)
    version_command: Optional[list[str]] = None
    resume_args: Optional[list[str]] = None
    #: Arguments that load the generated MCP config file, ``{config}`` its path ([] none).
    mcp_args: Optional[list[str]] = None
    install: Optional[str] = None

    @field_validator("ready_pattern", "busy_pattern", "chrome_pattern", "input_pattern", "input_placeholder",
                     "startup_pattern", "dialog_pattern")
    @classmethod
    def _regex(cls, value: Optional[str]) -> Optional[str]:
        if value:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"not a regular expression ({exc})") from None
        return value

    @field_validator("mcp_args")
    @classmethod
    def _config_placeholder(cls, value: Optional[list[str]]) -> Optional[list[str]]:
        if value and not any("{config}" in word for word in value):
            raise ValueError('name the generated file as {config}, e.g. ["--mcp-config", "{config}"]')
        return value

    def apply(self, base: Optional[Passthrough]) -> Passthrough:
        given = self.model_dump(exclude_unset=True)
        for name in ("command", "version_command", "resume_args", "mcp_args"):
            if name in given:
                given[name] = tuple(given[name] or ())
        if "cancel_keys" in given:
            given["cancel_keys"] = tuple((k, 0.0) if isinstance(k, str) else (k[0], float(k[1]))
                                         for k in self.cancel_keys or ())
        if base is None:
            return Passthrough(**given)
        return dataclasses.replace(base, **given)


class AgentConfig(_Strict):
    title: Optional[str] = None
    command: Optional[list[str]] = Field(None, min_length=1)
    env: dict[str, str] = Field(default_factory=dict)
    install: Optional[str] = None
    passthrough: Optional[PassthroughConfig] = None
    env_keys: Optional[list[str]] = None
    login: Optional[str] = None


class ConfigFile(_Strict):
    default_agent: Optional[str] = None
    permissions: Optional[Literal["ask", "allow-reads", "allow-all", "deny"]] = None
    shell_fallback: Optional[bool] = None
    extra_roots: list[str] = Field(default_factory=list)
    #: How often a streaming answer is redrawn. 10/s keeps the browser cheap;
    #: higher shows each word sooner (lower latency) for more frontend traffic.
    refresh_hz: Optional[float] = Field(None, gt=0, le=240)
    agents: dict[str, AgentConfig] = Field(default_factory=dict)
    #: Overrides of :class:`acp_kernel.client.host.Limits` (names as there).
    limits: dict[str, float] = Field(default_factory=dict)
    mcp_servers: list[dict[str, Any]] = Field(default_factory=list)
    #: Offer the ``notebook`` MCP server to agents (inside a Jupyter kernel).
    mcp: Optional[bool] = None
    #: An ACP agent registry index: a path, or an http(s):// or file:// URL.
    registry: Optional[str] = Field(None, min_length=1, max_length=4096)


class ConfigError(AcpError):
    """A config file that cannot be used; the message names the key and the fix."""


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
    #: Offer the ``notebook`` MCP server (``"mcp": false`` in the file turns it off).
    notebook_mcp: bool = True
    refresh_hz: float = 10.0
    limits: Limits = field(default_factory=Limits)
    path: Path | None = None
    #: The registry index read (a path or URL), if any, and what went wrong or was skipped in it.
    registry: str | None = None
    registry_notes: list[str] = field(default_factory=list)

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


def load_config(path: Path | None = None, *, missing_ok: bool = True, refresh_registry: bool = False) -> Config:
    """The built-in agents merged with the config file (absent: none).

    ``missing_ok=False`` (the command line) makes a ``$ACP_KERNEL_CONFIG``
    that names no file an error: a mistyped path must not silently mean
    "no settings". An empty file is a file with no settings (``/dev/null`` works).
    ``refresh_registry`` fetches a registry URL even when its cached copy is fresh.
    """
    from_env = path is None and bool(os.environ.get("ACP_KERNEL_CONFIG"))
    path = path or config_path()
    data: dict[str, Any] = {}
    if from_env and not missing_ok and not path.exists():
        raise ConfigError(
            f"ACP_KERNEL_CONFIG={str(path)!r}: no such file -> fix: create it (an empty file means no "
            f"settings), or unset ACP_KERNEL_CONFIG to use {default_config_path()}"
        )
    if path.exists():
        try:
            raw = path.read_text(encoding="utf-8")
            data = json.loads(raw) if raw.strip() else {}
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
    registry = os.environ.get("ACP_KERNEL_REGISTRY") or _beside(cfg.registry, path)
    registry_notes: list[str] = []
    # The registry was named but gave no index (unfetched, unreadable, malformed): its agents are missing.
    registry_failed = False
    if registry:
        listing = read_registry(registry, refresh=refresh_registry)
        registry_failed = not listing.index
        agents, registry_notes = merge_registry(agents, listing)
    for name, over in cfg.agents.items():
        base = agents.get(name)
        if base is None and over.command is None and registry_failed:
            # an override of a registry agent the registry did not give this time: not the user's mistake
            registry_notes.append(f"agents.{name} in {path}: left out, the registry gave no agent {name!r}")
            continue
        if base is None and over.command is None:
            raise ConfigError(
                f"{path}: agents.{name}: a new agent needs a command -> fix: add "
                f'"command": ["program", "arg", ...]'
            )
        base_pt = base.passthrough if base else None
        if over.passthrough is not None and base_pt is None and not over.passthrough.command:
            raise ConfigError(
                f"{path}: agents.{name}.passthrough: {name} has no built-in CLI -> fix: add "
                f'"command": ["program", "arg", ...]'
            )
        passthrough = over.passthrough.apply(base_pt) if over.passthrough is not None else base_pt
        agents[name] = dataclasses.replace(
            base or AgentSpec(name, name, ()),
            title=over.title or (base.title if base else name),
            command=tuple(over.command) if over.command else base.command,  # type: ignore[union-attr]
            env={**(base.env if base else {}), **over.env},
            install=over.install or (base.install if base else ""),
            passthrough=passthrough,
            source=str(path) if base is None else f"{base.source}, overridden in {path}",
            env_keys=tuple(over.env_keys) if over.env_keys is not None else (base.env_keys if base else ()),
            login=over.login if over.login is not None else (base.login if base else ""),
        )
    chosen = os.environ.get("ACP_KERNEL_AGENT")
    if chosen and chosen not in agents:
        raise ConfigError(
            f"ACP_KERNEL_AGENT={chosen!r} is not a known agent -> fix: use one of "
            + ", ".join(sorted(agents))
            + (f" (or add it under \"agents\" in {path})" if path.exists() else "") + ", or unset ACP_KERNEL_AGENT"
        )
    default = chosen or cfg.default_agent or "demo"
    if default not in agents and not chosen and registry_failed:
        registry_notes.append(f"default_agent {default!r}: the registry did not give it; the demo agent instead")
        default = "demo"
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
        notebook_mcp=True if cfg.mcp is None else cfg.mcp,
        refresh_hz=_refresh_hz(cfg.refresh_hz, path),
        limits=_limits(cfg.limits, path),
        path=path,
        registry=registry,
        registry_notes=registry_notes,
    )


def _beside(registry: str | None, config: Path) -> str | None:
    """The config file's ``registry``: a relative path is relative to the config file's folder."""
    if not registry or is_url(registry) or os.path.isabs(os.path.expanduser(registry)):
        return registry
    return str(config.parent / registry)


#: How to get a registry agent's launcher, for the not-found message.
LAUNCHER_HINTS = {"npx": NODE_HINT, "uvx": "install uv (which provides uvx)"}


def merge_registry(agents: dict[str, AgentSpec], listing: Listing) -> tuple[dict[str, AgentSpec], list[str]]:
    """Our agents with a registry's (``listing``) merged in, and the notes to show.

    The rules:

    - A registry entry is one of ours when its id is our agent's name or one
      of its ``registry_ids`` (data in :data:`BUILTIN`). Ours wins every field
      we define: command, env, title, install hint, sign-in, passthrough and
      its quirks, notes. The registry adds only what it says of the agent,
      for display: ``version``, ``description``, ``homepage`` and ``listed``
      (so an entry we cannot run, binary only, still annotates ours).
    - Any other entry we can run (npx or uvx) is a new agent named by its id,
      launched with its argv (:func:`acp_registry.launch_argv`) and the
      entry's env; it has no passthrough CLI (the registry knows nothing of
      PTYs) and its source is ``registry SOURCE``.
    - The config file is applied after this (:func:`load_config`): the user
      may override a registry agent's fields as a built-in's.

    The notes: what went wrong with the index, and each entry skipped
    (invalid, duplicated, not runnable here) except those that are ours anyway.
    """
    merged = dict(agents)
    ours = {rid: name for name, spec in agents.items() for rid in (spec.name, *spec.registry_ids)}
    for rid, entry in listing.listed.items():
        name = ours.get(rid)
        if name is not None:
            merged[name] = dataclasses.replace(
                merged[name], version=entry.version, description=entry.description,
                homepage=entry.repository or "", listed=f"registry {listing.source} as {rid} {entry.version}")
    for agent in listing.agents:
        if agent.id in ours:
            continue
        merged[agent.id] = AgentSpec(
            name=agent.id, title=agent.name, command=agent.command, env=dict(agent.env),
            install=LAUNCHER_HINTS.get(agent.kind, ""), source=f"registry {listing.source}",
            version=agent.version, description=agent.description, homepage=agent.homepage)
    notes = list(listing.notes)
    notes += [f"{rid}: skipped, {why}" for rid, why in listing.skipped.items() if rid not in ours]
    return merged, notes


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
    try:
        argv = shlex.split(command) if isinstance(command, str) else list(command)
    except ValueError as exc:  # "No closing quotation", "No escaped character"
        raise AcpError(f"cannot read the agent command {command!r}: {str(exc).lower()}") from None
    if not argv or not argv[0]:
        raise AcpError("empty agent command: give a program and its arguments, e.g. 'my-agent --acp'")
    return AgentSpec(name=name, title=" ".join(argv), command=tuple(argv), source="command line")

