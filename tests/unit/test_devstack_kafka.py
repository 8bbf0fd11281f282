"""The local broker's pure helpers: cluster ids the storage tool accepts."""

from __future__ import annotations

import re

from devstack.kafka import new_cluster_id


def test_cluster_ids_are_22_url_safe_characters_never_an_option() -> None:
    ids = {new_cluster_id() for _ in range(2_000)}
    assert len(ids) == 2_000
    for cluster_id in ids:
        assert re.fullmatch(r"[A-Za-z0-9_-]{22}", cluster_id)
        assert not cluster_id.startswith("-")
