"""The installed package's version, read once: the ACP client's ``clientInfo``,
``acp-kernel --version`` and the notebook MCP server's ``serverInfo`` all say it."""

from importlib.metadata import PackageNotFoundError, version

try:
    VERSION = version("acp-kernel")
except PackageNotFoundError:  # pragma: no cover - a source tree that was never installed
    VERSION = "0.0.0+unknown"
