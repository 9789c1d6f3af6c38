"""acp_kernel.compat: the private seams we lean on are there in the installed versions,
and a missing one is reported as a sentence, not found deep in a turn."""

from __future__ import annotations

import json
import subprocess
import io
import sys

import pytest
from terminado import management

from acp_kernel import compat


def test_the_installed_terminado_has_every_seam_the_passthrough_manager_replaces() -> None:
    assert compat.terminado_seams() == []


def test_a_missing_terminado_seam_is_one_sentence(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(management.TermManagerBase, "pty_read")
    lines = compat.terminado_seams()
    assert len(lines) == 1 and "NamedTermManager.pty_read" in lines[0] and "acp_kernel.compat" in lines[0]


def test_the_passthrough_manager_logs_a_missing_seam(monkeypatch: pytest.MonkeyPatch,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    from acp_kernel.passthrough.manager import PassthroughManager

    monkeypatch.setattr(compat, "terminado_seams", lambda: ["terminado 9.9 has no X"])
    PassthroughManager()
    assert "terminado 9.9 has no X" in caplog.text


def test_displays_to_captures_display_and_the_displayhook_then_restores_them() -> None:
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.display import display

    shell = InteractiveShell.instance()
    before_pub, before_hook = shell.display_pub, sys.displayhook
    got: list[dict] = []
    with compat.displays_to(got.append):
        display({"text/plain": "<b>$x$</b>"}, raw=True)
        sys.displayhook(42)
    assert shell.display_pub is before_pub and sys.displayhook is before_hook
    assert [o["data"].get("text/plain") for o in got] == ["<b>$x$</b>", "42"]


def test_an_interrupt_inside_displays_to_leaves_a_publisher_the_kernel_can_still_use() -> None:
    """ci27: an interrupt cut a run short and left the diverted publisher in place; the
    kernel's next shell message called its ``set_parent``, which it had not, and the
    kernel never answered again. The diversion passes ``set_parent`` on, and a
    :class:`compat.DisplayState` taken before puts everything back whatever was cut short."""
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    parents: list[object] = []

    class Own:  # ipykernel's ZMQDisplayPublisher, as far as this matters
        def set_parent(self, parent: object) -> None:
            parents.append(parent)

    own = Own()
    shell.display_pub, before = own, shell.display_pub
    try:
        state = compat.DisplayState.now()
        stdout = sys.stdout
        gen = compat.displays_to(lambda o: None)
        gen.__enter__()  # ... and never left: the interrupt landed before the with's body
        sys.stdout = io.StringIO()
        assert shell.display_pub is not own
        shell.display_pub.set_parent({"msg_id": "next"})
        assert parents == [{"msg_id": "next"}]
        state.restore()
        assert shell.display_pub is own and sys.stdout is stdout and not compat._diverted
        with compat.cell_displays():  # nothing diverted any more: a no-op
            assert shell.display_pub is own
    finally:
        shell.display_pub = before


def test_displays_to_outside_ipython_changes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    import IPython

    monkeypatch.setattr(IPython, "get_ipython", lambda: None)
    hook = sys.displayhook
    with compat.displays_to(lambda o: None):
        assert sys.displayhook is hook



def test_waking_a_stopped_iopub_thread_neither_raises_nor_blocks() -> None:
    """The race at kernel shutdown: the control thread checked the IOPub thread was
    alive, then the main thread stopped it and closed every event pipe. ipykernel's own
    ``schedule`` then raises ZMQError ("Socket operation on non-socket"), or blocks
    forever on a pipe nobody reads (the kernel then waits for SIGTERM)."""
    import zmq

    ctx = zmq.Context()
    sock = ctx.socket(zmq.PUB)
    iopub = compat.iopub_thread_class()(sock)
    iopub.start()
    try:
        assert iopub._event_pipe is not None  # this thread's pipe, as the control thread has one
        iopub.stop()
        iopub.thread.is_alive = lambda: True  # the caller's check came just before the stop
        iopub.schedule(lambda: None)  # returns: the wake-up is dropped
    finally:
        del iopub.thread.is_alive
        iopub.close()
        sock.close(linger=0)
        ctx.term()


def test_the_acp_schema_is_lean_and_still_validates() -> None:
    """protocol.schema imports the SDK's models deferred and without docstrings, in a
    fresh process (this one may have imported acp.schema plainly): the models are not
    built until they validate, pydantic's BaseModel config is as it was, and a hostile
    request still validates, or fails, as with a plain import."""
    probe = r"""
import json, pydantic
before = dict(pydantic.BaseModel.model_config)
from acp_kernel.protocol import schema
from pydantic._internal import _fields
out = {"restored": dict(pydantic.BaseModel.model_config) == before,
       "docstrings_restored": _fields._update_fields_from_docstrings.__name__ == "_update_fields_from_docstrings",
       "built_before": schema.RequestPermissionRequest.__pydantic_complete__}
req = schema.RequestPermissionRequest.model_validate({
    "sessionId": "s", "toolCall": {"toolCallId": "t", "title": "<img src=x onerror=alert(1)> $x$ `a\nb` /tmp/a\nb"},
    "options": [{"optionId": "a", "name": "Allow", "kind": "allow_once"}]})
out["built_after"] = schema.RequestPermissionRequest.__pydantic_complete__
out["title"] = req.tool_call.title
try:
    schema.RequestPermissionRequest.model_validate({"sessionId": "s", "options": [{"kind": "allow_maybe"}]})
    out["refused"] = False
except pydantic.ValidationError:
    out["refused"] = True
out["update"] = type(schema.models.AgentMessageChunk.model_validate(
    {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hi"}})).__name__
print(json.dumps(out))
"""
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "restored": True, "docstrings_restored": True, "built_before": False, "built_after": True,
        "title": "<img src=x onerror=alert(1)> $x$ `a\nb` /tmp/a\nb", "refused": True, "update": "AgentMessageChunk",
    }
