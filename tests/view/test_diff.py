from acp_kernel.view.diff import diff_from_content, render_diff


def test_unified_diff_with_typed_lines():
    view = render_diff("src/app.py", "a\nb\nc\n", "a\nB\nc\nd\n")
    ops = [op for op, _ in view.lines]
    assert ops[:3] == ["h", "h", "@"]
    assert ("-", "-b") in view.lines and ("+", "+B") in view.lines and ("+", "+d") in view.lines
    assert (view.added, view.removed) == (2, 1)
    assert view.lines[0][1] == "--- src/app.py"
    md = view.markdown()
    assert md.startswith("```diff\n--- src/app.py\n+++ src/app.py\n@@")
    assert "\n-b\n+B\n" in md


def test_new_file_when_old_text_missing():
    view = diff_from_content({"type": "diff", "path": "new.txt", "newText": "x\ny\n"})
    assert view.new_file and view.added == 2 and view.removed == 0
    assert view.lines[0][1] == "--- /dev/null"
    assert "new file" in view.summary


def test_big_diffs_are_cut():
    view = render_diff("big", None, "".join(f"{i}\n" for i in range(5000)), max_lines=100)
    assert len(view.lines) == 100 and view.truncated and view.added == 5000
    assert "diff cut" in view.text()


def test_html_in_diff_stays_inside_the_fence():
    view = render_diff("x.html", "<p>\n", "<script>alert(1)</script>\n<img src=x onerror=alert(1)>\n")
    md = view.markdown()
    fence = md.split("\n")[0]
    assert fence == "```diff" and md.endswith("\n```")
    assert md.count("```") == 2  # nothing inside can close the fence


def test_to_json_is_plain_data():
    data = render_diff("a", "1\n", "2\n").to_json()
    assert data["path"] == "a" and data["lines"][2][0] == "@" and data["added"] == 1


def test_a_diff_asked_for_again_is_made_once_and_cut_to_each_callers_length():
    """One call's diff is asked for by its row's state, its markdown, its HTML and the CLI:
    made once (difflib on a big file takes milliseconds), each caller getting the same view
    a fresh render would give at its length, its own copy to keep."""
    from acp_kernel.view import diff

    old = "".join(f"line {i} <img src=x onerror=alert(1)> $x$\n" for i in range(3000))
    new = old.replace("line 10 ", "LINE 10 ").replace("line 2500 ", "`a\nb` ")
    item = {"type": "diff", "path": "/tmp/a\nb.py", "oldText": old, "newText": new}
    diff._whole_diff.cache_clear()
    for max_lines in (diff.MAX_LINES, 400, 40, 5, 1):
        got = diff_from_content(item, max_lines=max_lines)
        assert got == render_diff(item["path"], old, new, max_lines=max_lines), max_lines
        got.lines.append(("+", "mine"))  # a caller's copy: the next one does not see it
    assert diff._whole_diff.cache_info().misses == 1 and diff._whole_diff.cache_info().hits == 4
    big = "x\n" * (diff.CACHE_CHARS // 2 + 1)
    assert diff_from_content({"type": "diff", "path": "big", "oldText": big, "newText": big + "y\n"}).added == 1
    assert diff._whole_diff.cache_info().currsize == 1  # past CACHE_CHARS: made, not kept
