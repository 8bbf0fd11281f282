"""`KeyIndexStore`: a saved key index loads back equal, only for its own mount, one user at a
time (SQLite files in the test's folder; no broker)."""

from __future__ import annotations

from pathlib import Path

from adapter.log.key_index import KeyIndex
from adapter.log.key_index_store import KeyIndexStore, remove, snapshot
from topology.mount_positions import position


def _index() -> KeyIndex:
    index = KeyIndex(4, track_changes=True)
    for n in range(10):
        index.add("many", position(n % 2, n), "text/plain")  # past 4 positions: a dropped range
    index.add("one", position(1, 3), None)
    index.counts.tombstones = 2
    return index


def _saved(path: Path, index: KeyIndex) -> None:
    store = KeyIndexStore(path, "m")
    assert store.load(KeyIndex(4)) is None  # a new file: start afresh
    store.discard()
    store.save(snapshot(index, {0: 9, 1: 10}))
    store.close()


def test_a_saved_index_loads_back_equal(tmp_path: Path) -> None:
    index, loaded = _index(), KeyIndex(4, track_changes=True)
    _saved(tmp_path / "m.sqlite", index)
    store = KeyIndexStore(tmp_path / "m.sqlite", "m")
    assert store.load(loaded) == {0: 9, 1: 10}
    assert loaded.counts == index.counts
    assert list(loaded.ids("", None)) == ["many", "one"]
    for stream_id in ("many", "one"):
        want, got = index.places(stream_id), loaded.places(stream_id)
        assert want is not None
        assert got is not None
        assert (got.positions, got.first, got.dense_from) == (
            want.positions,
            want.first,
            want.dense_from,
        )
        assert (got.partitions, got.content_type) == (want.partitions, want.content_type)
    assert loaded.take_changed() == set()  # loaded is not changed
    store.close()


def test_only_changed_keys_are_saved_again(tmp_path: Path) -> None:
    index = _index()
    index.take_changed()
    index.add("one", position(1, 20), None)
    assert [row[0] for row in snapshot(index, {}).rows] == ["one"]


def test_another_mounts_file_is_not_loaded(tmp_path: Path) -> None:
    _saved(tmp_path / "m.sqlite", _index())
    store = KeyIndexStore(tmp_path / "m.sqlite", "another topic")
    assert store.load(KeyIndex(4)) is None
    store.close()


def test_one_user_of_a_file_at_a_time(tmp_path: Path) -> None:
    first = KeyIndexStore(tmp_path / "m.sqlite", "m")
    assert first.load(KeyIndex(4)) is None
    assert first.persisting
    second = KeyIndexStore(tmp_path / "m.sqlite", "m")
    assert second.load(KeyIndex(4)) is None
    assert not second.persisting
    first.close()
    remove(tmp_path / "m.sqlite")
    assert list(tmp_path.iterdir()) == []


def test_a_folder_that_cannot_be_made_means_no_file(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_bytes(b"")
    store = KeyIndexStore(tmp_path / "a-file" / "m.sqlite", "m")
    assert store.load(KeyIndex(4)) is None
    assert not store.persisting
