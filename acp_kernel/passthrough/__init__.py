"""Passthrough: an agent's own interactive CLI under a PTY, driven from cells.

``manager`` (terminado PTYs and the prompt-aware terminal), ``ptycell`` (cells
to terminals, for the kernel and the magics), ``pty_input`` (keys and pastes).
The notebook widget is :mod:`acp_kernel.passthrough.panel` (``panel``).
"""
