"""An agent's ``fs/write_text_file`` to the notebook the kernel runs for (open in the
user's editor, which would overwrite the write on its next save, or lose the user's
unsaved edits to it) is refused with what to do instead; other notebooks are written as
before (valid nbformat only). A real ACP kernel (jupyter_client) started as Jupyter
Server starts one (``JPY_SESSION_NAME``), on the scripted agent; the notebook's name is
hostile, and the refusal shown in the turn stays inert."""

from __future__ import annotations

import json

import nbformat
from nbformat.v4 import new_code_cell, new_notebook

from tests.hostile.render import inert_data

from .conftest import KernelHarness, running_kernel, scripted_command

#: Raw HTML, a code span across a line break, math delimiters, a newline: in a file name.
HOSTILE_NAME = "open <img src=x onerror=alert(1)> `a\nb` $x$ \\(y\\).ipynb"


def _write(path, content: str) -> dict:
    return {"request": {"method": "fs/write_text_file",
                        "params": {"sessionId": "$SID", "path": str(path), "content": content}}}


async def test_a_write_to_the_open_notebook_is_refused_and_others_are_written(kernel_env, tmp_path):
    work = tmp_path / "work"
    mine, other = work / HOSTILE_NAME, work / "other.ipynb"
    before = nbformat.writes(new_notebook(cells=[new_code_cell("x = 1  # the user's")]))
    mine.write_text(before, encoding="utf-8")
    link = work / "link.ipynb"
    link.symlink_to(mine)
    theirs = nbformat.writes(new_notebook(cells=[new_code_cell("x = 2  # the agent's")]))
    kernel_env["JPY_SESSION_NAME"] = str(mine)  # as Jupyter Server starts a notebook's kernel
    scenario = {"prompts": {"go": [_write(mine, theirs), _write(link, theirs), _write(other, theirs)]}}
    async with running_kernel(kernel_env, work) as (km, kc):
        kernel = KernelHarness(km, kc)
        await kernel.announce_widgets()
        assert (await kernel.execute("%permissions allow-all")).status == "ok"
        started = await kernel.execute(f"%agent --command {scripted_command(scenario)}")
        assert started.status == "ok", started.text()
        res = await kernel.execute("go")
    assert res.status == "ok", res.text()
    # The finished turn (its last display): what the agent was answered, and the notices.
    final = [m["content"]["data"] for m in res.outputs if m["msg_type"] in ("display_data", "update_display_data")][-1]
    said = final["text/plain"]
    errors = [json.loads(line.split("ERROR ", 1)[1]) for line in said.splitlines() if line.startswith("ERROR {")]
    assert len(errors) == 2, said  # the notebook, and a link to it
    for error in errors:
        assert "open in the user's notebook editor" in error["message"] and "`edit_cell`" in error["message"]
    assert said.count("RESULT {}") == 1, said  # the other notebook was written
    assert mine.read_text(encoding="utf-8") == before
    assert nbformat.read(other, as_version=4).cells[0].source == "x = 2  # the agent's"
    # The person sees why (the turn's notices), inert in every text form.
    assert inert_data(final) == []
