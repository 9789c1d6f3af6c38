"""The pure parts of the extension: the cell rewrite, ``{name}`` interpolation, attachments."""

from __future__ import annotations

import ast

from acp_kernel.magics.runtime import ATTACH_CAP, Runtime, attachment
from acp_kernel.magics.transform import RUNTIME, transform_cell


def _calls(lines: list[str]) -> list[tuple[str, tuple]]:
    """(method, args) of each rewritten ``await runtime().method(...)`` line."""
    out = []
    for node in ast.walk(ast.parse("".join(lines), mode="exec")):
        if isinstance(node, ast.Await):
            call = node.value
            out.append((call.func.attr, tuple(ast.literal_eval(a) for a in call.args if not isinstance(a, ast.Call))))
    return out


def _parse_async(lines: list[str]) -> None:
    compile("".join(lines), "<cell>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)


def test_cell_magics_become_one_await_with_args_and_body():
    lines = ["%%acp b --attach df\n", "Summarise {df_name}.\n", "It's \"quoted\" \\ too.\n"]
    out = transform_cell(lines)
    assert len(out) == 1 and out[0].startswith(f"await {RUNTIME}.cell(")
    _parse_async(out)
    assert _calls(out) == [("cell", ("b --attach df", "Summarise {df_name}.\nIt's \"quoted\" \\ too.\n"))]
    out = transform_cell(["%%shell --timeout 1\n", "echo 'a' | cat\n"])
    assert _calls(out) == [("shell", ("--timeout 1", "echo 'a' | cat\n"))]
    assert _calls(transform_cell(["%%acp\n"])) == [("cell", ("", ""))]


def test_line_magics_are_rewritten_where_they_start_a_line_only():
    lines = ["x = 1\n", "%acp connect demo --as a\n", "%acp status\n", "y = '%acp'\n", "%acpx\n"]
    out = transform_cell(lines)
    assert out[0] == "x = 1\n" and out[3:] == lines[3:]
    assert _calls(out[1:3]) == [("line", ("connect demo --as a",)), ("line", ("status",))]
    assert transform_cell(["%%acpx\n", "body\n"]) == ["%%acpx\n", "body\n"]
    assert transform_cell(["%%shellfish\n"]) == ["%%shellfish\n"]
    assert transform_cell([]) == []


def test_interpolation_keeps_unknown_names_and_bad_formats():
    ns = {"x": 42, "name": "Ada", "obj": type("O", (), {"attr": "A"})(), "items": [1, 2]}
    f = Runtime._interpolate
    assert f("{x} {name} {obj.attr} {items[1]} {x!r:>4}", ns) == "42 Ada A 2   42"
    assert f("{missing} and {{literal}}", ns) == "{missing} and {literal}"
    assert f('{"a": 1} and {x', ns) == '{"a": 1} and {x'


def test_attachment_is_an_embedded_resource_cut_at_a_character_boundary():
    assert attachment("data", [1, 2, 3]) == {
        "type": "resource", "resource": {"uri": "python:data", "text": "[1, 2, 3]", "mimeType": "text/plain"}}
    big = "€" * ATTACH_CAP  # 3 bytes each
    text = attachment("big", big)["resource"]["text"]
    body, notice = text.rsplit("\n", 1)
    assert notice == f"... [cut at {ATTACH_CAP:,} bytes]"
    assert len(body.encode()) <= ATTACH_CAP and "\ufffd" not in body and set(body[1:]) == {"€"}

    class Frame:  # duck-typed like a pandas DataFrame
        def head(self, n):
            assert n == 50
            return self

        def to_csv(self):
            return "a,b\n1,2\n"

    assert attachment("df", Frame())["resource"] == {"uri": "python:df", "text": "a,b\n1,2\n", "mimeType": "text/csv"}


def test_indented_magics_become_awaits_only_where_python_allows_one():
    lines = ["for i in range(2):\n", "    %acp new\n", "    if i:\n", "        %acp status\n",
             "def f():\n", "    %acp status\n", "    for j in x:\n", "        %acp status\n",
             "async def g():\n", "    with x:\n", "        %acp mode\n",
             "class C:\n", "    %acp status\n", "%acp model\n"]
    out = transform_cell(lines)
    assert len(out) == len(lines)
    awaited = [i for i, line in enumerate(out) if "await " in line]
    assert awaited == [1, 3, 10, 13]  # top-level blocks and async def: yes; def and class bodies: no
    assert [out[i] for i in (5, 7, 12)] == [lines[i] for i in (5, 7, 12)]  # left to the registered magic
    assert out[3].startswith("        await ") and out[10].startswith("        await ")
    # what is rewritten compiles as IPython compiles a cell with a top-level await
    _parse_async(out[:4] + out[8:11] + out[13:])
