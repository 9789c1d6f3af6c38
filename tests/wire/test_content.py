"""Prompt blocks gated on the agent's promptCapabilities (pure, and over a real pipe)."""

from __future__ import annotations

import json

import pytest

from acp_kernel.client.content import ContentRefused, embedded_resource, gate, prompt_capabilities, text_block
from acp_kernel.client.session import Client

from ..conftest import scripted_spec

NONE = prompt_capabilities({})
ALL = prompt_capabilities({"promptCapabilities": {"image": True, "audio": True, "embeddedContext": True}})
IMAGE = {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}
AUDIO = {"type": "audio", "data": "UklGRg==", "mimeType": "audio/wav"}
HOSTILE = "<img src=x onerror=alert(1)> `span\nacross` lines"


def test_capabilities_are_true_only_when_said_so():
    assert NONE == {"image": False, "audio": False, "embeddedContext": False}
    assert prompt_capabilities({"promptCapabilities": {"image": "yes", "audio": 1, "embeddedContext": True}}) == {
        "image": False, "audio": False, "embeddedContext": True}
    assert prompt_capabilities(None) == NONE == prompt_capabilities({"promptCapabilities": []})


def test_text_and_links_always_pass_and_everything_passes_a_capable_agent():
    link = {"type": "resource_link", "uri": "file:///a", "name": "a"}
    blocks = [text_block("hi"), link, embedded_resource("file:///a", "x"), IMAGE, AUDIO]
    assert gate(blocks[:2], NONE).blocks == blocks[:2]
    out = gate(blocks, ALL)
    assert out.blocks == blocks and out.notes == []


def test_an_embedded_file_becomes_a_link_to_it():
    block = embedded_resource("file:///tmp/dir%20x/notes.md", HOSTILE, "text/markdown")
    out = gate([text_block("see"), block], NONE)
    assert out.blocks[1] == {"type": "resource_link", "uri": "file:///tmp/dir%20x/notes.md",
                             "name": "notes.md", "mimeType": "text/markdown"}
    assert out.notes == ["sent a link to file:///tmp/dir%20x/notes.md instead of its contents "
                         "(the agent takes no embedded context)"]


def test_an_embedded_file_whose_path_has_a_newline_keeps_its_uri():
    uri = "file:///tmp/a\nb <img src=x>.txt"
    out = gate([embedded_resource(uri, "x")], NONE)
    assert out.blocks[0]["type"] == "resource_link" and out.blocks[0]["uri"] == uri
    assert out.blocks[0]["name"] == "a\nb <img src=x>.txt"  # the agent's view of it; our view escapes


def test_embedded_text_without_a_file_goes_inline_and_a_blob_without_one_is_refused():
    out = gate([embedded_resource("untitled:cell-3", HOSTILE)], NONE)
    assert out.blocks == [text_block(f"Contents of untitled:cell-3:\n\n{HOSTILE}")]
    with pytest.raises(ContentRefused, match="no file or text behind it"):
        gate([{"type": "resource", "resource": {"uri": "mem:x", "blob": "AA=="}}], NONE)
    with pytest.raises(ContentRefused, match="no file or text behind it"):
        gate([{"type": "resource", "resource": "nope"}], NONE)


@pytest.mark.parametrize("block,flag", [(IMAGE, "image"), (AUDIO, "audio")])
def test_images_and_audio_are_refused_with_a_clear_message(block, flag):
    with pytest.raises(ContentRefused, match=f"does not take {flag} in prompts .*promptCapabilities.{flag}"):
        gate([text_block("look"), block], NONE)


@pytest.mark.parametrize("block", [{"type": "video"}, {"type": None}, "text", None, {"no": "type"}])
def test_unknown_blocks_are_refused(block):
    with pytest.raises(ContentRefused, match="prompt block 1 has type"):
        gate([block], ALL)


async def test_over_the_wire_the_agent_gets_what_it_can_take(tmp_path):
    record = tmp_path / "wire.jsonl"
    client = await Client(scripted_spec({"record": str(record)})).start()  # no promptCapabilities
    try:
        session = await client.new_session()
        turn = await session.prompt([text_block("read"), embedded_resource("file:///tmp/x.py", "print(1)")])
        assert turn.stop_reason == "end_turn"
        assert any("sent a link to file:///tmp/x.py" in n.text for n in turn.notices)
        with pytest.raises(ContentRefused):
            session.begin([text_block("look"), IMAGE])
        assert session._active is None  # refused before a turn began; the session still works
        assert (await session.prompt("again")).stop_reason == "end_turn"
    finally:
        await client.close()
    prompts = [m["params"]["prompt"] for m in map(json.loads, record.read_text().splitlines())
               if m.get("method") == "session/prompt"]
    assert prompts == [
        [text_block("read"), {"type": "resource_link", "uri": "file:///tmp/x.py", "name": "x.py"}],
        [text_block("again")],
    ]
