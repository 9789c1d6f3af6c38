"""A turn as plain markdown: the fallback of every live output and the transcript.

Whatever a widget shows live, the same thing exists here as markdown, so
nbclient runs, GitHub and frontends without widgets read the whole turn.
Every piece of agent text goes through :mod:`acp_kernel.safe`: each function
returns :class:`~acp_kernel.safe.Markdown` built from our own templates with
agent strings escaped (``text``, ``code``, ``block``) or vetted (``markdown``).
Pure functions over
the turn's state and events (terminal objects are only read).
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from ..services import events as se
from ..client import turn as tm
from .diff import diff_from_content
from .eventtable import unhandled
from .markdown import BlockSplitter
from ..safe import (Html, Markdown, block, block_forms, code, code_forms, html, inert_html_inner, markdown, text,
                    text_forms)
from .truncate import truncate_head, truncate_tail

KIND_ICONS = {
    "read": "📖",
    "edit": "✏️",
    "delete": "🗑️",
    "move": "📦",
    "search": "🔍",
    "execute": "💻",
    "think": "💭",
    "fetch": "🌐",
    "switch_mode": "🔀",
    "other": "🔧",
}
STATUS = {  # ACP status -> (glyph, label)
    "pending": ("○", "pending"),
    "in_progress": ("◐", "running"),
    "completed": ("✓", "done"),
    "failed": ("✗", "failed"),
    "cancelled": ("⊘", "cancelled"),
}
NOTICE_ICONS = {"info": "ℹ️", "warning": "⚠️", "error": "❌"}
MD_TEXT_LIMIT = 4000  # per text/terminal part in markdown fallbacks
PLAIN_OUTPUT_LIMIT = 2000  # characters of output in a tool call's final text line


def kind_icon(kind: str | None) -> str:
    return KIND_ICONS.get(kind or "other", KIND_ICONS["other"])


def status_text(status: str) -> str:
    glyph, label = STATUS.get(status, ("?", status))
    return f"{glyph} {label}"


@dataclass
class TerminalSnapshot:
    """What a tool call shows of one terminal."""

    terminal_id: str
    command: str = ""
    output: str = ""
    truncated: bool = False
    exit: str = ""  # "" while running, else e.g. "exit code 0"
    note: str = ""


def snapshot(started: se.TerminalStarted) -> TerminalSnapshot:
    term = started.terminal
    output, truncated = term.output()
    status = term.exit_status
    return TerminalSnapshot(
        started.terminal_id,
        shlex.join(started.argv),
        output,
        truncated,
        str(status) if status is not None else "",
        started.note,
    )


def location_text(loc: Any) -> str:
    if not isinstance(loc, dict):
        return str(loc)
    path = str(loc.get("path") or "?")
    line = loc.get("line")
    return f"{path}:{line}" if isinstance(line, int) else path


#: Our own words of a row's header, escaped once: :func:`~acp_kernel.safe.text` is pure,
#: so these are what it makes of them on every row (an unknown status is escaped each time).
_ICON_MD = {icon: text(icon) for icon in KIND_ICONS.values()}
_STATUS_FORMS = {status: text_forms(status_text(status)) for status in STATUS}


def tool_call_header_forms(call: tm.ToolCall) -> tuple[Markdown, Html]:
    """A tool call's header line (icon, title, status) and its paragraph's HTML (the
    parse's, written directly: a property test compares the two)."""
    if call.title:
        title_md, title_html = text_forms(call.title)
    else:
        id_md, id_html = code_forms(call.id)
        title_md, title_html = Markdown(f"tool call {id_md}"), Html(f"tool call {id_html}")
    status_md, status_html = _STATUS_FORMS.get(call.status) or text_forms(status_text(call.status))
    icon = kind_icon(call.kind)
    # (each piece is our Markdown or Html already: joined as text, not through format's checks)
    return (Markdown(f"{_ICON_MD[icon]} {title_md} · {status_md}"),
            Html(f"<p>{icon} {title_html} · {status_html}</p>\n"))


def tool_call_plain(call: tm.ToolCall) -> str:
    title = " ".join(call.title.split("\n")) if call.title else f"tool call {call.id}"
    return f"{kind_icon(call.kind)} {title} · {status_text(call.status)}"


class CallFacts(NamedTuple):
    """What both the body and the final lines of a call read from its payloads, read once
    for a row's forms (:func:`call_facts`)."""

    command: str  #: :attr:`ToolCall.command`
    terminal_ids: list[str]  #: :attr:`ToolCall.terminal_ids`
    output: tuple[str, bool, int | None]  #: :func:`call_output`


def call_facts(call: tm.ToolCall) -> CallFacts:
    return CallFacts(call.command, call.terminal_ids, call_output(call))


def call_output(call: Any) -> tuple[str, bool, int | None]:
    """Command output an agent sent outside ``content`` (``rawOutput``,
    ``_meta.terminal_output``), whether its start was dropped, and the exit
    code: ``ToolCall.output`` / ``output_dropped`` / ``exit_code``."""
    output = getattr(call, "output", "") or ""
    dropped = bool(getattr(call, "output_dropped", 0))
    code_ = getattr(call, "exit_code", None)
    return (output if isinstance(output, str) else str(output)), dropped, (code_ if isinstance(code_, int) else None)


#: A part of a tool call's body: its markdown, the HTML :func:`~acp_kernel.safe.inert_html`
#: makes of it within a document (None: only the parse knows), and whether that HTML is
#: our own HTML block (the document's last one ends without its newline).
Part = tuple[Markdown, "Html | None", bool]

# Our own words in emphasis whose HTML is written directly: no character markdown reads
# differently at a line's start or end, nothing inline (a property test compares with the parse).
_EM_PLAIN = re.compile(r"[\w(][\w .,:()/+-]*[\w)]|\w")


def _em(words: str, md: Markdown | None = None) -> Part:
    """``*words*`` (or ``md``, which reads ``words``), a line of our own (an exit code, a note)."""
    md = Markdown("*{}*").format(words) if md is None else md
    return md, (Html(f"<p><em>{words}</em></p>\n") if _EM_PLAIN.fullmatch(words) else None), False


def _output_parts(output: str, dropped: bool, exit_code: int | None, limit: int = MD_TEXT_LIMIT) -> list[Part]:
    """The agent-sent command output (:func:`call_output`) as a fenced block (its fence
    longer than any backtick run inside) and the exit code; none when there is neither."""
    parts: list[Part] = []
    if output:
        out, cut = truncate_head(output, limit)
        parts.append(block_forms(("...\n" if cut or dropped else "") + out, "console"))
    if exit_code is not None:
        parts.append(_em(f"exit code {exit_code}", Markdown("*exit code {}*").format(str(exit_code))))
    return parts


def _indented(text: str, limit: int) -> list[str]:
    out, cut = truncate_head(text, limit)
    lines = out.rstrip("\n").split("\n")
    return (["    ..."] if cut else []) + ["    " + ln for ln in lines]


def tool_call_final_plain(call: tm.ToolCall, terminals: Mapping[str, TerminalSnapshot] | None = None,
                          limit: int = PLAIN_OUTPUT_LIMIT, *, header: str | None = None,
                          facts: CallFacts | None = None) -> str:
    """A tool call in its final state as text (a terminal frontend's last
    word on it): the header line (``header`` when the caller has
    :func:`tool_call_plain` already), then :func:`tool_call_final_lines`."""
    lines = tool_call_final_lines(call, terminals, limit, facts=facts)
    lines.insert(0, tool_call_plain(call) if header is None else header)
    return "\n".join(lines)


def tool_call_final_lines(call: tm.ToolCall, terminals: Mapping[str, TerminalSnapshot] | None = None,
                          limit: int = PLAIN_OUTPUT_LIMIT, *, facts: CallFacts | None = None) -> list[str]:
    """The lines under a finished call's header, each indented by four: the command, then
    the end of its output (a client terminal's, or what the agent sent) and the exit code.
    Payloads that cannot hold what a line shows are not read (:attr:`ToolCall.command`)."""
    lines: list[str] = []
    cmd, tids, (output, dropped, exit_code) = facts or call_facts(call)
    terms = terminals or {}
    if cmd and not tids:
        lines.append("    $ " + " ".join(truncate_tail(cmd, 500)[0].split("\n")))
    shown_terminal = False
    for tid in tids if terms else ():
        snap = terms.get(tid)
        if snap is None:
            continue
        shown_terminal = True
        if snap.command:
            lines.append("    $ " + snap.command)
        if snap.output:
            lines.extend(_indented(snap.output, limit))
        if snap.exit:
            lines.append(f"    ({snap.exit})")
    if shown_terminal:
        return lines
    if output:
        if dropped:
            lines.append("    ...")
        lines.extend(_indented(output, limit))
    if exit_code is not None:
        lines.append(f"    (exit code {exit_code})")
    if not output:
        text = call.text
        if text:
            lines.extend(_indented(text, limit))
    return lines


def tool_call_markdown(call: tm.ToolCall, terminals: Mapping[str, TerminalSnapshot] | None = None) -> Markdown:
    """Header line, then :func:`tool_call_body` (the transcript's; a row makes both forms at once)."""
    head, body = tool_call_header_forms(call)[0], tool_call_body(call, terminals)
    return Markdown("\n\n").join([head, body] if body else [head])


def tool_call_body(call: tm.ToolCall, terminals: Mapping[str, TerminalSnapshot] | None = None) -> Markdown:
    """A call's content below its header: text, diffs, terminal output, locations.

    A ``terminal`` item this client has no terminal for (the agent's own,
    reported through ``_meta``) shows the output the agent sent instead."""
    return Markdown("\n\n").join(p[0] for p in _body_parts(call, terminals))


def tool_call_body_forms(call: tm.ToolCall, terminals: Mapping[str, TerminalSnapshot] | None = None, *,
                         facts: CallFacts | None = None) -> tuple[Markdown, Html]:
    """:func:`tool_call_body` and its HTML (:func:`~acp_kernel.safe.inert_html_inner`), made
    together: each part's HTML written as it is made, the parse only for a part that has none
    (a finished turn keeps hundreds of rows; parsing each body cost 65 us)."""
    parts = _body_parts(call, terminals, facts)
    if not parts:
        return Markdown(""), Html("")
    md = Markdown("\n\n".join([p[0] for p in parts]))  # (each part is our Markdown: Part)
    htmls = [p[1] for p in parts]
    if None in htmls:
        return md, inert_html_inner(md)
    out = "".join(htmls)  # type: ignore[arg-type]  # (None is not in it)
    return md, Html(out[:-1] if parts[-1][2] else out)


def _body_parts(call: tm.ToolCall, terminals: Mapping[str, TerminalSnapshot] | None,
                facts: CallFacts | None = None) -> list[Part]:
    parts: list[Part] = []
    cmd, tids, output = facts or call_facts(call)
    if cmd and not tids:
        parts.append(block_forms("$ " + truncate_tail(cmd, 500)[0], "sh"))
    agent_output = _output_parts(*output)
    output_shown = terminal_shown = False
    for item in call.content:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "content":
            inner = item.get("content")
            if isinstance(inner, dict) and isinstance(inner.get("text"), str):
                # Tool output is text, not the agent's prose: a file's "# title" stays a line of it.
                body, cut = truncate_tail(inner["text"], MD_TEXT_LIMIT)
                parts.append(block_forms(body, "text"))
                if cut:
                    parts.append(_em("(cut)"))
            elif isinstance(inner, dict):
                parts.append((Markdown("*[{}]*").format(str(inner.get("type", "content"))), None, False))
        elif kind == "diff":
            view = diff_from_content(item, max_lines=400)
            path_md, path_html = code_forms(view.path)
            stats = view.stats
            parts.append((Markdown("{} {}").format(path_md, stats),
                          Html(f"<p>{path_html} {stats}</p>\n") if _EM_PLAIN.fullmatch(stats) else None, False))
            parts.append(block_forms(view.text(), "diff"))
        elif kind == "terminal":
            tid = item.get("terminalId")
            snap = (terminals or {}).get(tid) if isinstance(tid, str) else None
            if snap is None and agent_output:
                if not output_shown:
                    parts.extend(agent_output)
                    output_shown = True
                continue
            parts.extend(_terminal_parts(snap, tid))
            terminal_shown = terminal_shown or snap is not None
    # The client's own terminal already showed the output and its exit code (as in the text).
    if agent_output and not output_shown and not terminal_shown:
        parts.extend(agent_output)
    if call.locations:
        items = [code_forms(location_text(loc)) for loc in call.locations]
        # Our own words around Markdown and Html made by code_forms: joined as text.
        parts.append((Markdown("\n".join([f"- 📍 {md}" for md, _ in items])),
                      Html("<ul>\n" + "".join([f"<li>📍 {h}</li>\n" for _, h in items]) + "</ul>\n"), False))
    return parts


def _terminal_parts(snap: TerminalSnapshot | None, tid: Any = None) -> list[Part]:
    if snap is None:
        tid_md, tid_html = code_forms(str(tid))
        return [(Markdown("*terminal {} (output not available)*").format(tid_md),
                 Html(f"<p><em>terminal {tid_html} (output not available)</em></p>\n"), False)]
    out, cut = truncate_head(snap.output, MD_TEXT_LIMIT)
    head = f"$ {snap.command}\n" if snap.command else ""
    parts: list[Part] = [block_forms(head + ("...\n" if cut or snap.truncated else "") + out, "console")]
    if snap.exit:
        parts.append(_em(snap.exit))
    return parts


def plan_markdown(entries: Iterable[dict[str, Any]]) -> Markdown:
    lines = [Markdown("**Plan**"), Markdown("")]
    for e in entries:
        content = text(str(e.get("content", "")))
        status = e.get("status")
        if status == "completed":
            lines.append(Markdown("- [x] {}").format(content))
        elif status == "in_progress":
            lines.append(Markdown("- [ ] ◐ **{}** *(in progress)*").format(content))
        else:
            lines.append(Markdown("- [ ] {}").format(content))
    return Markdown("\n").join(lines)


def plan_text(entries: Iterable[dict[str, Any]]) -> str:
    marks = {"completed": "[x]", "in_progress": "[~]"}
    return "Plan:\n" + "\n".join(f"  {marks.get(str(e.get('status')), '[ ]')} {e.get('content', '')}" for e in entries)


def notice_markdown(level: str, message: str) -> Markdown:
    """A notice: its text is ours or quotes the agent, so it is shown literally
    (lines kept) rather than rendered as the agent's markdown."""
    icon = NOTICE_ICONS.get(level, "ℹ️")
    label = Markdown("**{}:** ").format(level) if level in ("warning", "error") else Markdown("")
    lines = str(message).split("\n")
    return Markdown("{} {}").format(icon, label) + Markdown("  \n").join(text(line) for line in lines)


def thought_markdown(thought: str) -> Markdown:
    return Markdown("<details><summary>Thinking</summary>\n\n{}\n\n</details>").format(markdown(thought))


def thought_html(thought: str) -> Html:
    return Html('<details><summary>Thinking</summary><div style="white-space:pre-wrap;opacity:.8">{}</div></details>').format(html(thought))


def user_markdown(prompt: str) -> Markdown:
    quoted = Markdown("**You:** ") + markdown(prompt)
    return Markdown("\n").join(Markdown("> ") + Markdown(line) for line in quoted.split("\n"))


def unknown_markdown(kind: str, raw: Any) -> Markdown:
    try:
        body = json.dumps(raw, indent=1, default=repr)
    except (TypeError, ValueError):
        body = repr(raw)
    body, _ = truncate_tail(body, 2000)
    return Markdown("<details><summary>unknown update <code>{}</code></summary>\n\n{}\n\n</details>").format(
        Markdown(html(str(kind))), block(body, "json"))


def option_name(options: list[dict[str, Any]], option_id: str | None) -> str:
    for o in options:
        if o.get("optionId") == option_id:
            return str(o.get("name") or option_id)
    return str(option_id)


def permission_markdown(prompt: se.PermissionPrompt, outcome: Any = None, *, answered: bool = False) -> Markdown:
    """The question, its options, and (once answered) the choice."""
    title = text(prompt.title or "a tool call")
    head = Markdown("🔐 **Permission requested:** {} {}").format(kind_icon(prompt.kind), title)
    if not answered:
        # What runs or is touched, whole (the title is the agent's word); option words come from their kinds.
        payload = Markdown("\n\n") + block(prompt.command) if getattr(prompt, "command", "") else Markdown("")
        names = Markdown(" / ").join(text(o["name"]) for o in prompt.options)
        return head + payload + Markdown("\n\nOptions: ") + names
    if outcome is None:
        return head + Markdown(" → *cancelled*")
    return head + Markdown(" → chose **{}**").format(option_name(prompt.options, outcome))


def resolved_markdown(ev: se.PermissionResolved) -> Markdown:
    title = text(ev.title or ev.tool_call_id)
    if ev.option_id is None:
        return Markdown("🔐 Permission for {}: *cancelled* ({})").format(title, ev.by)
    return Markdown("🔐 Permission for {}: **{}** ({})").format(title, ev.option_kind or ev.option_id, ev.by)


def resolved_plain(ev: se.PermissionResolved) -> str:
    choice = "cancelled" if ev.option_id is None else (ev.option_kind or ev.option_id)
    return f"Permission for {ev.title or ev.tool_call_id}: {choice} ({ev.by})"


def _submitted(outcome: dict[str, Any]) -> str:
    """An accepted form's values as JSON, cut at 1,000 characters."""
    return truncate_tail(json.dumps(outcome.get("content", {}), default=repr), 1000)[0]


def elicitation_outcome(outcome: Any) -> str:
    """What the user answered a form, in words (the plain text of a finished turn)."""
    if not isinstance(outcome, dict):
        return "cancelled"
    if outcome.get("action") == "accept":
        return "submitted " + _submitted(outcome)
    return str(outcome.get("action"))


def elicitation_markdown(prompt: se.ElicitationPrompt, outcome: Any = None, *, answered: bool = False) -> Markdown:
    head = Markdown("📝 **The agent asks:** {}").format(markdown(prompt.message))
    fields = Markdown(", ").join(
        text(name) + Markdown("*" if name in prompt.required else "") for name in prompt.fields
    )
    if not answered:
        return head + Markdown("\n\nFields: ") + fields if fields else head
    if not isinstance(outcome, dict):
        return head + Markdown(" → *cancelled*")
    action = outcome.get("action")
    if action == "accept":
        return head + Markdown(" → submitted ") + code(_submitted(outcome))
    return head + Markdown(" → *{}*").format(str(action))


#: A URL elicitation's state (:func:`url_state`) in words.
URL_WORDS = {
    "asking": "waiting: open it from the live output",
    "opened": "opened in a new tab; waiting for the agent to say it is done",
    "completed": "opened; the agent says it is done",
    "declined": "declined",
    "cancelled": "cancelled",
}
#: A bare address marked (GFM) would make a link of, in escaped text.
_BARE_LINK = re.compile(r"(?i)(:)(//)|(www)(\.)")


def unlinked(md: Markdown) -> Markdown:
    """Escaped text in which no renderer finds a bare address to link
    (``https://``, ``www.``): the slash or dot becomes a character reference."""
    return Markdown(_BARE_LINK.sub(lambda m: m.group(1) + "&#47;&#47;" if m.group(1) else m.group(3) + "&#46;", md))


def url_state(prompt: se.UrlElicitationPrompt, outcome: Any = None, *, answered: bool = False) -> str:
    """"asking", "opened" (the user consented: accept), "completed" (the agent
    said so afterwards), "declined" or "cancelled"."""
    if prompt.completed:
        return "completed"
    if not answered:
        return "asking"
    action = outcome.get("action") if isinstance(outcome, dict) else "cancel"
    return {"accept": "opened", "decline": "declined"}.get(str(action), "cancelled")


def url_elicitation_markdown(prompt: se.UrlElicitationPrompt, outcome: Any = None, *, answered: bool = False) -> Markdown:
    """The page to open: its host named, the agent's message as escaped text (no
    markdown, no link), the whole address as code (never a link), and the state."""
    parts = [Markdown("🔗 **The agent asks you to open a page on** {}").format(code(prompt.host))]
    if prompt.host_unicode:
        parts.append(Markdown("⚠️ The host name has letters outside ASCII: it reads {}; letters from other "
                              "alphabets can look like familiar ones.").format(code(prompt.host_unicode)))
    if prompt.message.strip():
        parts.append(Markdown("  \n").join(unlinked(text(line)) for line in prompt.message.split("\n")))
    address = code(prompt.url, limit=len(prompt.url) + 1)
    # A <code> element we wrote (the address holds "<", "$", ...): its text is markdown to some
    # renderers (nbconvert's mistune links a bare address in it); a code span is not.
    parts.append(Markdown("Address: ") + (unlinked(address) if address.startswith("<code>") else address))
    parts.append(Markdown("→ *{}*").format(URL_WORDS[url_state(prompt, outcome, answered=answered)]))
    return Markdown("\n\n").join(parts)


def url_elicitation_plain(prompt: se.UrlElicitationPrompt, outcome: Any = None, *, answered: bool = False) -> str:
    reads = f" (it reads {prompt.host_unicode})" if prompt.host_unicode else ""
    return (f"The agent asks you to open a page on {prompt.host}{reads}\n{prompt.message}\nAddress: {prompt.url}\n"
            f"-> {URL_WORDS[url_state(prompt, outcome, answered=answered)]}")


def completed_markdown(ev: se.ElicitationCompleted) -> Markdown:
    return Markdown("🔗 The agent says the page on {} is done.").format(code(ev.prompt.host))


def completed_plain(ev: se.ElicitationCompleted) -> str:
    return f"The agent says the page on {ev.prompt.host} is done."


def file_written_markdown(ev: se.FileWritten) -> Markdown:
    verb = "created" if ev.created else "wrote"
    return Markdown("📝 {} {} ({} bytes)").format(verb, code(ev.path), f"{ev.bytes:,}")


def file_written_plain(ev: se.FileWritten) -> str:
    return f"{'created' if ev.created else 'wrote'} {ev.path} ({ev.bytes:,} bytes)"


def auth_markdown(methods: list[dict[str, Any]], program: list[str] | None = None) -> Markdown:
    """An agent's ``authMethods`` as a list (names, descriptions and commands
    are the agent's: escaped)."""
    if not methods:
        return Markdown("The agent requires authentication but lists no methods; see its documentation.")
    lines = [Markdown("The agent needs you to log in. Ways it offers:\n")]
    for m in methods:
        if not isinstance(m, dict):
            continue
        head = Markdown("- **{}**").format(str(m.get("name") or m.get("id")))
        if m.get("description"):
            head += Markdown(" ({})").format(str(m["description"]))
        kind = m.get("type") or "agent"
        if kind == "env_var":
            names = Markdown(", ").join(code(v.get("name", "?")) for v in m.get("vars") or [] if isinstance(v, dict))
            link = Markdown("; get one at {}").format(code(m["link"])) if m.get("link") else Markdown("")
            lines.append(head + Markdown(": set {} in the environment and restart{}").format(names, link))
        elif kind == "terminal":
            command = " ".join([*(program or ["<agent>"]), *(str(a) for a in m.get("args") or [])])
            lines.append(head + Markdown(": run {} in a terminal and follow it").format(code(command)))
        else:
            lines.append(head + Markdown(": let the agent do it ({})").format(code(f"%auth {m.get('id')}")))
    return Markdown("\n").join(lines)


# -- the status line ------------------------------------------------------------


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def usage_text(usage: Mapping[str, Any] | None) -> list[str]:
    """Token and cost parts from a usage_update (and/or a prompt result's usage)."""
    if not usage:
        return []
    parts = []
    used, size = _int(usage.get("used")), _int(usage.get("size"))
    total = _int(usage.get("totalTokens"))
    if used is not None and size:
        parts.append(f"{used:,}/{size:,} tokens")
    elif used is not None:
        parts.append(f"{used:,} tokens")
    elif total is not None:
        parts.append(f"{total:,} tokens")
    cost = usage.get("cost")
    if isinstance(cost, dict) and isinstance(cost.get("amount"), (int, float)):
        currency = cost.get("currency")
        amount = float(cost["amount"])
        parts.append(f"${amount:,.2f}" if currency in (None, "USD") else f"{amount:,.2f} {currency}")
    return parts


def current_mode(turn: tm.Turn, session: Any = None) -> str | None:
    mode = getattr(session, "current_mode", None) if session is not None else None
    if isinstance(mode, str):
        return mode
    return turn.last_mode()


#: Stop reasons (ACP's words) as a reader says them.
STOP_WORDS = {
    "end_turn": "Done",
    "cancelled": "Cancelled",
    "max_tokens": "Stopped: token limit reached",
    "max_turn_requests": "Stopped: request limit reached",
    "refusal": "The agent refused",
}


def stop_text(reason: str) -> str:
    """A stop reason in words (an unknown one shown as the agent sent it)."""
    return STOP_WORDS.get(reason) or "Stopped: " + " ".join(str(reason).split())


def status_line(turn: tm.Turn, session: Any = None, *, files_read: int = 0) -> str:
    """E.g. "Done · 1,234/200,000 tokens · $0.02 · code mode · 3.1 s"."""
    if turn.stop_reason:
        parts = [stop_text(turn.stop_reason) + (" (forced)" if turn.forced else "")]
    elif turn.error:
        parts = ["Error"]
    else:
        parts = ["Running"]
    parts += usage_text(turn.usage or getattr(session, "usage", None))
    mode = current_mode(turn, session)
    if mode:
        parts.append(f"{mode} mode")
    if files_read:
        parts.append(f"{files_read} file{'s' if files_read != 1 else ''} read")
    if turn.ended is not None:
        parts.append(f"{turn.ended - turn.started:.1f} s")
    return " · ".join(parts)


def status_markdown(line: str) -> Markdown:
    # Markdown is parsed inside <sub>: escape for markdown (which also covers HTML), one line.
    return Markdown("<sub>{}</sub>").format(text(line))


# -- the whole turn ---------------------------------------------------------------


def prompt_tool_call_id(prompt: Any) -> str | None:
    """The tool call id a permission request is about (model or dict request)."""
    req = prompt.request
    call = getattr(req, "tool_call", None)
    if call is not None:
        return getattr(call, "tool_call_id", None)
    if isinstance(req, dict) and isinstance(req.get("toolCall"), dict):
        return req["toolCall"].get("toolCallId")
    return None


def _prompt_outcome(prompt: Any) -> tuple[bool, Any]:
    fut = prompt.future
    if not fut.done() or fut.cancelled():
        return fut.cancelled(), None
    return True, fut.result()


def _unknown_line(ev: tm.UnknownUpdate) -> tuple[Markdown, str]:
    return unknown_markdown(ev.kind, ev.raw), f"(unknown update {ev.kind})"


def _file_written_line(ev: se.FileWritten) -> tuple[Markdown, str]:
    return file_written_markdown(ev), file_written_plain(ev)


#: Events that are one line wherever they are shown, as (markdown, text): the
#: live views (:data:`.turnbase.HANDLERS`) and the transcript below both take
#: their entries from here, so a new line-like kind is one entry.
LINES: dict[type, Callable[[Any], tuple[Markdown, str]]] = {
    tm.UnknownUpdate: _unknown_line,
    se.FileWritten: _file_written_line,
}


class _Transcript:
    """The state of one transcript: the open run of text, what was shown once."""

    def __init__(self, turn: tm.Turn) -> None:
        self.turn = turn
        terminals = {ev.terminal_id: ev for ev in turn.events if type(ev) is se.TerminalStarted}
        self.snaps = {tid: snapshot(ev) for tid, ev in terminals.items()}
        self.asked = {prompt_tool_call_id(ev) for ev in turn.events if type(ev) is se.PermissionPrompt}
        self.parts: list[Markdown] = []
        self.run_role: str | None = None
        self.run: list[str] = []
        self.plan_done = False
        self.files_read = 0
        self.splitter = BlockSplitter(max_tail=1 << 62)  # same fence continuity as the live view
        #: Roles whose text changed other than at its end (:attr:`.turn.Turn.edited`): their
        #: text is shown whole, from the model, where it began; the role goes once shown.
        self.whole = set(turn.edited)

    def end_run(self) -> None:
        if self.run:
            body = "".join(self.run)
            if self.run_role == "agent":
                self.splitter.feed(body)
                piece = self.splitter.cut()
                if piece:
                    self.parts.append(markdown(piece))
            elif self.run_role == "thought":
                self.parts.append(thought_markdown(body))
            else:
                self.parts.append(user_markdown(body))
            self.run.clear()
        self.run_role = None

    def add(self, ev: Any) -> None:
        handler = HANDLERS.get(type(ev))
        piece = handler(self, ev) if handler is not None else unhandled(ev, "the transcript")[0]
        if piece:
            self.end_run()
            self.parts.append(piece)

    # -- one handler per kind (HANDLERS): the markdown it adds, or "" --------------

    def chunk(self, ev: tm.Chunk | tm.MessageEdit) -> Markdown:
        text = ev.text
        if self.turn.edited and ev.role in self.turn.edited:
            if ev.role not in self.whole:
                return Markdown("")  # shown whole already
            self.whole.discard(ev.role)
            text = self.turn.role_text(ev.role)
            if not text:
                return Markdown("")
        elif type(ev) is tm.MessageEdit:
            return Markdown("")  # changed nothing
        if ev.role != self.run_role:
            self.end_run()
            self.run_role = ev.role
        self.run.append(text)
        return Markdown("")

    def tool_call(self, ev: tm.ToolCallEvent) -> Markdown:
        return tool_call_markdown(ev.call, self.snaps) if ev.new else Markdown("")

    def plan(self, ev: tm.PlanEvent) -> Markdown:
        if self.plan_done:
            return Markdown("")
        self.plan_done = True
        return plan_markdown(self.turn.plan)

    def state(self, ev: tm.StateEvent) -> Markdown:
        return Markdown("")  # mode and usage are in the status line

    def notice(self, ev: se.Notice) -> Markdown:
        return notice_markdown(ev.level, ev.text)

    def permission(self, ev: se.PermissionPrompt) -> Markdown:
        answered, outcome = _prompt_outcome(ev)
        return permission_markdown(ev, outcome, answered=answered)

    def resolved(self, ev: se.PermissionResolved) -> Markdown:
        if ev.by in ("user", "cancelled") and ev.tool_call_id in self.asked:
            return Markdown("")  # the question's own line says how it was answered
        return resolved_markdown(ev)

    def elicitation(self, ev: se.ElicitationPrompt) -> Markdown:
        answered, outcome = _prompt_outcome(ev)
        return elicitation_markdown(ev, outcome, answered=answered)

    def url_elicitation(self, ev: se.UrlElicitationPrompt) -> Markdown:
        answered, outcome = _prompt_outcome(ev)
        return url_elicitation_markdown(ev, outcome, answered=answered)

    def completed(self, ev: se.ElicitationCompleted) -> Markdown:
        if any(e is ev.prompt for e in self.turn.events):
            return Markdown("")  # the page's own line says it is done
        return completed_markdown(ev)

    def terminal_started(self, ev: se.TerminalStarted) -> Markdown:
        return notice_markdown("info", ev.note) if ev.note else Markdown("")

    def terminal_exited(self, ev: se.TerminalExited) -> Markdown:
        return Markdown("")  # the tool call's row shows the exit

    def file_read(self, ev: se.FileRead) -> Markdown:
        self.files_read += 1  # counted in the status line
        return Markdown("")


def _line_md(line: Callable[[Any], tuple[Markdown, str]]) -> Callable[[_Transcript, Any], Markdown]:
    return lambda _t, ev: line(ev)[0]


#: The transcript's table: one handler per kind of :data:`acp_kernel.client.turn.TURN_EVENTS`.
HANDLERS: dict[type, Callable[[_Transcript, Any], Markdown]] = {
    tm.Chunk: _Transcript.chunk,
    tm.MessageEdit: _Transcript.chunk,
    tm.ToolCallEvent: _Transcript.tool_call,
    tm.PlanEvent: _Transcript.plan,
    tm.StateEvent: _Transcript.state,
    se.Notice: _Transcript.notice,
    se.PermissionPrompt: _Transcript.permission,
    se.PermissionResolved: _Transcript.resolved,
    se.ElicitationPrompt: _Transcript.elicitation,
    se.UrlElicitationPrompt: _Transcript.url_elicitation,
    se.ElicitationCompleted: _Transcript.completed,
    se.TerminalStarted: _Transcript.terminal_started,
    se.TerminalExited: _Transcript.terminal_exited,
    se.FileRead: _Transcript.file_read,
    **{kind: _line_md(line) for kind, line in LINES.items()},
}


def render_markdown(turn: tm.Turn, session: Any = None) -> Markdown:
    """The whole turn as markdown, in event order (final state of each tool
    call and of the plan at the place it first appeared)."""
    t = _Transcript(turn)
    for ev in turn.events:
        t.add(ev)
    t.end_run()
    if turn.done:
        t.parts.append(status_markdown(status_line(turn, session, files_read=t.files_read)))
    return Markdown("\n\n").join(t.parts)
