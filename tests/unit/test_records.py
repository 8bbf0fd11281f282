"""StreamMeta's copies with changes."""

from __future__ import annotations

from dataclasses import replace

import pytest

from adapter.protocol.model import Segment, StreamMeta

META = StreamMeta(
    bucket_id="b",
    stream_id="s",
    partition=3,
    content_type="text/plain",
    created_at_ms=1,
    start_offset=10,
    next_offset=20,
    last_access_ms=2,
    last_write_at_ms=3,
    inherited=(Segment("src", 0, 5),),
)


def test_evolve_is_replace() -> None:
    changed = META.evolve(next_offset=30, closed=True, last_seq="7")
    assert changed == replace(META, next_offset=30, closed=True, last_seq="7")
    assert (META.next_offset, META.closed) == (20, False)  # the original is untouched
    assert hash(changed) == hash(replace(META, next_offset=30, closed=True, last_seq="7"))


def test_evolve_refuses_a_field_that_does_not_exist() -> None:
    with pytest.raises(TypeError, match="next_ofset"):
        META.evolve(next_ofset=30)


def test_an_evolved_copy_stays_frozen() -> None:
    with pytest.raises(AttributeError):
        META.evolve(closed=True).closed = False  # type: ignore[misc]
