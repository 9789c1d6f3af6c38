"""Modes and models as agents really offer them: session state, config options, or both."""

from __future__ import annotations

import json

import pytest

from acp_kernel.errors import AcpError
from acp_kernel.client.host import ClientSettings
from acp_kernel.client.session import Choice, Client, Session, config_choices

from ..conftest import scripted_spec

# OpenCode's shape: modes only as a config option of category "mode".
MODE_OPTION = {
    "id": "mode", "name": "Mode", "category": "mode", "type": "select", "currentValue": "build",
    "options": [{"value": "build", "name": "Build", "description": "<img src=x onerror=alert(1)>"},
                {"value": "plan", "name": "Plan", "description": "read-only\n`span across\na line`"}],
}
MODEL_OPTION = {
    "id": "model", "name": "Model", "category": "model", "type": "select", "currentValue": "anthropic/sonnet",
    "options": [{"group": "anthropic", "name": "Anthropic",
                 "options": [{"value": "anthropic/sonnet", "name": "Sonnet"},
                             {"value": "anthropic/opus", "name": "Opus"}]},
                {"group": "openai", "name": "OpenAI", "options": [{"value": "openai/gpt", "name": "GPT"}]}],
}


async def open_session(scenario: dict, tmp_path=None):
    if tmp_path is not None:
        scenario = {**scenario, "record": str(tmp_path / "wire.jsonl")}
    client = await Client(scripted_spec(scenario)).start()
    return client, await client.new_session()


def sent(tmp_path, method: str) -> list[dict]:
    lines = (tmp_path / "wire.jsonl").read_text().splitlines()
    return [m.get("params") for m in map(json.loads, lines) if m.get("method") == method]


async def test_modes_offered_only_as_a_config_option_are_listed_and_set_through_it(tmp_path):
    client, session = await open_session({"config_options": [MODE_OPTION]}, tmp_path)
    try:
        modes = session.available_modes()
        assert [(m.id, m.name, m.current, m.config_id) for m in modes] == [
            ("build", "Build", True, "mode"), ("plan", "Plan", False, "mode")]
        assert modes[0].description == "<img src=x onerror=alert(1)>"  # kept as sent; the view escapes
        assert session.current_mode == "build"
        choice = await session.set_mode("Plan")  # by name, any case
        assert choice is not None and choice.id == "plan"
        assert session.current_mode == "plan"
        assert [m.id for m in session.available_modes() if m.current] == ["plan"]
        assert sent(tmp_path, "session/set_config_option") == [
            {"sessionId": session.id, "configId": "mode", "value": "plan"}]
        assert sent(tmp_path, "session/set_mode") == []
        with pytest.raises(AcpError, match="offers no mode 'yolo'; it offers: build, plan"):
            await session.set_mode("yolo")
        # A prompt still works, and the agent's config_option_update agrees.
        turn = await session.prompt("hi")
        assert turn.stop_reason == "end_turn" and session.current_mode == "plan"
    finally:
        await client.close()


async def test_session_modes_use_set_mode_and_stay_consistent(tmp_path):
    modes = {"currentModeId": "ask", "availableModes": [{"id": "ask", "name": "Ask"}, {"id": "code", "name": "Code"}]}
    client, session = await open_session({"modes": modes}, tmp_path)
    try:
        assert [(m.id, m.current, m.config_id) for m in session.available_modes()] == [
            ("ask", True, None), ("code", False, None)]
        await session.set_mode("code")
        assert session.current_mode == "code"
        assert sent(tmp_path, "session/set_mode") == [{"sessionId": session.id, "modeId": "code"}]
        assert sent(tmp_path, "session/set_config_option") == []
    finally:
        await client.close()


async def test_models_as_grouped_config_option_and_as_unstable_state(tmp_path):
    models = {"currentModelId": "m1", "availableModels": [{"modelId": "m1", "name": "One"},
                                                          {"modelId": "m2", "name": "Two", "description": "d"}]}
    client, session = await open_session({"config_options": [MODEL_OPTION], "models": models}, tmp_path)
    try:
        listed = session.available_models()
        # Config option values first (grouped), then state-only models, which go through set_model.
        assert [(m.id, m.group, m.config_id, m.current) for m in listed] == [
            ("anthropic/sonnet", "Anthropic", "model", True), ("anthropic/opus", "Anthropic", "model", False),
            ("openai/gpt", "OpenAI", "model", False), ("m1", None, None, False), ("m2", None, None, False)]
        assert session.current_model == "anthropic/sonnet"
        await session.set_model("openai/gpt")
        assert session.current_model == "openai/gpt"
        await session.set_model("m2")
        assert sent(tmp_path, "session/set_config_option") == [
            {"sessionId": session.id, "configId": "model", "value": "openai/gpt"}]
        assert sent(tmp_path, "session/set_model") == [{"sessionId": session.id, "modelId": "m2"}]
        assert session.models["currentModelId"] == "m2"
    finally:
        await client.close()


async def test_an_agent_that_lists_nothing_is_asked_anyway():
    client, session = await open_session({"responses": {"session/set_mode": {}}})
    try:
        assert session.available_modes() == [] and session.available_models() == []
        assert await session.set_mode("anything") is None
        assert session.current_mode == "anything"
    finally:
        await client.close()


def _session(**state) -> Session:
    s = Session(None, "s", "/", ClientSettings())  # type: ignore[arg-type]
    for k, v in state.items():
        setattr(s, k, v)
    return s


def test_both_sources_merge_and_a_mode_update_moves_both():
    s = _session(config_options=[MODE_OPTION],
                 modes={"currentModeId": "build", "availableModes": [{"id": "build", "name": "B"},
                                                                     {"id": "legacy", "name": "L"}]})
    assert [(m.id, m.name, m.config_id) for m in s.available_modes()] == [
        ("build", "Build", "mode"), ("plan", "Plan", "mode"), ("legacy", "L", None)]
    s.apply({"sessionUpdate": "current_mode_update", "currentModeId": "plan"})
    assert s.current_mode == "plan" and s.modes["currentModeId"] == "plan"
    assert [m.id for m in s.available_modes() if m.current] == ["plan"]
    # A config_option_update is the agent's word on the current value.
    s.apply({"sessionUpdate": "config_option_update", "configOptions": [{**MODE_OPTION, "currentValue": "build"}]})
    assert s.current_mode == "build"


@pytest.mark.parametrize("option", [
    {"id": "m", "category": "mode", "currentValue": "a", "options": "nope"},
    {"id": 5, "category": "mode", "options": [{"value": "a"}]},
    {"id": "m", "category": "mode", "options": [{"value": 1}, "x", None, {"name": "no value"}]},
])
def test_malformed_config_options_give_no_choices(option):
    assert config_choices(option) == []
    assert _session(config_options=[option]).available_modes() == []


def test_malformed_state_is_skipped_and_names_default_to_ids():
    s = _session(modes={"currentModeId": 3, "availableModes": [{"id": "a"}, {"name": "no id"}, "x"]},
                 models={"availableModels": "nope"})
    assert s.available_modes() == [Choice("a", "a")]
    assert s.current_mode is None and s.available_models() == [] and s.current_model is None
