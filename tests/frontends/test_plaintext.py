"""The text/plain of kernel messages: our markdown rendered as a reader sees it."""

from __future__ import annotations

from acp_kernel.client.commands import KERNEL, help_markdown
from acp_kernel.safe import Markdown, block, code, text, unwrapped
from acp_kernel.view.plaintext import markdown_plain, message

IMG = "<img src=x onerror=alert(1)>"


def test_agent_strings_come_back_as_written_without_markdown_escapes():
    md = Markdown("**Error:** {} in {}").format(text(f"a & b_c *x* {IMG} `a\nb`"), code("/tmp/a\nb"))
    assert markdown_plain(md) == f"Error: a & b_c *x* {IMG} `a b` in /tmp/a␊b"


def test_lists_blocks_links_and_paragraphs_keep_their_shape():
    md = Markdown("- agent: **Demo** (`demo`)\n- nested:\n  - one\n\n1. first\n2. second\n\n"
                  "See [the docs](https://example.org) and *this*.\n\n") + block("stderr\n  tail\n```")
    assert markdown_plain(md) == ("- agent: Demo (demo)\n- nested:\n  - one\n\n1. first\n2. second\n\n"
                                  "See the docs <https://example.org> and this.\n\nstderr\n  tail\n```")


def test_tables_become_aligned_columns():
    plain = markdown_plain(help_markdown(KERNEL))
    row = next(line for line in plain.splitlines() if line.startswith("%mode [ID]"))
    assert row.split("  ")[-1].strip() == "list the agent's modes, or set one"
    assert "\\|" not in plain and "`" not in plain and "%permissions [ask|allow-reads|allow-all|deny]" in plain


def test_message_bundles_markdown_with_the_rendered_text():
    data = message(Markdown("*Mode: {}.*").format(code(IMG)))
    # Code holding "<" is a <code> element with references (no raw "<" for a renderer to reopen).
    assert unwrapped(data["text/markdown"]) == "*Mode: <code>&lt;img src=x onerror=alert(1)&gt;</code>.*"
    assert data["text/plain"] == f"Mode: {IMG}."
    assert data["text/markdown"] != unwrapped(data["text/markdown"])  # inside the element MathJax skips
    assert message(Markdown("x"), "given")["text/plain"] == "given"
    assert message(Markdown("a\x1b[31mb"))["text/plain"] != "a\x1b[31mb"  # controls neutralised by safe.plain
