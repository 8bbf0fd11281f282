"""The effect an owner names on its answer to a forwarded write is the change it made."""

from __future__ import annotations

import pytest

from adapter.cluster import effects
from adapter.cluster.coordinator import (
    BucketChanged,
    Change,
    SnapshotPublished,
    TailMoved,
    Trimmed,
)
from adapter.protocol.commands import StreamRef

REF = StreamRef("b", "s")


@pytest.mark.parametrize(
    "change",
    [
        TailMoved(REF, 42),
        TailMoved(REF, None),
        SnapshotPublished(REF, 7),
        Trimmed(REF, 9),
        BucketChanged("b", True, '"b@1"'),
        BucketChanged("b", True),
        BucketChanged("b", False),
    ],
)
def test_each_change_reads_back_as_itself(change: Change) -> None:
    assert effects.decode(effects.encode(change), REF, "b") == change


@pytest.mark.parametrize(
    "value",
    ["", "nonsense", "[1]", '{"tail": "42"}', '{"tail": true}', '{"bucket": 1}', '{"new": 1}'],
)
def test_an_effect_this_instance_does_not_know_waits_for_nothing(value: str) -> None:
    assert effects.decode(value, REF, "b") is None


def test_a_stream_effect_on_a_bucket_route_waits_for_nothing() -> None:
    assert effects.decode('{"tail": 1}', None, "b") is None
    assert effects.decode('{"bucket": false}', REF, None) is None
