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
