"""Answer a permission question inside a turn widget the way the page does (for kernel-level tests).

The turn is one widget (acp_kernel.view.turnwidget): its blocks arrive in the
model's state (``comm_open``, then partial ``update`` comm messages); a
permission block lists its options. A click is a custom comm message
``{"type": "answer", "block": key, "option": optionId}`` (static/turn.js).
"""

from __future__ import annotations

import asyncio
from typing import Any


def permission_answerer(harness: Any, label: str) -> tuple[asyncio.Future, Any]:
    """An ``on_output`` hook that answers the first asking permission block
    with the option whose name holds ``label``; the future gets the comm id."""
    answered: asyncio.Future = asyncio.get_running_loop().create_future()

    async def on_output(msg: dict) -> None:
        if answered.done() or msg["msg_type"] not in ("comm_open", "comm_msg"):
            return
        data = msg["content"].get("data") or {}
        state = data.get("state") or {}
        for key, block in state.items():
            if not (key.startswith("b:") and isinstance(block, dict) and block.get("type") == "permission"
                    and block.get("state") == "asking"):
                continue
            option = next((o for o in block.get("options", []) if label in o.get("name", "")), None)
            if option is None:
                continue
            comm_id = msg["content"]["comm_id"]
            click = harness.kc.session.msg("comm_msg", {"comm_id": comm_id, "data": {
                "method": "custom", "content": {"type": "answer", "block": key, "option": option["id"]}}})
            harness.kc.shell_channel.send(click)
            answered.set_result(comm_id)
            return

    return answered, on_output
