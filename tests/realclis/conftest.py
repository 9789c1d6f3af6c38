"""The real-CLI matrix: a marker of its own, and it runs only on request.

The real CLIs live outside the clone (``tests/realclis/install.sh`` puts them under
``REALCLIS_HOME``, default /tmp/realclis), so whether they are there says nothing about
the checkout under test: a CI machine that shares /tmp with an earlier run would test
third-party CLIs of whatever version was left there, under the full suite's load. They
run when asked for: ``ACP_REALCLIS=1 python -m pytest -m realcli``.
"""

import os

import pytest

OPT_IN = "ACP_REALCLIS"


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "realcli: runs the real agent CLIs (tests/realclis/install.sh) against the stub model server")


def pytest_collection_modifyitems(config, items):
    if os.environ.get(OPT_IN) == "1":
        return
    skip = pytest.mark.skip(reason=f"the real CLIs run on request: {OPT_IN}=1 python -m pytest -m realcli "
                                   "(after bash tests/realclis/install.sh)")
    for item in items:
        if item.get_closest_marker("realcli") is not None:
            item.add_marker(skip)
