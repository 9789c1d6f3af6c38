"""Headless runs (nbclient, nbconvert, papermill) of ACP-kernel notebooks,
with the scripted agent as the configured default agent."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.kernel.conftest import kernel_env, kernelspec_path  # noqa: F401 - fixtures

AGENT = Path(__file__).resolve().parents[1] / "agents" / "scripted_agent.py"


def use_scripted_agent(env: dict[str, str], scenario: dict) -> None:
    """Write the config file ``env`` points at: the scripted agent playing ``scenario`` is the default."""
    config = {"default_agent": "scripted",
              "agents": {"scripted": {"title": "Scripted", "command": [sys.executable, str(AGENT), json.dumps(scenario)]}}}
    Path(env["ACP_KERNEL_CONFIG"]).write_text(json.dumps(config), encoding="utf-8")


def tool_call_turn(title: str) -> list[dict]:
    """A turn with one tool call that runs and completes, then a sentence."""
    return [
        {"update": {"sessionUpdate": "tool_call", "toolCallId": "t1", "title": title, "kind": "read", "status": "pending"}},
        {"update": {"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "in_progress"}},
        {"update": {"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "completed",
                    "content": [{"type": "content", "content": {"type": "text", "text": f"read by {title}"}}]}},
        {"chunk": f"Answer after {title}."},
    ]


@pytest.fixture
def headless_env(kernel_env, monkeypatch) -> dict[str, str]:  # noqa: F811
    """The kernel environment, also set in this process (nbclient and
    papermill start the kernel with it)."""
    for key, value in kernel_env.items():
        monkeypatch.setenv(key, value)
    return kernel_env
