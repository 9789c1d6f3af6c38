"""One command table for every front-end: the ACP kernel's ``%verb`` lines and
the magics' ``%acp verb`` lines.

Each :class:`Verb` has its words (usage and help), the front-ends it exists in,
and the arguments it takes; :func:`parse` reads a line by the table, so both
front-ends accept the same arguments and say the same usage errors. What a
verb *does* lives in :mod:`acp_kernel.client.controller`. Pure: no I/O here.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from ..errors import AcpError
from ..safe import Markdown, code

KERNEL = "kernel"
MAGICS = "magics"
BOTH = frozenset({KERNEL, MAGICS})
POLICIES = ("ask", "allow-reads", "allow-all", "deny")

#: Option kinds: ``value`` takes one word, ``flag`` none, ``command`` the words
#: up to the next option of the verb (one quoted word is split like a shell).
VALUE, FLAG, COMMAND = "value", "flag", "command"


class UsageError(AcpError, ValueError):
    """A command line that does not fit its verb: shown as one line, never a traceback."""


@dataclass(frozen=True)
class Verb:
    name: str
    args: str  # the argument part of the usage line
    help: str
    frontends: frozenset = BOTH
    positional: tuple[str, ...] = ()  # names; a trailing "?" marks an optional one
    options: dict[str, str] = field(default_factory=dict)
    choices: tuple[str, ...] = ()  # allowed values of the first positional
    #: In the magics, the verb acts on one connection, chosen with ``--as ALIAS``.
    per_connection: bool = True
    #: Usage in a front-end when it differs (passthrough takes other words in each).
    args_in: dict[str, str] = field(default_factory=dict)
    #: The rest of the line is taken as written (:attr:`Call.rest`), not split
    #: like a shell: ``%set`` values are JSON, whose quotes shlex would eat.
    raw: bool = False

    def usage(self, frontend: str) -> str:
        args = self.args_in.get(frontend, self.args)
        if frontend == MAGICS and self.per_connection:
            args = f"{args} [--as ALIAS]".strip()
        prefix = "%acp " if frontend == MAGICS else "%"
        return f"{prefix}{self.name} {args}".rstrip()


_AS = {"--as": VALUE}

VERBS: dict[str, Verb] = {v.name: v for v in (
    Verb("connect", "NAME | --command CMD [--cwd DIR] [--permissions P] [--no-mcp] [--as ALIAS]",
         "start an agent and open a session (the new default connection); `--no-mcp`: no `notebook` MCP server",
         frozenset({MAGICS}), ("name?",),
         {"--command": COMMAND, "--cwd": VALUE, "--permissions": VALUE, "--no-mcp": FLAG, **_AS}, per_connection=False),
    Verb("disconnect", "[ALIAS ...]", "close connections (default: the default one)", frozenset({MAGICS}),
         ("alias*",), per_connection=False),
    Verb("agent", "NAME | --command CMD", "switch to another agent (a known name or any ACP command)",
         frozenset({KERNEL}), ("name?",), {"--command": COMMAND}),
    Verb("agents", "", "the agents this machine knows, and whether they are installed", per_connection=False),
    Verb("set", "NAME VALUE", "a value later prompts use as `{NAME}` (VALUE is JSON, or text); "
         "papermill's `-p` parameters arrive this way", frozenset({KERNEL}), ("name", "value*"),
         per_connection=False, raw=True),
    Verb("new", "", "start a fresh session with the current agent"),
    Verb("sessions", "[delete ID]", "list the agent's sessions for this directory, with their titles and last "
         "activity; `delete ID` deletes one (not the current one: `new` first)", positional=("action?", "id?")),
    Verb("load", "ID", "reopen a session (resume, or load with its history replayed)", positional=("id",)),
    Verb("mode", "[ID]", "list the agent's modes, or set one", positional=("id?",)),
    Verb("model", "[ID]", "list the agent's models, or set one", positional=("id?",)),
    Verb("config", "[ID VALUE]", "list the session's config options, or set one", positional=("id?", "value?")),
    Verb("permissions", "[" + "|".join(POLICIES) + "]", "how permission requests are answered",
         positional=("policy?",), choices=POLICIES),
    Verb("cwd", "[DIR] | add DIR | remove DIR", "the working directory for new sessions; `add`/`remove`: "
         "other workspace roots given with it (to agents that take `additionalDirectories`)",
         positional=("dir?", "more?")),
    Verb("auth", "METHOD", "let the agent authenticate with one of its methods", positional=("method",)),
    Verb("logout", "", "log out of the agent (where it offers `logout`); new sessions need a login again"),
    Verb("status", "", "agent, session, mode, model, usage and policy"),
    Verb("cancel", "", "cancel the running turn", frozenset({MAGICS})),
    Verb("restart", "", "restart the agent process (keeps the session where the agent can)"),
    Verb("passthrough", "", "run the agent's own CLI in a terminal here; the next cells are typed into it",
         positional=("words*",), options={"--command": COMMAND, "--cwd": VALUE, **_AS}, per_connection=False,
         args_in={KERNEL: "[AGENT | --command CMD] | off | stop [NAME] | list",
                  MAGICS: "[NAME | --command CMD] [--cwd DIR] [--as ALIAS]"}),
    Verb("help", "", "this list", per_connection=False),
)}

#: Cell magics, for the help table: (front-end, usage, help).
CELL_MAGICS = (
    (MAGICS, "%%acp [ALIAS] [--no-interpolate] [--attach VAR]",
     "the cell is the prompt; `{name}` puts a variable's value in"),
    (BOTH, "%%shell [--pwsh] [--timeout S] [--limit BYTES] [--cwd DIR] [--env K=V] [--show-argv] [--raise]",
     "run the rest of the cell as one shell line (fresh shell, output streamed)"),
)


def verbs(frontend: str) -> list[Verb]:
    return [v for v in VERBS.values() if frontend in v.frontends]


@dataclass
class Call:
    """A parsed command line: the verb, its positionals and options."""

    verb: Verb
    args: list[str] = field(default_factory=list)
    options: dict[str, object] = field(default_factory=dict)
    line: str = ""
    #: The text after the verb, as written (for a :attr:`Verb.raw` verb).
    rest: str = ""

    def arg(self, i: int) -> str | None:
        return self.args[i] if i < len(self.args) else None

    def option(self, name: str) -> object:
        return self.options.get(name)

    def text(self, name: str) -> str | None:
        """A one-word option's value (``--as NAME``); None when not given."""
        value = self.options.get(name)
        return value if isinstance(value, str) else None

    def words(self, name: str) -> list[str]:
        """A rest-of-line option's words (``--command CMD ARGS...``); [] when not given."""
        value = self.options.get(name)
        return [str(w) for w in value] if isinstance(value, (list, tuple)) else []


