"""Format levels: the previous release's formats written until the newest is in force, what
the owners' group members say they read, and a level that only moves forward."""

from __future__ import annotations

import io
from dataclasses import replace
from pathlib import Path

import fastavro
import pytest

import schemas
from adapter.http.statuses import status_of
from adapter.protocol.errors import ErrorCode, ProtocolError
from adapter.protocol.model import BucketMeta, Segment, StreamMeta
from adapter.state.catalog import Catalog
from adapter.state.format_gate import (
    GATE,
    FormatGate,
    client_id,
    level_of_record,
    level_record,
    member_reads,
)
from adapter.state.records import decode, encode, refuse_before_newest
from adapter.state.store import FileStore
from topology.group_members import member_url
from topology.internal_records import (
    ALL_FIELDS_LEVEL,
    FORMAT_LEVEL_KEY,
    NEWEST_LEVEL,
    PREVIOUS_LEVEL,
    RecordKind,
    level_of,
)

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
    trimmed_to=12,
    trim_settled_to=11,
)
BUCKET = BucketMeta("b", "dk.b", 12, 1)
LEVEL_5 = 5  # StreamMeta 0x05, BucketMeta 0x01: what the releases before format levels read


def _as_the_previous_release_reads(schema: str, value: bytes) -> dict[str, object]:
    """The record as a release that knows `schema` as its newest decodes it."""
    parsed = fastavro.parse_schema(schemas.load(schema))
    record = fastavro.schemaless_reader(io.BytesIO(value[1:]), parsed, None)
    assert isinstance(record, dict)
    return record


def test_level_5_writes_what_the_releases_before_format_levels_read() -> None:
    value = encode(META, LEVEL_5)
    assert value[:1] == b"\x05"
    old = _as_the_previous_release_reads("stream_meta_v5", value)
    assert (old["trimmed_to"], old["next_offset"], old["inherited"]) == (
        12,
        20,
        [{"stream_id": "src", "start": 0, "end": 5}],
    )
    # Read back by this version, only the trim's settling points are gone.
    assert decode(META.key, value) == replace(META, trim_settled_to=None)
    bucket = encode(BUCKET, LEVEL_5)
    assert bucket[:1] == b"\x01"
    assert decode("bucket:b", bucket) == BUCKET


def test_the_previous_and_the_newest_level_write_the_newest_formats() -> None:
    # Level 7 changes what is written (a pure append, its data record alone), not a format.
    assert encode(META, PREVIOUS_LEVEL) == encode(META, NEWEST_LEVEL)
    assert encode(BUCKET, PREVIOUS_LEVEL) == encode(BUCKET, NEWEST_LEVEL)
    assert encode(META, NEWEST_LEVEL)[:1] == b"\x06"
    assert decode(META.key, encode(META, NEWEST_LEVEL)) == META
    assert encode(BUCKET, NEWEST_LEVEL)[:1] == b"\x02"


def test_what_the_previous_level_cannot_hold_is_refused_not_lost() -> None:
    fork = replace(META, source_bucket="other", forked_from="src")
    with pytest.raises(ProtocolError) as refused:
        encode(fork, LEVEL_5)
    assert refused.value.code is ErrorCode.FORMAT_NOT_FINALIZED
    assert "source_bucket" in refused.value.message
    with pytest.raises(ProtocolError, match="retention_max_age_ms"):
        encode(replace(BUCKET, retention_max_age_ms=60_000), LEVEL_5)
    assert decode("bucket:b", encode(replace(BUCKET, retention_max_age_ms=60_000))) == replace(
        BUCKET, retention_max_age_ms=60_000
    )


def test_each_format_byte_names_the_level_that_writes_it() -> None:
    assert level_of(RecordKind.STREAM_META, encode(META, LEVEL_5)) == LEVEL_5
    assert level_of(RecordKind.STREAM_META, b"\x02") == LEVEL_5
    assert level_of(RecordKind.STREAM_META, encode(META, NEWEST_LEVEL)) == ALL_FIELDS_LEVEL
    assert level_of(RecordKind.BUCKET_META, encode(BUCKET, NEWEST_LEVEL)) == ALL_FIELDS_LEVEL
    assert level_of(RecordKind.PRODUCER_STATE, b"\x01") == LEVEL_5


