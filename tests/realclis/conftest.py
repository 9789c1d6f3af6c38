"""The real-CLI matrix: a marker of its own, so a run can pick it (-m realcli) or leave it out."""


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "realcli: runs the real agent CLIs (tests/realclis/install.sh) against the stub model server")