def split(line: str, prog: str) -> list[str]:
    try:
        return shlex.split(line)
    except ValueError as exc:
        raise UsageError(f"{prog}: {exc}") from None


def parse_line(body: str, frontend: str, line: str = "") -> Call:
    """A command line's text after the ``%`` (kernel) or ``%acp`` (magics);
    ``line`` is the whole line, for messages. A :attr:`Verb.raw` verb keeps
    the rest of the line as written; any other is split like a shell and
    read by :func:`parse`."""
    body = body.strip()
    line = line or body
    name = body.split(None, 1)[0] if body else ""
    verb = VERBS.get(name)
    if verb is not None and verb.raw and frontend in verb.frontends:
        call = Call(verb, line=line, rest=body[len(name):].strip())
        call.args = call.rest.split(None, 1)
        _check_positionals(call, f"usage: {verb.usage(frontend)}")
        return call
    return parse(split(body, line.split(None, 1)[0] if line.strip() else "%"), frontend, line)


def parse(words: list[str], frontend: str, line: str = "") -> Call:
    """Words after the ``%`` (kernel) or ``%acp`` (magics), verb first."""
    prefix = "%acp" if frontend == MAGICS else "%"
    if not words:
        raise UsageError(f"usage: {prefix} " + "|".join(v.name for v in verbs(frontend))
                         if frontend == MAGICS else "empty command line '%'")
    verb = VERBS.get(words[0])
    if verb is None or frontend not in verb.frontends:
        where = "" if verb is None else f" (it exists in the {'magics' if frontend == KERNEL else 'ACP kernel'} only)"
        hint = "%acp help" if frontend == MAGICS else "%help"
        raise UsageError(f"unknown command {words[0]!r}{where}; try {hint}")
    options = dict(verb.options)
    if frontend == MAGICS and verb.per_connection:
        options.update(_AS)
    call = Call(verb, line=line or " ".join(words), rest=" ".join(words[1:]) if verb.raw else "")
    rest = list(words[1:])
    usage = f"usage: {verb.usage(frontend)}"
    i = 0
    while i < len(rest):
        word = rest[i]
        kind = options.get(word)
        if kind is None and word.startswith("--") and len(word) > 2:
            raise UsageError(f"unknown option {word}; {usage}")
        if kind is None:
            call.args.append(word)
            i += 1
        elif kind == FLAG:
            call.options[word] = True
            i += 1
        elif kind == VALUE:
            if i + 1 >= len(rest):
                raise UsageError(f"{word} needs a value; {usage}")
            call.options[word] = rest[i + 1]
            i += 2
        else:  # COMMAND: words up to the next option of this verb
            j = i + 1
            while j < len(rest) and rest[j] not in options:
                j += 1
            argv = rest[i + 1:j]
            if len(argv) == 1:
                argv = split(argv[0], word)
            if not argv:
                raise UsageError(f"{word} needs a program, e.g. {word} 'my-agent --acp'")
            call.options[word] = argv
            i = j
    _check_positionals(call, usage)
    perm = call.options.get("--permissions")
    if perm is not None and perm not in POLICIES:
        raise UsageError(f"--permissions: invalid choice {perm!r} (choose from {', '.join(POLICIES)})")
    return call


