"""W3C trace context for the agent, in ``params._meta`` (ACP's propagation convention).

ACP reserves the root ``_meta`` keys ``traceparent``, ``tracestate`` and
``baggage`` for W3C trace context, as MCP does, so one trace can follow a
request from the tool that started the client into the agent. A process
receives its context the way OpenTelemetry's environment carriers give it:
the ``TRACEPARENT``, ``TRACESTATE`` and ``BAGGAGE`` variables. Pure: the
environment is passed in. A malformed or oversized value is not sent (a
broken traceparent would make the agent start a wrong trace); a tracestate
or baggage goes only with a valid traceparent, as the W3C spec asks.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

#: version-traceid-parentid-flags, lower-case hex; version ff is invalid.
_TRACEPARENT = re.compile(r"(?!ff)[0-9a-f]{2}-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}")
#: W3C limits: tracestate at most 32 members (512 characters is what must be kept);
#: baggage at most 8,192 bytes. Printable ASCII only, no controls.
_LIMITS = {"tracestate": 512, "baggage": 8192}
_PRINTABLE = re.compile(r"[\x20-\x7e]*")


def trace_meta(environ: Mapping[str, str]) -> dict[str, str]:
    """The ``_meta`` members to send (empty when there is no valid traceparent)."""
    parent = environ.get("TRACEPARENT", "").strip()
    if not _TRACEPARENT.fullmatch(parent):
        return {}
    meta = {"traceparent": parent}
    for key, limit in _LIMITS.items():
        value = environ.get(key.upper(), "").strip()
        if value and len(value) <= limit and _PRINTABLE.fullmatch(value):
            meta[key] = value
    return meta
