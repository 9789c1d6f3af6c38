"""ACP v2 diff content (structured file changes, an optional git patch) through the v1 diff view.

The shapes are the v2 draft's (agent-client-protocol, docs/protocol/v2/migration.mdx,
"Diff content"; agent-client-protocol-schema/src/v2/tool_call.rs ``Diff``, ``DiffChange``,
``DiffPatch``), at commit b7f0005493b98de32fabee3e9540e2b64da68535.
"""

from __future__ import annotations

import pytest

from acp_kernel.client.turn import Turn
from acp_kernel.frontends.cli import tool_detail
from acp_kernel.view.diff import diff_from_changes, diff_from_content

#: The migration guide's own example, as it is written there.
GUIDE = {
    "type": "diff",
    "changes": [{"operation": "modify", "path": "/home/user/project/src/config.json",
                 "fileType": "text", "mimeType": "application/json"}],
    "patch": {
        "format": "git_patch",
        "text": "diff --git /home/user/project/src/config.json /home/user/project/src/config.json\n--- "
                "/home/user/project/src/config.json\n+++ /home/user/project/src/config.json\n@@ -1,3 +1,3 @@\n {\n"
                "-  \"debug\": false\n+  \"debug\": true\n }\n",
    },
}

TWO_FILES = {
    "type": "diff",
    "changes": [
        {"operation": "add", "path": "/w/new.py", "fileType": "text"},
        {"operation": "move", "oldPath": "/w/old.py", "path": "/w/moved.py"},
    ],
    "patch": {"format": "git_patch", "text": (
        "diff --git /w/new.py /w/new.py\nnew file mode 100644\nindex 0000000..e69de29\n--- /dev/null\n"
        "+++ /w/new.py\n@@ -0,0 +1,2 @@\n+print(1)\n+--- not a header inside a hunk\n"
        "diff --git /w/old.py /w/moved.py\nsimilarity index 90%\nrename from /w/old.py\nrename to /w/moved.py\n"
        "--- /w/old.py\n+++ /w/moved.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n")},
}


def test_the_guides_example_is_a_typed_diff():
    view = diff_from_content(GUIDE)
    assert view.path == "/home/user/project/src/config.json" and not view.new_file
    assert [op for op, _ in view.lines] == ["h", "h", "h", "@", " ", "-", "+", " "]
    assert (view.added, view.removed) == (1, 1) and view.summary.endswith("(edit, +1 -1)")
    assert view.markdown().startswith("```diff\ndiff --git /home/user/project/src/config.json")


def test_several_files_with_a_rename_and_a_new_file():
    view = diff_from_content(TWO_FILES)
    assert view.path == "/w/new.py and 1 more" and view.stats == "(2 files, +3 -1)"
    assert ("+", "+--- not a header inside a hunk") in view.lines  # a hunk's line, not a header
    assert ("h", "rename from /w/old.py") in view.lines and ("h", "--- /w/old.py") in view.lines
    assert view.to_json()["lines"][0] == ["h", "diff --git /w/new.py /w/new.py"]


@pytest.mark.parametrize("item, first, note, stats", [
    ({"type": "diff", "changes": [{"operation": "delete", "path": "/w/gone.txt", "fileType": "text"}]},
     "delete /w/gone.txt (text)", "(no text diff given)", "(delete, +0 -0)"),
    ({"type": "diff", "changes": [{"operation": "modify", "path": "/w/logo.png", "fileType": "binary"}],
      "patch": None}, "modify /w/logo.png (binary)", "(no text diff given)", "(edit, +0 -0)"),
    ({"type": "diff", "changes": [{"operation": "copy", "oldPath": "/w/a", "path": "/w/b"}],
      "patch": {"format": "_acme_patch", "text": "..."}}, "copy /w/a -> /w/b",
     "(a patch in a format not shown: _acme_patch)", "(copy, +0 -0)"),
    ({"type": "diff", "changes": [{"operation": "add", "path": "/w/n"}]}, "add /w/n", "(no text diff given)",
     "(new file, +0 -0)"),
])
def test_changes_without_a_patch_say_what_happened(item, first, note, stats):
    view = diff_from_content(item)
    assert view.lines == [("h", first), (" ", note)] and view.stats == stats


@pytest.mark.parametrize("item", [
    {"type": "diff", "changes": "all of them"},
    {"type": "diff", "changes": [7, None, {"operation": 5, "path": ["x"]}], "patch": {"format": "git_patch", "text": 9}},
    {"type": "diff", "changes": [], "patch": "diff --git a b"},
])
def test_wrong_types_are_shown_not_raised(item):
    view = diff_from_changes(item)
    assert view.path.startswith("?") and view.lines


def test_a_long_patch_is_cut_and_still_counted():
    body = "".join(f"+line {i}\n" for i in range(5000))
    view = diff_from_changes({"changes": [{"operation": "add", "path": "/w/big"}],
                              "patch": {"format": "git_patch", "text": f"diff --git /w/big /w/big\n@@ -0,0 +1,5000 @@\n{body}"}},
                             max_lines=100)
    assert len(view.lines) == 100 and view.truncated and view.added == 5000


def test_the_turn_model_takes_a_v2_diff_and_the_cli_shows_it():
    turn = Turn("s")
    turn.apply_update({"sessionUpdate": "tool_call_update", "toolCallId": "c1", "title": "Edit config",
                       "kind": "edit", "status": "completed", "content": [GUIDE]})
    call = turn.tool_calls["c1"]
    assert call.diffs == [GUIDE]
    shown = tool_detail(call, {})
    assert '    -  "debug": false\n    +  "debug": true' in shown
