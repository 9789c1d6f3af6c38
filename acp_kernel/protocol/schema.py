"""The ACP schema models acp-kernel validates with: agent-client-protocol's generated
``acp.schema``, imported here and only here.

A plain ``import acp.schema`` builds about 280 pydantic models and reads each one's
source for field docstrings: about 1 s of CPU, paid by the kernel at an agent's first
permission, file or terminal request, and by the demo agent when it is offered MCP
servers. Imported through :func:`acp_kernel.compat.lean_pydantic_models`, a model is
built when it first validates, and the docstrings are skipped: about 0.45 s. An
import-linter contract (pyproject.toml) keeps every other module on this one.
"""

from __future__ import annotations

from ..compat import lean_pydantic_models

with lean_pydantic_models():
    from acp import schema as models  # the whole module, for models looked up by name
    from acp.schema import (
        CreateFormSessionElicitationRequest,
        CreateTerminalRequest,
        KillTerminalRequest,
        McpServerStdio,
        ReadTextFileRequest,
        ReleaseTerminalRequest,
        RequestPermissionRequest,
        TerminalAuthMethod,
        TerminalOutputRequest,
        WaitForTerminalExitRequest,
        WriteTextFileRequest,
    )

__all__ = [
    "models",
    "CreateFormSessionElicitationRequest",
    "CreateTerminalRequest",
    "KillTerminalRequest",
    "McpServerStdio",
    "ReadTextFileRequest",
    "ReleaseTerminalRequest",
    "RequestPermissionRequest",
    "TerminalAuthMethod",
    "TerminalOutputRequest",
    "WaitForTerminalExitRequest",
    "WriteTextFileRequest",
]
