"""Elicitation forms, the pure part: what widget a field needs, and checking answers.

ACP's ``elicitation/create`` sends a restricted JSON schema: flat properties
of type string (maybe ``enum``/``oneOf``, ``format``), number, integer,
boolean, or an array of enum items (multi-select). Checking happens here so
the person sees every problem at once instead of a refused answer.
"""

from __future__ import annotations

import re
from typing import Any

UNSET = object()  # an optional field left alone: not sent


def choices(schema: dict[str, Any]) -> list[tuple[str, Any]] | None:
    """(label, value) pairs of an enum-like schema, else None."""
    enum = schema.get("enum")
    if isinstance(enum, list):
        names = schema.get("enumNames")
        if isinstance(names, list) and len(names) == len(enum):
            return [(str(n), v) for n, v in zip(names, enum)]
        return [(str(v), v) for v in enum]
    for key in ("oneOf", "anyOf"):
        opts = schema.get(key)
        if isinstance(opts, list) and opts and all(isinstance(o, dict) and "const" in o for o in opts):
            return [(str(o.get("title") or o["const"]), o["const"]) for o in opts]
    return None


def field_kind(schema: dict[str, Any]) -> str:
    """One of "multi", "choice", "boolean", "integer", "number", "string"."""
    t = schema.get("type")
    if t == "array":
        items = schema.get("items")
        if isinstance(items, dict) and choices(items) is not None:
            return "multi"
        return "string"  # a free-form list: one per line
    if choices(schema) is not None:
        return "choice"
    if t in ("boolean", "integer", "number"):
        return t
    return "string"


def field_label(name: str, schema: dict[str, Any], required: bool) -> str:
    label = str(schema.get("title") or name)
    return label + (" *" if required else "")


def validate(fields: dict[str, dict[str, Any]], required: list[str], values: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """(content to send, problems). ``values`` may hold :data:`UNSET` for
    untouched optional fields; empty strings count as unset."""
    content: dict[str, Any] = {}
    errors: list[str] = []
    for name, schema in fields.items():
        label = str(schema.get("title") or name)
        value = values.get(name, UNSET)
        if isinstance(value, str) and value == "" and field_kind(schema) != "boolean":
            value = UNSET
        if value is None or (isinstance(value, (list, tuple)) and not value and name in required):
            value = UNSET
        if value is UNSET:
            if name in required:
                errors.append(f"{label} is required")
            continue
        kind = field_kind(schema)
        if kind == "multi":
            value = list(value)
            lo, hi = schema.get("minItems"), schema.get("maxItems")
            if isinstance(lo, int) and len(value) < lo:
                errors.append(f"{label}: choose at least {lo}")
            if isinstance(hi, int) and len(value) > hi:
                errors.append(f"{label}: choose at most {hi}")
        elif kind in ("integer", "number"):
            if kind == "integer" and isinstance(value, float) and value.is_integer():
                value = int(value)
            if kind == "integer" and not isinstance(value, int):
                errors.append(f"{label} must be a whole number")
                continue
            lo, hi = schema.get("minimum"), schema.get("maximum")
            if isinstance(lo, (int, float)) and value < lo:
                errors.append(f"{label} must be at least {lo}")
            if isinstance(hi, (int, float)) and value > hi:
                errors.append(f"{label} must be at most {hi}")
        elif kind == "string":
            value = str(value)
            lo, hi = schema.get("minLength"), schema.get("maxLength")
            if isinstance(lo, int) and len(value) < lo:
                errors.append(f"{label} needs at least {lo} characters")
            if isinstance(hi, int) and len(value) > hi:
                errors.append(f"{label} allows at most {hi} characters")
            pattern = schema.get("pattern")
            if isinstance(pattern, str):
                try:
                    if re.search(pattern, value) is None:
                        errors.append(f"{label} does not match the expected pattern")
                except re.error:
                    pass
            if schema.get("format") == "email" and not re.fullmatch(r"[^@\s]+@[^@\s]+", value):
                errors.append(f"{label} must be an email address")
        content[name] = value
    return content, errors
