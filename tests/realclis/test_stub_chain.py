"""The stub model's chains: several ``TOOL:`` markers in one prompt are called one after the
other, each on the previous one's result, with ``{{cell N}}`` taken from a ``cells`` result
(tests/realclis/test_edit_tools_real.py makes real agents learn cell ids this way)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from stub_model_server import (StubServer, cell_id_in, fill_cells, plan, tool_markers, tool_result,  # noqa: E402
                               tool_results)
from test_stub_server import _events, _post  # noqa: E402

CELLS = ('The notebook as it is now ...\n\n## Cell 1: code, id "p0"\n```python\n\n```\n\n'
         '## Cell 2: code, execution count 3, id "x-id_1"\n```python\nx = 1\n```\n\n'
         '## Cell 3: markdown, id "y1" (active: the user\'s cursor is here)\n```markdown\ny\n```')
PROMPT = ('TOOL:cells {}\nTOOL:edit_cell {"cell_id": "{{cell 2}}", "source": "TOOL:nope {}"}\n'
          'TOOL:delete_cell {"cell_id": "{{cell 3}}"}')


def test_markers_in_order_and_json_arguments_skipped_whole():
    assert tool_markers(PROMPT) == [("cells", {}), ("edit_cell", {"cell_id": "{{cell 2}}", "source": "TOOL:nope {}"}),
                                    ("delete_cell", {"cell_id": "{{cell 3}}"})]
    assert tool_markers("no marker") == []


def test_cell_ids_come_from_the_latest_result_that_names_the_cell():
    assert cell_id_in([CELLS], 2) == "x-id_1" and cell_id_in([CELLS], 3) == "y1" and cell_id_in([CELLS], 4) is None
    newer = CELLS.replace('"x-id_1"', '"newer"')
    assert cell_id_in([CELLS, "Applied", newer, "Rejected"], 2) == "newer"
    # Codex returns the content JSON verbatim: the quotes come escaped
    assert cell_id_in([json.dumps([{"type": "text", "text": CELLS}])], 2) == "x-id_1"
    assert fill_cells({"a": ["{{cell 2}}/{{cell 9}}"], "n": 1}, [CELLS]) == {"a": ["x-id_1/{{cell 9}}"], "n": 1}


def test_each_result_of_the_turn_is_answered_with_the_next_marker_then_quoted():
    tools = ["mcp__notebook__cells", "mcp__notebook__edit_cell", "mcp__notebook__delete_cell"]
    first = plan(PROMPT, tools=tools)
    assert (first.mode, first.call.name, first.call.args) == ("tool_call", "mcp__notebook__cells", {})
    second = plan(PROMPT, tools=tools, result=CELLS, done=1, results=[CELLS])
    assert second.call.name == "mcp__notebook__edit_cell"
    assert second.call.args == {"cell_id": "x-id_1", "source": "TOOL:nope {}"}
    third = plan(PROMPT, tools=tools, result="Rejected: no", done=2, results=[CELLS, "Rejected: no"])
    assert (third.call.name, third.call.args) == ("mcp__notebook__delete_cell", {"cell_id": "y1"})
    last = plan(PROMPT, tools=tools, result="Applied: gone", done=3, results=[CELLS, "Rejected: no", "Applied: gone"])
    assert (last.mode, last.text) == ("tool_result", "tool result: Applied: gone")
    # Claude Code's wait for its MCP servers is not a step of the chain
    waited = plan(PROMPT, tools=tools + ["WaitForMcpServers"], result="ready: true", done=0)
    assert waited.call.name == "mcp__notebook__cells"


def test_the_turns_results_in_each_api_shape():
    anthropic = {"messages": [
        {"role": "user", "content": "old prompt"},
        {"role": "user", "content": [{"type": "tool_result", "content": "old"}]},
        {"role": "user", "content": [{"type": "text", "text": PROMPT}]},
        {"role": "assistant", "content": [{"type": "tool_use", "name": "a"}]},
        {"role": "user", "content": [{"type": "tool_result", "content": [{"type": "text", "text": "one"}]},
                                     {"type": "text", "text": "<system-reminder>x</system-reminder>"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "name": "b"}]},
        {"role": "user", "content": [{"type": "tool_result", "content": "two"}]},
        {"role": "system", "content": "# MCP Server Instructions"}]}  # Claude Code 2.1.185 adds these
    assert tool_results(anthropic, turn=True) == ["one", "two"] and tool_result(anthropic) == "two"
    assert tool_results(anthropic) == ["old", "one", "two"]
    chat = {"messages": [{"role": "user", "content": "p"}, {"role": "tool", "content": "one"},
                         {"role": "tool", "content": "two"}]}
    assert tool_results(chat, turn=True) == ["one", "two"]
    responses = {"input": [{"type": "function_call_output", "output": "old"}, {"role": "user", "content": "p"},
                           {"type": "function_call", "name": "a"}, {"type": "function_call_output", "output": "one"}]}
    assert tool_results(responses, turn=True) == ["one"] and tool_results(responses) == ["old", "one"]
    gemini = {"contents": [{"role": "user", "parts": [{"text": "p"}]}, {"role": "model", "parts": []},
                           {"role": "user", "parts": [{"functionResponse": {"response": {"output": "one"}}}]}]}
    assert tool_results(gemini, turn=True) == ["one"]


def test_the_server_chains_and_logs_each_result_whole(tmp_path):
    log = tmp_path / "log.jsonl"
    tools = [{"name": n, "input_schema": {}} for n in ("mcp__notebook__cells", "mcp__notebook__edit_cell",
                                                        "mcp__notebook__delete_cell")]
    long_words = "keep x small " + "y" * 500
    messages = [{"role": "user", "content": PROMPT},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "mcp__notebook__cells",
                                                   "input": {}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": CELLS}]}]
    with StubServer(0, log) as stub:
        edit = _events(_post(stub.url + "/v1/messages", {"model": "m", "stream": True, "tools": tools,
                                                          "messages": messages}))
        messages += [{"role": "assistant", "content": [{"type": "tool_use", "id": "t2", "name": "x", "input": {}}]},
                     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t2", "is_error": True,
                                                   "content": long_words}]}]
        delete = _events(_post(stub.url + "/v1/messages", {"model": "m", "stream": True, "tools": tools,
                                                            "messages": messages}))
    start = next(e for e in edit if e["type"] == "content_block_start")["content_block"]
    assert start["name"] == "mcp__notebook__edit_cell"
    delta = next(e for e in delete if e["type"] == "content_block_delta")["delta"]
    assert json.loads(delta["partial_json"]) == {"cell_id": "y1"}
    entries = [json.loads(line) for line in log.read_text().splitlines() if '"method"' in line]
    assert [e["call"]["name"] for e in entries] == ["mcp__notebook__edit_cell", "mcp__notebook__delete_cell"]
    assert entries[0]["result"] == CELLS and entries[1]["result"] == long_words  # whole, not the 200 quoted
