"""The outputs acp_kernel builds from one agent string, as rendermime items.

Each template is what the kernel's views do with agent text: the answer as
markdown (``safe.bundle(safe.markdown(x), x)``), a one-line title and a path
in a code span (``safe.text`` / ``safe.code`` in a ``safe.Markdown`` template),
and text verbatim in a fence (``safe.block``). Every text mime of the bundle
is rendered as a live kernel's output is (trusted: no sanitizer); ``text/html``
also untrusted (a reopened notebook: the sanitizer runs, which can only take
away). ``text/plain`` is rendered for a plain-only bundle (with html or markdown
beside it JupyterLab never shows it).

``safe`` is passed in, so the same oracle judges the working tree's
``acp_kernel.safe`` or an older copy of it (see ``run.py``).
"""

from __future__ import annotations

from types import ModuleType
from typing import Callable

import acp_kernel.safe as acp_safe

from .oracle import Item

TEXT_MIMES = ("text/html", "text/markdown", "text/plain")


def templates(safe: ModuleType) -> dict[str, Callable[[str], dict]]:
    md = safe.Markdown
    return {
        "answer": lambda x: safe.bundle(safe.markdown(x), x),
        "title": lambda x: safe.bundle(md("**Tool** {} in {}: {}").format(safe.text(x), safe.code(x), safe.text(x[:40]))),
        "block": lambda x: safe.bundle(md("Output:\n\n{}\n\nend").format(safe.block(x))),
        # A plain-only output (a notice, a status line): JupyterLab renders text/plain.
        "plain": lambda x: safe.bundle(plain_text=x),
        # A tool call as the saved output has it: the HTML written beside the markdown
        # (safe.code_forms / text_forms / block_forms), not made by a parse.
        "tool": lambda x: _tool_forms(safe, x),
        # A finished turn whose markdown and text keep only its start and end (finished.capped).
        **({"cut": _cut_turn, "cut-source": _cut_source} if safe is acp_safe else {}),
    }


def _cut_turn(x: str) -> dict:
    from acp_kernel.view.finished import Step, runs, static_bundle

    md = acp_safe.markdown(x)
    block = Step(acp_safe.inert_html_inner(md), md, x)
    status = Step(acp_safe.Html("<p>Done</p>"), acp_safe.Markdown("Done"), "Done")
    size = max(len(md), len(x)) + 2
    data = static_bundle(runs([("text", block)] * 6 + [("status", status)]), form_limit=3 * size + 10)
    assert "characters of this turn are not kept" in data["text/markdown"]
    return data


def _cut_source(x: str) -> dict:
    """One block of agent text over the limit (an answer in one burst): its start and end cut
    from the source and made markdown again (finished._cut_text)."""
    from acp_kernel.view.finished import MIN_CUT, Step, static_bundle

    source = "\n\n".join([x] * max(4, 5 * MIN_CUT // (len(x) + 2)))
    md = acp_safe.markdown(source)
    answer = Step(acp_safe.inert_html_inner(md), md, source, source=source)
    status = Step(acp_safe.Html("<p>Done</p>"), acp_safe.Markdown("Done"), "Done")
    return static_bundle([answer, status], form_limit=max(len(md), len(source)) // 2)


def _tool_forms(safe: ModuleType, x: str) -> dict:
    if not hasattr(safe, "block_forms"):  # an older copy of the module (run.py): the parse
        return safe.bundle(safe.Markdown("Path {} titled {}\n\n{}").format(safe.code(x), safe.text(x), safe.block(x)))
    code_md, code_html = safe.code_forms(x)
    text_md, text_html = safe.text_forms(x)
    block_md, block_html, _ = safe.block_forms(x)
    md = safe.Markdown("\n\n").join([safe.Markdown("Path {} titled {}").format(code_md, text_md), block_md])
    return safe.bundle(md, x, safe.Html(f"<p>Path {code_html} titled {text_html}</p>\n{block_html}"))


def items_for(safe: ModuleType, text: str, which: tuple[str, ...] | None = None) -> list[Item]:
    """Every (mime, source, trusted) JupyterLab could render for ``text``."""
    out: list[Item] = []
    for label, build in templates(safe).items():
        if which is not None and label not in which:
            continue
        data = build(text)
        for mime in TEXT_MIMES:
            if mime not in data:
                continue
            source = str(data[mime])
            if mime == "text/plain" and label != "plain":
                continue  # never shown when the bundle has html or markdown
            for trusted in ((True, False) if mime == "text/html" else (True,)):
                out.append(Item(mime, source, trusted, label))
    return out