def test_members_say_what_they_read_in_their_client_id() -> None:
    said = client_id("http://10.0.0.7:8080")
    assert (member_url(said), member_reads(said)) == ("http://10.0.0.7:8080", NEWEST_LEVEL)
    # An instance that predates levels: its client.id is its URL alone.
    assert (member_url("http://old:8080"), member_reads("http://old:8080")) == (
        "http://old:8080",
        PREVIOUS_LEVEL,
    )
    assert level_of_record(level_record(NEWEST_LEVEL)) == NEWEST_LEVEL


def test_a_deployment_with_records_starts_at_the_level_its_log_shows() -> None:
    gate = FormatGate()
    gate.saw(RecordKind.STREAM_META, encode(META, LEVEL_5))
    assert gate.settle(fresh=False) == PREVIOUS_LEVEL  # the previous level at least
    gate = FormatGate()
    gate.saw(RecordKind.STREAM_META, encode(META, PREVIOUS_LEVEL))
    assert gate.settle(fresh=False) == PREVIOUS_LEVEL  # level 7 shows in no format byte
    gate = FormatGate()
    gate.saw_level(NEWEST_LEVEL)  # finalized
    assert gate.settle(fresh=False) == NEWEST_LEVEL


def test_a_fresh_deployment_starts_at_the_newest_level() -> None:
    assert FormatGate().settle(fresh=True) == NEWEST_LEVEL
    assert FormatGate().settle(fresh=False) == PREVIOUS_LEVEL  # an instance predating levels


def test_the_level_in_force_only_moves_forward() -> None:
    gate = FormatGate()
    gate.settle(fresh=False)
    gate.saw_level(NEWEST_LEVEL)  # `upgrade finalize`, followed
    assert gate.level == NEWEST_LEVEL
    gate.saw(RecordKind.STREAM_META, encode(META, PREVIOUS_LEVEL))  # written before it
    gate.saw_level(PREVIOUS_LEVEL)
    assert gate.level == NEWEST_LEVEL


def test_the_level_in_force_survives_a_catalog_file_and_the_file_alone_never_raises_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The records that showed a level may lie behind the checkpoint (not replayed at the next
    start), so the file keeps the level; the file's own records, always written at the newest
    level, are not taken for the log's."""
    monkeypatch.setattr(GATE, "known", 0)
    catalog = Catalog(FileStore(str(tmp_path), "catalog-x"))
    catalog.apply("bucket:b", encode(BUCKET, PREVIOUS_LEVEL))  # what the log holds
    catalog.save({"meta": 1}, {}, 1)
    catalog.store.close()
    monkeypatch.setattr(GATE, "known", 0)
    Catalog(FileStore(str(tmp_path), "catalog-x")).resume()
    assert GATE.known == PREVIOUS_LEVEL
    catalog = Catalog(FileStore(str(tmp_path), "catalog-x"))
    catalog.apply(FORMAT_LEVEL_KEY, level_record(NEWEST_LEVEL))  # `upgrade finalize`, followed
    catalog.save({"meta": 2}, {}, 2)
    catalog.store.close()
    monkeypatch.setattr(GATE, "known", 0)
    Catalog(FileStore(str(tmp_path), "catalog-x")).resume()
    assert GATE.known == NEWEST_LEVEL


def test_a_fork_across_buckets_is_refused_before_it_reaches_a_writer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(GATE, "level", LEVEL_5)
    with pytest.raises(ProtocolError) as refused:
        refuse_before_newest("a fork across buckets")
    assert refused.value.code is ErrorCode.FORMAT_NOT_FINALIZED
    assert status_of(refused.value.code) == 409
    monkeypatch.setattr(GATE, "level", PREVIOUS_LEVEL)
    refuse_before_newest("a fork across buckets")  # its formats in force: nothing to refuse
