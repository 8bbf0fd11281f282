"""A mounted topic's key index on local disk (SQLite), so a restart resumes instead of rescanning.

One file per mount in `mount_index_dir`: every key's places (`KeyPlaces`), the index's counts,
and per partition the checkpoint, the offset below which every record is reflected in what the
file holds. `save` writes the keys changed since the last save, the counts and the checkpoint
in one SQLite transaction, all taken from the index at one moment on the event loop, so a
file is always a consistent state of the index: a restart loads it and reads each partition
from its checkpoint. Records at or past a checkpoint that a key's row already holds are added
again harmlessly (a key's positions are a set). The file is a cache of what Kafka holds: when
it is missing, unreadable, of another mount (`identity`), or ahead of the topic (the topic was
re-created), it is discarded and the topic read from its start.

One indexer uses a file at a time (SQLite's exclusive locking mode): a second indexer of the
same mount and folder (two instances sharing a folder) finds it locked and indexes without
persisting, because two writers' checkpoints and rows would not make one consistent state.
"""

from __future__ import annotations

import logging
import sqlite3
from array import array
from dataclasses import dataclass, field
from pathlib import Path

from adapter.log.key_index import Counts, KeyIndex, KeyPlaces

log = logging.getLogger(__name__)

SCHEMA = """
CREATE TABLE IF NOT EXISTS mount (id INTEGER PRIMARY KEY CHECK (id = 0), identity TEXT NOT NULL,
    records INTEGER, null_keys INTEGER, tombstones INTEGER, unaddressable INTEGER);
CREATE TABLE IF NOT EXISTS checkpoints (partition INTEGER PRIMARY KEY, next_offset INTEGER);
CREATE TABLE IF NOT EXISTS keys (stream_id TEXT PRIMARY KEY, first INTEGER, dense_from INTEGER,
    content_type TEXT, partitions TEXT, positions BLOB) WITHOUT ROWID;
"""


Row = tuple[str, int, int, str | None, str, bytes]


@dataclass
class Saved:
    """What one save writes: a consistent state of the index, taken on the event loop."""

    counts: Counts
    checkpoints: dict[int, int]
    rows: list[Row] = field(default_factory=list)


def begin(index: KeyIndex, checkpoints: dict[int, int]) -> tuple[Saved, list[str]]:
    """The counts and checkpoints as they are now, and the keys changed since the last call.

    Their rows may be taken later, in pieces (`rows`), while records go on being indexed: a
    row then holds records past the checkpoint too, which a restart reads again and adds
    again harmlessly, while the counts match the checkpoints exactly."""
    saved = Saved(Counts(**index.counts.as_dict()), dict(checkpoints))
    return saved, list(index.take_changed())


def rows(index: KeyIndex, stream_ids: list[str]) -> list[Row]:
    found = ((stream_id, index.places(stream_id)) for stream_id in stream_ids)
    return [_row(stream_id, places) for stream_id, places in found if places is not None]


def snapshot(index: KeyIndex, checkpoints: dict[int, int]) -> Saved:
    """The index's changes since the last snapshot, at once (it forgets them)."""
    saved, changed = begin(index, checkpoints)
    saved.rows = rows(index, changed)
    return saved


def _row(stream_id: str, places: KeyPlaces) -> Row:
    partitions = ",".join(str(p) for p in places.partitions)
    return (
        stream_id,
        places.first,
        places.dense_from,
        places.content_type,
        partitions,
        places.positions.tobytes(),
    )


class KeyIndexStore:
    def __init__(self, path: Path, identity: str) -> None:
        self.path = path
        self.identity = identity
        self._db: sqlite3.Connection | None = None

    def load(self, index: KeyIndex) -> dict[int, int] | None:
        """Fill the (empty) index from the file; the checkpoints, or None: start afresh."""
        try:
            return self._load(index)
        except (sqlite3.Error, OSError) as error:  # OSError: the folder cannot be made
            log.warning("mount index file %s not used: %s", self.path, error)
            self.close()
            return None

    def _load(self, index: KeyIndex) -> dict[int, int] | None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        db = self._db = sqlite3.connect(self.path, isolation_level=None, timeout=0)
        db.execute("PRAGMA locking_mode = EXCLUSIVE")  # locks once taken are kept until close
        db.execute("BEGIN EXCLUSIVE")  # so a second user of the file fails here
        db.execute("COMMIT")
        db.execute("PRAGMA synchronous = NORMAL")  # a lost last save costs a re-read, no more
        db.executescript(SCHEMA)
        found = db.execute(
            "SELECT identity, records, null_keys, tombstones, unaddressable FROM mount"
        )
        row = found.fetchone()
        if row is None or row[0] != self.identity:
            return None  # the caller discards it
        index.counts = Counts(*row[1:])
        query = "SELECT stream_id, first, dense_from, content_type, partitions, positions FROM keys"
        for stream_id, first, dense_from, content_type, partitions, raw in db.execute(query):
            positions = array("q")
            positions.frombytes(raw)
            shared = tuple(int(p) for p in partitions.split(","))
            index.restore(
                stream_id, KeyPlaces.restored(positions, first, dense_from, shared, content_type)
            )
        index.take_changed()
        return dict(db.execute("SELECT partition, next_offset FROM checkpoints").fetchall())

    def discard(self) -> None:
        """Forget what the file holds (another mount's, or ahead of the topic)."""
        try:
            self._discard()
        except sqlite3.Error as error:
            log.warning("mount index file %s: %s; not used", self.path, error)
            self.close()

    def _discard(self) -> None:
        if self._db is None:
            return
        with self._db:
            self._db.execute("BEGIN")
            for table in ("mount", "checkpoints", "keys"):
                self._db.execute(f"DELETE FROM {table}")
            self._db.execute("INSERT INTO mount VALUES (0, ?, 0, 0, 0, 0)", (self.identity,))

    def save(self, saved: Saved) -> None:
        """Write a snapshot; on a failure (disk full, ...) stop persisting: the index goes on."""
        try:
            self._save(saved)
        except sqlite3.Error as error:
            log.warning("mount index file %s: %s; no longer saved", self.path, error)
            self.close()

    def _save(self, saved: Saved) -> None:
        if self._db is None:
            return
        counts = saved.counts
        with self._db:
            self._db.execute("BEGIN")
            self._db.executemany(
                "INSERT OR REPLACE INTO keys VALUES (?, ?, ?, ?, ?, ?)", saved.rows
            )
            self._db.execute(
                "INSERT OR REPLACE INTO mount VALUES (0, ?, ?, ?, ?, ?)",
                (
                    self.identity,
                    counts.records,
                    counts.null_keys,
                    counts.tombstones,
                    counts.unaddressable,
                ),
            )
            self._db.executemany(
                "INSERT OR REPLACE INTO checkpoints VALUES (?, ?)", saved.checkpoints.items()
            )

    @property
    def persisting(self) -> bool:
        return self._db is not None

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None


def remove(path: Path) -> None:
    """An unmount forgets the mount's file (and SQLite's side files)."""
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
