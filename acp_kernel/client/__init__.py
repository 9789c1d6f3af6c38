"""The client: agents, sessions and turns, shared by every front-end.

``registry`` and ``discovery`` (known agents as data, and which are here),
``session`` and ``content`` (ACP sessions and prompt blocks), ``turn`` (a
turn's ordered events and state), ``controller`` and ``commands`` (what the
kernel, the magics and the Python API all do, and the one command table),
``store``, ``host``, ``startup`` and ``params``.
"""