def _check_positionals(call: Call, usage: str) -> None:
    spec = call.verb.positional
    many = any(p.endswith("*") for p in spec)
    required = sum(1 for p in spec if not p.endswith(("?", "*")))
    if len(call.args) < required or (not many and len(call.args) > len(spec)):
        raise UsageError(usage)
    if call.verb.choices and call.args and call.args[0] not in call.verb.choices:
        raise UsageError(usage)


def help_markdown(frontend: str) -> Markdown:
    """The help table for a front-end, straight from :data:`VERBS`."""
    def row(usage: str, text: str) -> str:
        # A "|" inside a table cell ends it, even inside backticks: safe.code
        # writes such code as a <code> element with "|" as a reference (no
        # backslash escape, which JupyterLab's math pre-pass would see).
        return "| " + str(code(usage)) + f" | {text} |"

    rows = [row(v.usage(frontend), v.help) for v in verbs(frontend)]
    rows += [row(usage, text) for where, usage, text in CELL_MAGICS if frontend in where]
    if frontend == KERNEL:
        intro = ("Each cell is a prompt for the agent. `/name args` runs an agent slash command; "
                 "`@path` attaches a file. Lines starting with `%` at the top of a cell are kernel commands:")
    else:
        intro = ("`%acp` commands (also inside `for`/`if` blocks and `async def`); "
                 "in Python, `agent = await acp_kernel.connect(\"demo\")` then `await agent.prompt(...)`:")
    return Markdown(intro + "\n\n| command | what it does |\n|---|---|\n" + "\n".join(rows))


def help_plain(frontend: str) -> str:
    """The same table as plain lines (IPython's ``%acp?`` docstring, consoles)."""
    lines = [f"{v.usage(frontend)}   {v.help}" for v in verbs(frontend)]
    lines += [f"{usage}   {text}" for where, usage, text in CELL_MAGICS if frontend in where]
    return "\n".join(lines)
