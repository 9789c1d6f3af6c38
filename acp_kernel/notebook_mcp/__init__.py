"""The ``notebook`` MCP server: agents reach the live kernel (run code, see variables,
read the notebook's cells) through a comm, with the user's permission.

Kernel side: :func:`offer` a :class:`NotebookBridge` to get the ACP ``McpServerStdio``
entry for a session, :func:`withdraw` it when the session ends; :func:`started` says
whether the agent really started a server from it. The server process is
``python -m acp_kernel.notebook_mcp`` (:mod:`.server`); the comm wire is :mod:`.wire`.

The notebook page's side: :func:`register_document` offers the document comm target that
acp-kernel's front-end extension opens (:mod:`.document`, shapes in :mod:`.docwire`), so
``cells`` reads the live notebook.
"""

from .document import register as register_document
from .host import NotebookBridge, RunView, offer, started, withdraw
from .wire import COMM_TARGET, TOOLS

__all__ = ["COMM_TARGET", "TOOLS", "NotebookBridge", "RunView", "offer", "register_document", "started", "withdraw"]
