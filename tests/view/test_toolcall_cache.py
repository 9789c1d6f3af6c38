"""The tool call row's cached renderings are what the uncached functions make.

The row caches its markdown (header + cached body), its fallback text and the
escaped words of its header: each must equal a fresh rendering of the call as it
stands, update after update; ``Markdown.format`` / ``join`` (the ``_coerce`` they
inline) escape exactly as before.
"""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from acp_kernel import safe
from acp_kernel.client.turn import ToolCall
from acp_kernel.safe import Html, Markdown, Plain, html, plain, text, text_forms
from acp_kernel.view import transcript as tr
from acp_kernel.view.toolcall import ToolCallRow

HOSTILE = ["<img src=x onerror=alert(1)>", "`a\nb`", "$x$", "/tmp/a\n# not a heading.py", "\x1b[31mred\x1b[0m", "*_[x](javascript:1)_*"]


def _updates() -> list[dict]:
    return [
        {"title": HOSTILE[3], "kind": "read", "status": "pending", "rawInput": {"path": HOSTILE[3]},
         "locations": [{"path": HOSTILE[0], "line": 3}, {"path": HOSTILE[3]}]},
        {"status": "in_progress", "content": [{"type": "content", "content": {"type": "text", "text": HOSTILE[1] + HOSTILE[2]}}]},
        {"status": "completed", "rawOutput": {"aggregated_output": "boom $HOME\n", "exit_code": 2}},
        {"kind": "execute", "rawInput": {"command": ["ls", HOSTILE[0]]}, "status": "failed"},
        {"title": "", "kind": "weird", "status": "odd <status>"},
        {"title": HOSTILE[5], "kind": "edit", "status": "completed",
         "content": [{"type": "diff", "path": HOSTILE[3], "oldText": "a\n", "newText": "b $x$\n"}]},
    ]


def test_row_renderings_equal_fresh_ones_after_every_update():
    call = ToolCall("t<1>")
    row = ToolCallRow(call, "b:0", lambda: None)
    for update in _updates():
        call.merge(update)
        row.touch()
        snaps = row.snapshots()
        assert row.markdown() == tr.tool_call_markdown(call, snaps)
        assert row.body_markdown() == tr.tool_call_body(call, snaps)
        assert row.final_plain() == tr.tool_call_final_plain(call, snaps)
        assert row.plain() == tr.tool_call_plain(call)
        assert isinstance(row.markdown(), Markdown)
        assert row.shows_terminal() == bool(row.state()["terminals"])


def test_shows_terminal_is_what_the_state_lists():
    """``shows_terminal`` (a finished turn asks it of each row it keeps) answers as the
    built state would: an exit code alone, output alone, or neither."""
    seen = set()
    for update in ({"_meta": {"terminal_exit": {"exit_code": 0}}}, {"_meta": {"terminal_output": {"data": "x\n"}}},
                   {"rawOutput": {"lines": 2}}, {"status": "completed"}):
        call = ToolCall("t")
        call.merge(update)
        row = ToolCallRow(call, "b:0", lambda: None)
        seen.add(row.shows_terminal())
        assert row.shows_terminal() == bool(row.state()["terminals"])
    assert seen == {True, False}


def test_header_words_are_text_of_them():
    for icon in tr.KIND_ICONS.values():
        assert tr._ICON_MD[icon] == text(icon)
    for status in tr.STATUS:
        assert tr._STATUS_FORMS[status] == text_forms(tr.status_text(status))


def _reference_format(template, args):
    cls = type(template)
    return cls(str.format(template, *(str(a) if isinstance(a, cls) else cls._escape(a) for a in args)))


_pieces = st.one_of(st.text(max_size=40), st.sampled_from(HOSTILE), st.integers())


@settings(max_examples=300, deadline=None)
@given(st.lists(_pieces, max_size=4), st.lists(st.booleans(), min_size=4, max_size=4))
def test_format_and_join_escape_as_coerce_does(values, typed):
    for cls, make in ((Markdown, text), (Html, html), (Plain, plain)):
        args = [make(v) if typed[i] else v for i, v in enumerate(values)]
        template = cls(" | ".join("{}" for _ in args))
        assert template.format(*args) == _reference_format(template, args)
        assert type(template.format(*args)) is cls
        sep = cls("\n\n")
        joined = sep.join(args)
        assert joined == str.join(sep, [cls._coerce(a) for a in args]) and type(joined) is cls
        if args:
            assert cls("{a}{b}").format(a=args[0], b=values[0]) == cls(str.format("{a}{b}", a=cls._coerce(args[0]), b=cls._coerce(values[0])))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(_pieces, st.sampled_from(["", "<div", safe._WRAP_OPEN, safe._WRAP_OPEN + "x", safe._WRAP_CLOSE])),
                max_size=5), st.lists(st.booleans(), min_size=5, max_size=5))
def test_the_one_join_ends_are_the_wrapped_joins(values, typed):
    """A finished turn's markdown and HTML are each made inside the math-ignoring element in
    one join (safe.wrapped_join, safe.ignored_join): the same text, of the same safe type, as
    wrapping the join; agent strings among the parts escaped; a first part already wrapped
    (or none at all) as wrapped() and ignored() take it."""
    md = [text(v) if typed[i] else v for i, v in enumerate(values)]
    made = safe.wrapped_join(md)
    assert made == safe.wrapped(Markdown("\n\n").join(md)) and type(made) is Markdown
    hs = [safe.Html(str(v)) if typed[i] else v for i, v in enumerate(values)]
    made_html = safe.ignored_join(hs)
    assert made_html == safe.ignored(Html("\n").join(hs)) and type(made_html) is Html


@settings(max_examples=500, deadline=None)
@given(st.one_of(st.text(st.characters(blacklist_categories=())), st.sampled_from(HOSTILE)))
def test_html_of_a_printable_string_skips_only_a_clean_that_changes_nothing(s):
    """safe.html takes a printable str (str.isprintable: no control, format, surrogate or
    separator but the space) without cleaning it: the same as cleaning it first."""
    import html as std_html

    assert safe.html(s) == std_html.escape(safe.visible_controls(s), quote=True)
