"""Request ids: the client's when sane, else a new one that no other request of the process has."""

from __future__ import annotations

import re

from adapter.http.observe import request_id


def test_new_ids_are_32_hex_digits_and_never_repeat() -> None:
    made = [request_id(None) for _ in range(10_000)]
    assert all(re.fullmatch(r"[0-9a-f]{32}", made_id) for made_id in made)
    assert len(set(made)) == len(made)


def test_a_sane_client_id_is_kept_and_an_unsafe_one_replaced() -> None:
    assert request_id("trace-42") == "trace-42"
    assert request_id("has space") != "has space"
