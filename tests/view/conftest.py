"""View fixtures: a recording widget frontend."""

from __future__ import annotations

import pytest

from .helpers import Frontend, recording_comm_class


@pytest.fixture
def frontend(monkeypatch) -> Frontend:
    """Every widget comm opened during the test reports to this frontend."""
    import comm

    seen = Frontend()
    cls = recording_comm_class(seen)
    monkeypatch.setattr(comm, "create_comm", lambda *args, **kwargs: cls(*args, **kwargs))
    return seen
