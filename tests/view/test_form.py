from acp_kernel.view.form import UNSET, choices, field_kind, validate

FIELDS = {
    "name": {"type": "string", "title": "Name", "minLength": 2, "maxLength": 5},
    "n": {"type": "integer", "minimum": 1, "maximum": 3},
    "x": {"type": "number"},
    "ok": {"type": "boolean"},
    "color": {"type": "string", "oneOf": [{"const": "r", "title": "Red"}, {"const": "g", "title": "Green"}]},
    "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 1},
    "mail": {"type": "string", "format": "email"},
}


def test_field_kinds():
    kinds = {k: field_kind(v) for k, v in FIELDS.items()}
    assert kinds == {
        "name": "string", "n": "integer", "x": "number", "ok": "boolean",
        "color": "choice", "tags": "multi", "mail": "string",
    }
    assert choices(FIELDS["color"]) == [("Red", "r"), ("Green", "g")]


def test_valid_answer():
    content, errors = validate(FIELDS, ["name"], {"name": "abc", "n": 2, "x": UNSET, "ok": False, "color": "g", "tags": ["a"], "mail": ""})
    assert errors == []
    assert content == {"name": "abc", "n": 2, "ok": False, "color": "g", "tags": ["a"]}


def test_all_problems_at_once():
    _, errors = validate(FIELDS, ["name", "n"], {"name": "a", "n": 9, "tags": ["a", "b"], "mail": "nope"})
    assert errors == [
        "Name needs at least 2 characters",
        "n must be at most 3",
        "tags: choose at most 1",
        "mail must be an email address",
    ]


def test_required_missing():
    _, errors = validate(FIELDS, ["name", "n"], {"name": "", "n": UNSET})
    assert errors == ["Name is required", "n is required"]
