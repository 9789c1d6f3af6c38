"""A magic's usage error that carries an agent's words is made as text/plain is: IPython
shows it as a traceback, which JupyterLab's stderr renderer draws with links made."""

from __future__ import annotations

from acp_kernel.safe import plain
from magics.runtime import said


def test_agent_words_in_a_usage_error_make_no_link_and_no_escape() -> None:
    agent = "failed: see javascript://%0Aalert(1) \x1b]0;title\x07 and https://example.org/ok"
    message = str(said(agent))
    assert message == str(plain(agent))
    assert "javascript:" not in message and "\x1b" not in message and "\x07" not in message
    assert "https://example.org/ok" in message  # an ordinary link stays one
