"""The protocol layer: JSON-RPC lines over an agent's stdio.

``framing`` (bytes to classified messages, pure), ``connection`` (requests
correlated both ways, notifications in order), ``transport`` (the agent
process and its pipes), ``proctree`` and ``watchdog`` (process trees that end
with us). Knows nothing of sessions, notebooks or views.
"""
