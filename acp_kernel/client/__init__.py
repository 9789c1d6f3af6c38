"""The client: agents, sessions and turns, shared by every front-end.

``registry`` and ``discovery`` (known agents as data, and which are here),
``session`` and ``content`` (ACP sessions and prompt blocks), ``turn`` (a
turn's ordered events and state), ``controller`` (what the kernel, the
magics and the Python API all drive) and its parts ``lifecycle``, ``verbs``,
``route`` and ``output``, ``frontend`` (what a front-end gives it),
``commands`` (the one command table), ``store``, ``host``, ``startup`` and
``params``.
"""
