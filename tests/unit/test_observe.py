"""Request ids: the client's when sane, else a new one that no other request of the process has."""

from __future__ import annotations

import re

from adapter.http.observe import _TRACEPARENT, request_id


def test_new_ids_are_32_hex_digits_and_never_repeat() -> None:
    made = [request_id(None) for _ in range(10_000)]
    assert all(re.fullmatch(r"[0-9a-f]{32}", made_id) for made_id in made)
    assert len(set(made)) == len(made)


def test_a_sane_client_id_is_kept_and_an_unsafe_one_replaced() -> None:
    assert request_id("trace-42") == "trace-42"
    assert request_id("has space") != "has space"


def test_only_a_valid_w3c_traceparent_is_logged() -> None:
    valid = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    assert _TRACEPARENT.fullmatch(valid)
    for invalid in (
        "ff" + valid[2:],  # the version W3C reserves as invalid
        f"00-{'0' * 32}-00f067aa0ba902b7-01",  # no trace
        f"00-4bf92f3577b34da6a3ce929d0e0e4736-{'0' * 16}-01",  # no parent
        valid.upper(),
    ):
        assert not _TRACEPARENT.fullmatch(invalid), invalid
