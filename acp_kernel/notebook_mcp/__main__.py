"""``python -m acp_kernel.notebook_mcp --connection-file F --token T``: the MCP server."""

import sys

from .server import main

sys.exit(main())
