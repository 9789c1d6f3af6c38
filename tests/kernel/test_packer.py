"""Jupyter messages are packed with orjson (a dependency for it): jupyter_client takes it as
``Session.packer``'s default when it is installed, in the ACP kernel and in every frontend of
this environment. What orjson refuses still goes out, through jupyter_client's json packer."""

from __future__ import annotations

import datetime
import json

from jupyter_client.session import Session, json_packer, orjson_packer


def test_sessions_pack_with_orjson():
    session = Session()
    assert session.packer == "orjson" and session.pack is orjson_packer


def test_what_orjson_refuses_is_packed_as_json_packer_packs_it():
    session = Session()
    when = datetime.datetime(2026, 12, 3, 12, 0, tzinfo=datetime.timezone.utc)
    hostile = {"text/plain": "<img src=x onerror=alert(1)> `a\nb` $x$ /tmp/evil\n# heading", "when": when}
    assert json.loads(session.pack(hostile)) == json.loads(json_packer(hostile))
    big = {"n": 2**70}  # past 64 bits: orjson says no, json writes it
    assert session.pack(big) == json_packer(big)
