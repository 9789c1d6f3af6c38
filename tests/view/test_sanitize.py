from acp_kernel.view.sanitize import escape_html, fenced, inline, sanitize_markdown

SCRIPT = "<script>alert(1)</script>"
IMG = "<img src=x onerror=alert(1)>"


def test_raw_html_is_escaped():
    out = sanitize_markdown(f"Hello {SCRIPT} and {IMG}")
    assert "<script" not in out and "<img" not in out
    assert "&lt;script>alert(1)&lt;/script>" in out
    assert "&lt;img src=x onerror=alert(1)>" in out


def test_html_block_lines_are_escaped():
    out = sanitize_markdown(f"<div>\n{IMG}\n</div>")
    assert "<" not in out


def test_code_spans_and_fences_are_left_verbatim():
    md = f"Use `{SCRIPT}` or ``a ` {IMG}``.\n\n```html\n{SCRIPT}\n```\n\n~~~\n{IMG}\n~~~"
    out = sanitize_markdown(md)
    assert f"`{SCRIPT}`" in out
    assert f"``a ` {IMG}``" in out
    assert f"```html\n{SCRIPT}\n```" in out
    assert f"~~~\n{IMG}\n~~~" in out


def test_backslash_escaped_backtick_does_not_open_a_code_span():
    out = sanitize_markdown(f"\\`{IMG}`")
    assert "<img" not in out


def test_unclosed_backticks_are_literal_and_the_rest_escaped():
    out = sanitize_markdown(f"a ` b {SCRIPT}")
    assert "<script" not in out


def test_ampersand_escaped_so_entities_cannot_smuggle_html():
    out = sanitize_markdown("&lt;script&gt; &#60;img&#62;")
    assert out == "&amp;lt;script&amp;gt; &amp;#60;img&amp;#62;"


def test_backslash_escaped_lt_stays():
    assert sanitize_markdown("\\<b>") == "\\<b>"


def test_javascript_and_data_links_are_neutralised():
    for md in (
        "[x](javascript:alert(1))",
        "[x](JavaScript:alert(1))",
        "![i](data:text/html;base64,PHNjcmlwdD4=)",
        "[x]: javascript:alert(1)",
        "[x](javascript\\:alert(1))",
        "[x](vbscript:msgbox)",
    ):
        out = sanitize_markdown(md)
        low = out.lower()
        assert "javascript:" not in low and "data:" not in low and "vbscript:" not in low
        assert "&#8203;" in out


def test_prose_with_data_colon_is_untouched():
    assert sanitize_markdown("the data: 5 rows") == "the data: 5 rows"
    assert sanitize_markdown("[ok](https://example.com/a?b=1)") == "[ok](https://example.com/a?b=1)"


def test_fence_in_list_item_ends_with_the_item():
    # "<img>" is outside the list item (not indented), so outside its fence:
    # a renderer shows it as HTML; it must be escaped.
    out = sanitize_markdown(f"- item\n  ```\n  code\n{IMG}\n")
    assert "<img" not in out
    assert "  code" in out


def test_fence_info_string_is_reduced_to_safe_characters():
    out = sanitize_markdown('~~~ "><img src=x onerror=alert(1)>\ncode\n~~~')
    assert "<img" not in out.split("\n")[0]
    assert out.split("\n")[0].startswith("~~~")


def test_unclosed_fence_content_is_verbatim():
    assert sanitize_markdown(f"```\n{SCRIPT}") == f"```\n{SCRIPT}"


def test_inline_flattens_and_escapes():
    assert inline(f"Edit\n{IMG}") == "Edit &lt;img src=x onerror=alert(1)>"


def test_fenced_picks_a_fence_the_text_cannot_close():
    out = fenced("a\n```\n<b>\n", "diff")
    assert out.startswith("````diff\n") and out.endswith("\n````")


def test_escape_html_quotes():
    assert escape_html('"><img>') == "&quot;&gt;&lt;img&gt;"


def test_the_fast_path_for_inert_text_agrees_with_the_full_sanitizer(monkeypatch):
    """Text without ``< & : ` ~`` is returned as is: check the full pass would not change it either."""
    import random
    import re
    import string

    from acp_kernel.view import sanitize

    rng = random.Random(7)
    alphabet = string.ascii_letters + string.digits + string.punctuation + " \n\t\\é→"
    samples = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 80))) for _ in range(3000)]
    samples += ["```js\nx\n```", "~~~\n<b>\n~~~", "[a](javascript:x)", "a & b", "`<i>`", "- [ ] *x* # y"]
    fast = {s: sanitize_markdown(s) for s in samples}
    inert = [s for s in samples if not re.search(r"[<&:`~]", s)]
    assert len(inert) > 100 and all(fast[s] == s for s in inert)
    monkeypatch.setattr(sanitize, "_NEEDS_CARE", re.compile(""))  # matches everything: always the full pass
    assert {s: sanitize_markdown(s) for s in samples} == fast
