"""Where acp-kernel keeps its own files: the config file, the session store, the registry cache.

A bottom module (no package imports): the client reads and writes these
files, and the file service refuses agents' writes to them, so both layers
need the same answer, as the environment says it now.
"""

from __future__ import annotations

import os
from pathlib import Path

from jupyter_core.paths import jupyter_config_dir, jupyter_data_dir


def config_path() -> Path:
    """``ACP_KERNEL_CONFIG``, else :func:`default_config_path`."""
    explicit = os.environ.get("ACP_KERNEL_CONFIG")
    if explicit:
        return Path(explicit)
    return default_config_path()


def default_config_path() -> Path:
    """``acp_kernel.json`` in the Jupyter config directory."""
    return Path(jupyter_config_dir()) / "acp_kernel.json"


def store_path() -> Path:
    """``ACP_KERNEL_STATE``, else ``acp_kernel/sessions.json`` in the Jupyter data directory."""
    explicit = os.environ.get("ACP_KERNEL_STATE")
    if explicit:
        return Path(explicit)
    return Path(jupyter_data_dir()) / "acp_kernel" / "sessions.json"


def registry_cache_dir() -> Path:
    """``ACP_KERNEL_REGISTRY_CACHE``, else ``acp_kernel/registry`` in the Jupyter data
    directory: the fetched copies of the ACP agent registry (beside the session store)."""
    explicit = os.environ.get("ACP_KERNEL_REGISTRY_CACHE")
    if explicit:
        return Path(explicit)
    return Path(jupyter_data_dir()) / "acp_kernel" / "registry"
