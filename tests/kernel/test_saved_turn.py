"""A long streamed answer is whole in the notebook nbclient saves, however the live view cut it.

The live turn widget (view/turnoutput.py) sends an agent message as blocks made at each of its
refreshes (ten a second): how many blocks one message becomes depends on how the stream and the
refreshes fell, i.e. on the machine's load. The finished turn's static output (view/finished.py)
is bounded by steps; a message must be one step there, or which of its parts the saved notebook
keeps would depend on timing (a benchmark lost 1.2% of a 3.2 MB answer on a loaded machine).
The HTML keeps it whole; the markdown and the text, bounded apart (finished.FORM_LIMIT), keep
its start and its end, with one line between saying what only the HTML keeps.
"""

from __future__ import annotations

import json
import re
import shlex
import sys

import nbformat
import pytest
from nbclient import NotebookClient

from acp_kernel.safe import unwrapped
from acp_kernel.view.finished import FORM_LIMIT
from tests.kernels import IpcKernelManager

from .conftest import AGENTS

#: Paragraphs of the answer, each of about WORDS words: together over the static output's
#: 200,000 characters of HTML, in more blocks than its 5 head steps and the status line.
PARAGRAPHS, WORDS = 8, 4_000


def _words(i: int) -> list[str]:
    return [f"p{i}w{j}" for j in range(WORDS)]


@pytest.mark.slow
@pytest.mark.parametrize("paced", [True, False], ids=["a-refresh-each", "one-burst"])
def test_a_long_message_streamed_over_many_refreshes_is_whole_in_the_saved_notebook(kernel_env, tmp_path, monkeypatch,
                                                                                   paced):
    for key, value in kernel_env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("ACP_KERNEL_REFRESH_HZ", "10")  # the view refreshes at most every 0.1 s
    # Each paragraph in a refresh of its own, whatever the load: the kernel has read it when it
    # answers the round trip, and the next comes after more than a refresh interval, so the view
    # flushes it at once (the first change after a quiet interval is sent at once).
    actions: list[dict] = []
    for i in range(PARAGRAPHS):
        actions += [{"chunk": " ".join(_words(i)) + "\n\n"}]
        if paced:  # else one burst: the live view may make the whole answer one block
            actions += [{"round_trip": "_acp_test/sync"}, {"sleep": 0.15}]
    scenario = tmp_path / "scenario.json"  # (too long for a command line)
    scenario.write_text(json.dumps({"prompt": actions}))
    agent = shlex.join([sys.executable, str(AGENTS / "scripted_agent.py"), str(scenario)])
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(f"%agent --command {agent}"),
                nbformat.v4.new_code_cell("write a long answer")]
    nb.metadata["kernelspec"] = {"name": "acp", "display_name": "ACP", "language": "markdown"}
    work = tmp_path / "work"
    NotebookClient(nb, timeout=60, kernel_name="acp", kernel_manager_class=IpcKernelManager,
                   resources={"metadata": {"path": str(work)}}).execute()
    path = work / "saved.ipynb"
    nbformat.write(nb, path)

    outputs = nbformat.read(path, as_version=4).cells[1].outputs
    turns = [o for o in outputs if "acp_kernel" in o.get("metadata", {})]  # the turn's, with its record
    assert len(turns) == 1, [o.get("output_type") for o in outputs]  # (and the agent's start, emptied)
    data = turns[0]["data"]
    whole = " ".join(w for i in range(PARAGRAPHS) for w in _words(i))
    html = " ".join(re.sub(r"<[^>]*>", " ", data["text/html"]).split())
    assert "not kept" not in html
    assert whole in html, f"html: {sum(w in html for w in whole.split()):,} of {len(whole.split()):,} words"
    for mime in ("text/markdown", "text/plain"):
        assert len(data[mime]) <= FORM_LIMIT + 1_000, (mime, len(data[mime]))
        head, line, tail = re.split(r"\n\**(… [\d,]+ characters of this turn are not kept[^\n]*)\n", unwrapped(data[mime]))
        assert "(its HTML keeps them" in line
        answer_end, status = tail.rstrip("\n").rsplit("\n", 1)  # the status line, last
        head, answer_end = " ".join(head.split()), " ".join(answer_end.split())
        assert "Done" in status or "done" in status, (mime, status)
        assert whole.startswith(head) and len(head) > FORM_LIMIT // 4, (mime, head[-100:])
        assert whole.endswith(answer_end) and len(answer_end) > FORM_LIMIT // 4, (mime, answer_end[:100])
