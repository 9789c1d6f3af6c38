"""Questions in the cell: permission buttons (ipywidgets) and elicitations as text.

:class:`PermissionForm` draws buttons for a passthrough cell's question
(:mod:`acp_kernel.passthrough.notebook`); :class:`.turnview.TurnView` uses
both forms as markdown only. Button callbacks may run on a kernel subshell
thread (JupyterLab sends widget comms through subshells). They only call the
prompt's thread-safe methods and set widget traits; anything that writes
display messages happens on the loop thread, from the prompt future's
done-callback.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from typing import Any

from ..services import events as se
from ..services.permissions import option_label
from ..safe import Html, Markdown, bundle, html, plain
from .sink import widget_bundle
from .transcript import elicitation_markdown, kind_icon, option_name, permission_markdown

BUTTON_STYLE = {"allow_once": "success", "allow_always": "success", "reject_once": "danger", "reject_always": "danger"}


def _html_widget(value: Html) -> Any:
    """An ipywidgets HTML (its value is set as innerHTML): only safe.Html."""
    import ipywidgets as w

    return _set(w.HTML(), value)


def _no_math(widget: Any) -> None:
    """MathJax skips the widget's subtree: ipywidgets typesets descriptions
    (an agent's field label "$x$" would be math) and a page may typeset all."""
    widget.add_class("tex2jax_ignore")
    widget.add_class("mathjax_ignore")


def _set(widget: Any, value: Html) -> Any:
    if not isinstance(value, Html):
        raise TypeError("HTML widget values must be acp_kernel.safe.Html")
    widget.value = value
    return widget


#: The question's payload box: whole, scrolled when long (never cut).
DETAIL_STYLE = "margin:4px 0;white-space:pre-wrap;word-break:break-all;max-height:24em;overflow:auto"


def option_words(opt: dict[str, Any]) -> tuple[str, str]:
    """(our words from the option's kind, the agent's own name for it or "")."""
    label = opt.get("label")
    if not isinstance(label, str):  # options the broker did not label (a server's own question)
        label = option_label(opt.get("kind"), opt.get("rawKind"))
        agent = str(opt.get("name") or "")
    else:
        agent = str(opt.get("agentName") or "")
    return label, "" if agent.strip().casefold() == label.casefold() else agent


def permission_plain(prompt: se.PermissionPrompt, outcome: Any = None, *, answered: bool = False) -> str:
    head = f"Permission requested: {plain(prompt.title or 'a tool call')}"
    if prompt.kind:
        head += f" ({plain(prompt.kind)})"
    if not answered:
        detail = f"\nWhat it runs or touches:\n{plain(prompt.command)}" if prompt.command else ""
        return head + detail + "\nOptions: " + " / ".join(plain(o["name"]) for o in prompt.options)
    if outcome is None:
        return head + " -> cancelled"
    return head + f" -> chose {plain(option_name(prompt.options, outcome))}"


class PermissionForm:
    """One button per option; the row shows the outcome and the buttons lock.

    A button's words and colour come from the option's kind; the agent's
    name for it stands beside the button as the agent's wording. The payload
    (``detail``: what runs or is touched) is shown whole in a scrolled box.
    """

    def __init__(self, prompt: se.PermissionPrompt, *, widgets: bool = True, detail: str = "") -> None:
        self.prompt = prompt
        self.display_id = f"acp-perm-{uuid.uuid4().hex[:12]}"
        self.answered = False
        self.outcome: Any = None
        self._lock = threading.Lock()
        self._clicked = False
        self.widget: Any = None
        self.buttons: list[Any] = []
        if widgets:
            self._build(detail)

    def _build(self, detail: str) -> None:
        import ipywidgets as w

        p = self.prompt
        head = Html("<b>🔐 Permission requested</b><br>{} <span>{}</span>").format(kind_icon(p.kind), html(p.title or "a tool call"))
        if p.kind:
            head += Html(" <small>(the agent calls it: {})</small>").format(html(p.kind))
        if detail:
            head += Html("<pre class='acp-q-detail' style='{}'>{}</pre>").format(DETAIL_STYLE, html(detail))
        self.header = _html_widget(head)
        rows = []
        for opt in p.options:
            label, agent = option_words(opt)
            b = w.Button(
                description=label,
                tooltip=f"{opt.get('rawKind') or opt.get('kind') or ''} ({opt['optionId']})",
                button_style=BUTTON_STYLE.get(opt.get("kind") or "", ""),
                layout=w.Layout(width="auto"),
            )
            b.on_click(self._handler(opt["optionId"]))
            self.buttons.append(b)
            beside = _html_widget(Html("<small style='opacity:.75'>the agent's words: “{}”</small>").format(html(agent))
                                  if agent else Html(""))
            rows.append(w.HBox([b, beside]))
        self.status = _html_widget(Html(""))
        self.widget = w.VBox([self.header, w.VBox(rows), self.status])
        _no_math(self.widget)

    def _handler(self, option_id: str) -> Callable[[Any], None]:
        def click(_button: Any) -> None:
            with self._lock:  # two fast clicks: only the first one answers
                if self._clicked or self.prompt.done:
                    return
                self._clicked = True
            for b in self.buttons:
                b.disabled = True
            _set(self.status, Html("→ {}…").format(html(option_name(self.prompt.options, option_id))))
            self.prompt.answer(option_id)

        return click

    def resolved(self, outcome: Any) -> None:
        """The prompt's future settled (answer, cancel, turn end); loop thread."""
        self.answered = True
        self.outcome = outcome
        if self.widget is not None:
            for b in self.buttons:
                b.disabled = True
            if outcome is None:
                _set(self.status, Html("<i>cancelled</i>"))
            else:
                _set(self.status, Html("→ chose <b>{}</b>").format(html(option_name(self.prompt.options, outcome))))

    def markdown(self) -> Markdown:
        return permission_markdown(self.prompt, self.outcome, answered=self.answered)

    def bundle(self) -> dict[str, Any]:
        plain_text = permission_plain(self.prompt, self.outcome, answered=self.answered)
        return widget_bundle(self.widget, plain_text, self.markdown())


class ElicitationForm:
    """An elicitation as markdown and text (no widget: the turn widget,
    :mod:`.turnoutput`, draws the notebook's form; elsewhere it is answered
    through stdin or not at all)."""

    def __init__(self, prompt: se.ElicitationPrompt) -> None:
        self.prompt = prompt
        self.display_id = f"acp-form-{uuid.uuid4().hex[:12]}"
        self.answered = False
        self.outcome: Any = None

    def resolved(self, outcome: Any) -> None:
        self.answered = True
        self.outcome = outcome

    def markdown(self) -> Markdown:
        return elicitation_markdown(self.prompt, self.outcome, answered=self.answered)

    def bundle(self) -> dict[str, Any]:
        head = f"The agent asks: {self.prompt.message}"
        fields = ", ".join(self.prompt.fields)
        return bundle(self.markdown(), head + (f"\nFields: {fields}" if fields else ""))
