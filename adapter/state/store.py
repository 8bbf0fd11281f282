"""The catalog's bounded memory: hot rows in LRUs, every row in a SQLite index.

The catalog holds streams, producer states and snapshot pointers for as many streams as the
log names, which a process cannot keep in memory at a million streams. So each of the three
lives in a table of an embedded SQLite database, and only the most recently used rows stay in
memory (`Lru`, bounded by entries). The catalog's LRUs are write-back: a changed row stays
in memory, dirty, and is handed to the store when evicted, unless the change is one SQLite
indexes (see `Catalog.put_stream`), which is handed over at once. Rows handed over wait in a
buffer of pending rows, written to SQLite in one transaction when it fills and before any
query that needs order (listing a bucket, the forks of a stream, soft-deleted streams). A
lookup that misses the LRU reads the buffer, then SQLite (one indexed read on the event loop,
tens of µs: cheaper than a hop to a thread, and bounded).

The database is an index, never a source of truth: a file in `catalog_dir` that a checkpoint
(`Checkpoint`: the state topics' positions it has applied up to, and who those topics are)
makes resumable. The checkpoint is written in the same SQLite transaction as every row it
covers, so a restart replays the log only past it (`adapter/state/follower.py` decides whether
it still may); a missing, stale, corrupt or foreign file is rebuilt from the log
(`Store.reset`), so the catalog stays a function of the log. One process holds a file at a time
(an exclusive `flock` on its `.lock` sibling; a second process on the same folder takes the next
number). Rows written between two checkpoints (a full buffer) are listed in the `ahead` table
until the next: a restart takes those streams for ahead of their state records
(`state/unrecorded.py`), as the checkpoint cannot say which are. It is written in WAL mode with
`synchronous=NORMAL`: a crash (of the process) mid-write loses at most the transactions not yet
committed, never the file's consistency.
"""

from __future__ import annotations

import contextlib
import enum
import fcntl
import json
import marshal
import os
import re
import sqlite3
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Generic, TypeVar

from adapter.protocol.model import ProducerRecord, Segment, SnapshotPointer, StreamMeta

K = TypeVar("K")
V = TypeVar("V")
StreamKey = tuple[str, str]
ProducerKey = tuple[str, str, str]
Expiring = tuple[int, str, str]  # (deadline, bucket, stream)

DEFAULT_CACHE_ENTRIES = 4096
FLUSH_ROWS = 2048  # pending rows written to SQLite in one transaction
PAGE = 512  # ids read per query when listing
MAX_FILES = 256  # processes sharing one catalog folder
SCHEMA_VERSION = 4  # a file of another version is rebuilt

_SCHEMA = """
CREATE TABLE IF NOT EXISTS streams (
    bucket TEXT NOT NULL, stream TEXT NOT NULL, source_bucket TEXT, forked_from TEXT,
    home TEXT, soft_deleted INTEGER NOT NULL, deadline INTEGER, value BLOB NOT NULL,
    PRIMARY KEY (bucket, stream)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS streams_deadlines ON streams (deadline) WHERE deadline IS NOT NULL;
CREATE INDEX IF NOT EXISTS streams_forks ON streams (source_bucket, forked_from)
    WHERE forked_from IS NOT NULL;
CREATE INDEX IF NOT EXISTS streams_housed ON streams (home) WHERE home IS NOT NULL;
CREATE INDEX IF NOT EXISTS streams_soft_deleted ON streams (soft_deleted) WHERE soft_deleted;
CREATE TABLE IF NOT EXISTS producers (
    bucket TEXT NOT NULL, stream TEXT NOT NULL, producer TEXT NOT NULL, value BLOB NOT NULL,
    PRIMARY KEY (bucket, stream, producer)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS snapshots (
    bucket TEXT NOT NULL, stream TEXT NOT NULL, value BLOB NOT NULL,
    PRIMARY KEY (bucket, stream)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS others (key TEXT PRIMARY KEY, value BLOB NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS checkpoint (id INTEGER PRIMARY KEY CHECK (id = 0), value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS ahead (
    bucket TEXT NOT NULL, stream TEXT NOT NULL, PRIMARY KEY (bucket, stream)
) WITHOUT ROWID;
"""


@dataclass(frozen=True)
class Checkpoint:
    """What the rows of a file reflect: every record of each resumable state topic below its
    position (and maybe some after: replaying those again changes nothing), read from topics
    that `identity` names (cluster id, topic ids), at `written_ms` (wall clock); `unrecorded`:
    the streams whose rows are ahead of their last state record (`state/unrecorded.py`; a
    file written before it was kept has none, and a version before it ignores it)."""

    positions: dict[str, int]
    identity: dict[str, str]
    written_ms: int
    unrecorded: tuple[StreamKey, ...] = ()

    def dumps(self) -> str:
        document = {"version": SCHEMA_VERSION, "rows": _row_layout(), "positions": self.positions}
        written = {"identity": self.identity, "written_ms": self.written_ms}
        return json.dumps(document | written | {"unrecorded": self.unrecorded})

    @staticmethod
    def loads(text: str) -> Checkpoint | None:
        """The checkpoint, or None for a file of another version or whose rows hold other
        fields (a record that gained a field: its rows are positional, so they are rebuilt)."""
        document = json.loads(text)
        if not isinstance(document, dict) or document.get("version") != SCHEMA_VERSION:
            return None
        if document.get("rows") != _row_layout():
            return None
        positions, identity = document["positions"], document["identity"]
        return Checkpoint(
            {str(t): int(p) for t, p in positions.items()},
            {str(k): str(v) for k, v in identity.items()},
            int(document["written_ms"]),
            tuple((str(b), str(s)) for b, s in document.get("unrecorded", ())),
        )


class Miss(enum.Enum):
    MISS = "miss"


MISS = Miss.MISS


class Lru(Generic[K, V]):
    """At most `capacity` entries and, with a `sizer`, at most `max_bytes` of their estimated
    sizes (one entry stays whatever its size); a lookup makes an entry the most recent. An
    entry put `dirty` (changed since it was last handed to the store) is handed to
    `write_back` when it is evicted."""

    def __init__(
        self,
        capacity: int,
        write_back: Callable[[K, V], None] | None = None,
        max_bytes: int = 0,
        sizer: Callable[[V], int] | None = None,
    ) -> None:
        self.capacity = max(1, capacity)
        self._entries: OrderedDict[K, V] = OrderedDict()
        self._dirty: set[K] = set()
        self._write_back = write_back
        self.max_bytes = max_bytes
        self._sizer = sizer if max_bytes > 0 else None  # None: counted by entries only
        self._sizes: dict[K, int] = {}
        self.bytes = 0  # estimated, of the entries held (0 without a sizer)

    def find(self, key: K) -> V | Miss:
        """The entry of `key` (made the most recent), or MISS."""
        value = self._entries.get(key, MISS)
        if value is not MISS:
            self._entries.move_to_end(key)
        return value

    def put(self, key: K, value: V, dirty: bool = False) -> None:
        self._entries[key] = value
        self._entries.move_to_end(key)
        if dirty:
            self._dirty.add(key)
        else:
            self._dirty.discard(key)
        if self._sizer is not None:
            self.resize(key)
        if len(self._entries) > self.capacity:
            self.evict_oldest()

    def resize(self, key: K) -> None:
        """Estimate the entry of `key` again (changed in place), evicting past `max_bytes`."""
        if self._sizer is None or key not in self._entries:
            return
        size = self._sizer(self._entries[key])
        self.bytes += size - self._sizes.get(key, 0)
        self._sizes[key] = size
        while self.bytes > self.max_bytes and len(self._entries) > 1:
            self.evict_oldest()

    def peek(self, key: K) -> V | Miss:
        """The entry of `key`, or MISS, leaving the order as it is."""
        return self._entries.get(key, MISS)

    def mark_dirty(self, key: K) -> None:
        """The entry of `key` (cached) was changed in place."""
        self._dirty.add(key)

    def write_dirty(self) -> None:
        """Hand every dirty entry to `write_back`, keeping it, clean."""
        self.write_some(list(self._dirty))

    def dirty_keys(self) -> list[K]:
        return list(self._dirty)

    def write_some(self, keys: list[K]) -> None:
        """Hand those of `keys` still dirty (and cached) to `write_back`, keeping them, clean."""
        for key in keys:
            if key in self._dirty:
                self._dirty.discard(key)
                if self._write_back is not None:
                    self._write_back(key, self._entries[key])

    def evict_oldest(self) -> None:
        key, value = self._entries.popitem(last=False)
        self.bytes -= self._sizes.pop(key, 0)
        if key in self._dirty:
            self._dirty.discard(key)
            if self._write_back is not None:
                self._write_back(key, value)

    def __len__(self) -> int:
        return len(self._entries)


class Store:
    """Streams, producer states and snapshot pointers: pending rows over a SQLite index."""

    def __init__(self, path: str = ":memory:") -> None:
        self.path = path
        self._db: sqlite3.Connection | None = None  # opened on first use: building does no I/O
        self._closed = False
        self._streams: dict[StreamKey, StreamMeta | None] = {}  # pending; None: deleted
        self._producers: dict[StreamKey, dict[str, ProducerRecord | None]] = {}
        self._snapshots: dict[StreamKey, SnapshotPointer | None] = {}
        self._dropped: set[StreamKey] = set()  # pending: every producer state forgotten
        self._pending = 0

    @property
    def db(self) -> sqlite3.Connection:
        if self._db is None:
            if self._closed:  # a replay still running on its thread as the app stops
                raise sqlite3.ProgrammingError("the catalog store is closed")
            path = self._open()
            try:
                self._db = _connect(path)
            except sqlite3.DatabaseError:  # not a database (a crash on an older version): anew
                self._discard(path)
                self._db = _connect(path)
        return self._db

    def _open(self) -> str:
        """The path to connect to."""
        return self.path

    def _discard(self, path: str) -> None:
        """Forget whatever `path` holds."""

    def reset(self) -> None:
        """Empty the index (pending rows, tables, checkpoint): a rebuild starts from nothing."""
        self._streams, self._producers, self._snapshots = {}, {}, {}
        self._dropped, self._pending = set(), 0
        if self._db is not None:
            self._db.close()
            self._db = None
        self._discard(self._open())
        self.db  # noqa: B018 -- created anew

    # -- the checkpoint --------------------------------------------------------------------

    def checkpoint(self) -> Checkpoint | None:
        """The file's checkpoint, or None (none, another version, unreadable)."""
        try:
            row = self.db.execute("SELECT value FROM checkpoint WHERE id = 0").fetchone()
            return None if row is None else Checkpoint.loads(row[0])
        except (sqlite3.DatabaseError, ValueError, KeyError, TypeError, AttributeError):
            return None

    def ahead(self) -> list[StreamKey]:
        """The streams whose rows (or producer states) were written since the checkpoint: past
        it, each may be ahead of its last state record without the checkpoint's `unrecorded`
        saying so (a crash before the next checkpoint keeps them)."""
        return [(str(b), str(s)) for b, s in self.db.execute("SELECT bucket, stream FROM ahead")]

    def others(self) -> list[tuple[str, bytes]]:
        """The checkpoint's meta records other than streams (buckets, mounts), as logged."""
        rows = self.db.execute("SELECT key, value FROM others ORDER BY key").fetchall()
        return [(str(key), bytes(value)) for key, value in rows]

    def counts(self) -> dict[str, int]:
        """How many streams each bucket has in the index."""
        self.flush()
        rows = self.db.execute("SELECT bucket, count(*) FROM streams GROUP BY bucket")
        return {str(bucket): int(count) for bucket, count in rows.fetchall()}

    def save(self, checkpoint: Checkpoint, others: list[tuple[str, bytes]]) -> None:
        """Write the pending rows, `others` and the checkpoint in one transaction."""
        self._flush(checkpoint, others)

    def rows(self) -> int:
        """Stream rows in the index (written ones: pending rows flushed first)."""
        self.flush()
        return int(self.db.execute("SELECT count(*) FROM streams").fetchone()[0])

    # -- streams ---------------------------------------------------------------------------

    def stream(self, key: StreamKey) -> StreamMeta | None:
        if key in self._streams:
            return self._streams[key]
        row = self.db.execute(
            "SELECT value FROM streams WHERE bucket = ? AND stream = ?", key
        ).fetchone()
        return None if row is None else _unpack(StreamMeta, row[0])

    def put_stream(self, key: StreamKey, meta: StreamMeta | None) -> None:
        self._streams[key] = meta
        self._wrote()

    def stream_ids(self, bucket_id: str, start: str, inclusive: bool) -> Iterator[str]:
        """Ids of the bucket's streams in byte order from `start`, a page at a time."""
        for stream_id, _value in self._pages("stream, NULL", bucket_id, start, inclusive):
            yield stream_id

    def stream_rows(self, bucket_id: str) -> Iterator[tuple[str, StreamMeta]]:
        """Every stream of the bucket with the state its row holds, in byte order, read a page
        at a time: a scan of the whole bucket holds one page, never every id."""
        for stream_id, value in self._pages("stream, value", bucket_id, "", inclusive=True):
            yield stream_id, _unpack(StreamMeta, value)

    def _pages(
        self, columns: str, bucket_id: str, start: str, inclusive: bool
    ) -> Iterator[tuple[str, Any]]:
        """(id, `columns`' second) of the bucket's rows from `start` on, `PAGE` per query
        (pending rows written first; no cursor stays open between two pages)."""
        op = ">=" if inclusive else ">"
        while True:
            self.flush()
            rows = self.db.execute(
                f"SELECT {columns} FROM streams WHERE bucket = ? AND stream {op} ? "
                "ORDER BY stream LIMIT ?",
                (bucket_id, start, PAGE),
            ).fetchall()
            yield from rows
            if len(rows) < PAGE:
                return
            start, op = rows[-1][0], ">"

    def stream_count(self, bucket_id: str) -> int:
        self.flush()
        row = self.db.execute("SELECT count(*) FROM streams WHERE bucket = ?", (bucket_id,))
        return int(row.fetchone()[0])

    def fork_keys(self, key: StreamKey) -> list[StreamKey]:
        """The streams forked from `key`, of any bucket, in (bucket, id) byte order."""
        self.flush()
        rows = self.db.execute(
            "SELECT bucket, stream FROM streams WHERE source_bucket = ? AND forked_from = ? "
            "ORDER BY bucket, stream",
            key,
        )
        return [(bucket_id, stream_id) for bucket_id, stream_id in rows.fetchall()]

    def housed_keys(self, bucket_id: str) -> list[StreamKey]:
        """The streams of other buckets whose records the bucket's topic holds."""
        self.flush()
        rows = self.db.execute(
            "SELECT bucket, stream FROM streams WHERE home = ? ORDER BY bucket, stream",
            (bucket_id,),
        )
        return [(bucket_id, stream_id) for bucket_id, stream_id in rows.fetchall()]

    def soft_deleted(self) -> list[StreamKey]:
        self.flush()
        rows = self.db.execute(
            "SELECT bucket, stream FROM streams WHERE soft_deleted ORDER BY bucket, stream"
        )
        return [(bucket_id, stream_id) for bucket_id, stream_id in rows.fetchall()]

    def expiring(self, before_ms: int, limit: int, after: Expiring | None) -> list[Expiring]:
        """Up to `limit` (deadline, bucket, stream) of streams not soft-deleted whose recorded
        deadline is before `before_ms`, in that order, past `after` (a sliding TTL's row may
        be older than the stream's state: check it)."""
        self.flush()
        rows = self.db.execute(
            "SELECT deadline, bucket, stream FROM streams WHERE deadline < ? "
            "AND (deadline, bucket, stream) > (?, ?, ?) ORDER BY deadline, bucket, stream LIMIT ?",
            (before_ms, *(after or (-(2**63), "", "")), limit),
        )
        return [(int(d), str(b), str(s)) for d, b, s in rows.fetchall()]

    # -- producer states -------------------------------------------------------------------

    def producers(self, key: StreamKey) -> dict[str, ProducerRecord]:
        rows = (
            []
            if key in self._dropped
            else self.db.execute(
                "SELECT producer, value FROM producers WHERE bucket = ? AND stream = ?", key
            ).fetchall()
        )
        states = {p: _unpack(ProducerRecord, v) for p, v in rows}
        for producer_id, record in self._producers.get(key, {}).items():
            if record is None:
                states.pop(producer_id, None)
            else:
                states[producer_id] = record
        return states

    def put_producer(self, key: StreamKey, producer_id: str, record: ProducerRecord | None) -> None:
        self._producers.setdefault(key, {})[producer_id] = record
        self._wrote()

    def drop_producers(self, key: StreamKey) -> None:
        """Forget every producer state of a stream."""
        self._producers.pop(key, None)
        self._dropped.add(key)
        self._wrote()

    # -- snapshot pointers -----------------------------------------------------------------

    def snapshot(self, key: StreamKey) -> SnapshotPointer | None:
        if key in self._snapshots:
            return self._snapshots[key]
        row = self.db.execute(
            "SELECT value FROM snapshots WHERE bucket = ? AND stream = ?", key
        ).fetchone()
        return None if row is None else _unpack(SnapshotPointer, row[0])

    def put_snapshot(self, key: StreamKey, pointer: SnapshotPointer | None) -> None:
        self._snapshots[key] = pointer
        self._wrote()

    def snapshots(self) -> Iterator[SnapshotPointer]:
        """Every snapshot pointer, read `PAGE` at a time (a scan holds one page, not all)."""
        after: StreamKey = ("", "")
        op = ">="
        while True:
            self.flush()
            rows = self.db.execute(
                f"SELECT bucket, stream, value FROM snapshots WHERE (bucket, stream) {op} (?, ?) "
                "ORDER BY bucket, stream LIMIT ?",
                (*after, PAGE),
            ).fetchall()
            for _bucket, _stream, value in rows:
                yield _unpack(SnapshotPointer, value)
            if len(rows) < PAGE:
                return
            after, op = (rows[-1][0], rows[-1][1]), ">"

    # -- writing ---------------------------------------------------------------------------

    def _wrote(self) -> None:
        self._pending += 1
        if self._pending >= FLUSH_ROWS:
            self.flush()

    def flush(self) -> None:
        """Write the pending rows to SQLite in one transaction."""
        if self._pending:
            self._flush(None, [])

    def _flush(self, checkpoint: Checkpoint | None, others: list[tuple[str, bytes]]) -> None:
        streams, producers, snapshots = self._streams, self._producers, self._snapshots
        dropped, self._dropped = self._dropped, set()
        self._streams, self._producers, self._snapshots = {}, {}, {}
        self._pending = 0
        with self.db:
            self.db.execute("BEGIN")
            self._flush_streams(streams)
            self.db.executemany("DELETE FROM producers WHERE bucket = ? AND stream = ?", dropped)
            self._flush_producers(producers)
            self._flush_snapshots(snapshots)
            if checkpoint is None:
                written = {key for key, meta in streams.items() if meta is not None}
                written.update(producers)
                self.db.executemany("INSERT OR IGNORE INTO ahead VALUES (?, ?)", sorted(written))
            else:
                self.db.execute("DELETE FROM ahead")
                self.db.execute("DELETE FROM others")
                self.db.executemany("INSERT INTO others VALUES (?, ?)", others)
                self.db.execute(
                    "INSERT OR REPLACE INTO checkpoint VALUES (0, ?)", (checkpoint.dumps(),)
                )

    def _flush_streams(self, streams: dict[StreamKey, StreamMeta | None]) -> None:
        self.db.executemany(
            "DELETE FROM streams WHERE bucket = ? AND stream = ?",
            [key for key, meta in streams.items() if meta is None],
        )
        self.db.executemany(
            "INSERT OR REPLACE INTO streams VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [_row(key, meta) for key, meta in streams.items() if meta is not None],
        )

    def _flush_producers(
        self, producers: dict[StreamKey, dict[str, ProducerRecord | None]]
    ) -> None:
        rows = [(*key, p, r) for key, states in producers.items() for p, r in states.items()]
        self.db.executemany(
            "DELETE FROM producers WHERE bucket = ? AND stream = ? AND producer = ?",
            [(b, s, p) for b, s, p, r in rows if r is None],
        )
        self.db.executemany(
            "INSERT OR REPLACE INTO producers VALUES (?, ?, ?, ?)",
            [(b, s, p, _pack(r)) for b, s, p, r in rows if r is not None],
        )

    def _flush_snapshots(self, snapshots: dict[StreamKey, SnapshotPointer | None]) -> None:
        self.db.executemany(
            "DELETE FROM snapshots WHERE bucket = ? AND stream = ?",
            [key for key, pointer in snapshots.items() if pointer is None],
        )
        self.db.executemany(
            "INSERT OR REPLACE INTO snapshots VALUES (?, ?, ?)",
            [(*key, _pack(p)) for key, p in snapshots.items() if p is not None],
        )

    def close(self) -> None:
        self._closed = True
        if self._db is not None:
            self._db.close()
            self._db = None


class FileStore(Store):
    """A store in a file of `folder`, kept from one start to the next (see the module)."""

    def __init__(self, folder: str, name: str) -> None:
        super().__init__(folder)
        self.name = name
        self.file: Path | None = None  # once opened
        self._lock: _LockFile | None = None

    def _open(self) -> str:
        if self.file is None:
            directory = Path(self.path)
            directory.mkdir(parents=True, exist_ok=True)
            self._lock = _first_free(directory, self.name)
            self.file = Path(self._lock.name).with_suffix(".sqlite3")
        return str(self.file)

    def _discard(self, path: str) -> None:
        _remove(Path(path))

    def close(self) -> None:
        super().close()
        if self._lock is not None:
            self._lock.close()  # releases the flock
            self._lock = None


def _row(key: StreamKey, meta: StreamMeta) -> tuple[object, ...]:
    source = meta.source
    source_bucket = None if source is None else source[0]
    lineage = (source_bucket, meta.forked_from, meta.home)
    return (*key, *lineage, int(meta.soft_deleted), _deadline(meta), _pack(meta))


# Estimated bytes of a cached entry (Python objects, measured with tracemalloc on CPython
# 3.11: bench/results/recorded/, "The catalog's memory"), with its LRU slot and key.
def stream_bytes(meta: StreamMeta | None) -> int:
    if meta is None:
        return 200
    size = 580 + len(meta.bucket_id) + len(meta.stream_id) + 170 * len(meta.inherited)
    return size + (60 + len(meta.forked_from) if meta.forked_from is not None else 0)


def producers_bytes(states: dict[str, ProducerRecord]) -> int:
    return 270 + sum(365 + len(producer_id) for producer_id in states)


def snapshot_bytes(pointer: SnapshotPointer | None) -> int:
    return 200 if pointer is None else 700 + len(pointer.object_key)


def _deadline(meta: StreamMeta) -> int | None:
    """What the index orders expired streams by (none for a soft-deleted one: the soft-delete
    sweep decides those)."""
    return None if meta.soft_deleted else meta.deadline_ms()


def _connect(path: str) -> sqlite3.Connection:
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        db.executescript(
            "PRAGMA locking_mode = EXCLUSIVE; PRAGMA journal_mode = WAL;"
            "PRAGMA synchronous = NORMAL; PRAGMA cache_size = -2048; PRAGMA temp_store = FILE;"
            + _SCHEMA
        )
    except sqlite3.DatabaseError:
        db.close()
        raise
    return db


R = TypeVar("R", StreamMeta, ProducerRecord, SnapshotPointer)
_FIELDS = {kind: tuple(f.name for f in fields(kind)) for kind in R.__constraints__}


def _row_layout() -> dict[str, list[str]]:
    """The fields each kind of row holds, in order: a checkpoint names them."""
    return {kind.__name__: list(names) for kind, names in _FIELDS.items()}


def _pack(record: StreamMeta | ProducerRecord | SnapshotPointer) -> bytes:
    """A row's value: its fields' values, marshalled (5 times faster than the Avro of the
    topics, and only ever read back by the process that wrote it)."""
    values = record.__dict__
    if isinstance(record, StreamMeta):
        values = values | {"inherited": tuple(map(tuple, record.inherited))}
    return marshal.dumps(tuple(values[name] for name in _FIELDS[type(record)]))


def _unpack(kind: type[R], value: bytes) -> R:
    values: dict[str, Any] = dict(zip(_FIELDS[kind], marshal.loads(value), strict=True))
    if kind is StreamMeta:
        values["inherited"] = tuple(Segment(*segment) for segment in values["inherited"])
    record = object.__new__(kind)  # as `StreamMeta.evolve`: the values are checked already
    record.__dict__.update(values)
    return record


def catalog_file_name(topic_prefix: str) -> str:
    """The base name of a catalog file: the topic prefix, made safe for a file name."""
    return "catalog-" + re.sub(r"[^A-Za-z0-9._-]", "_", topic_prefix).strip(".")


def _first_free(directory: Path, name: str) -> _LockFile:
    for number in range(MAX_FILES):
        lock = _LockFile(directory / f"{name}.{number}.lock")
        if lock.acquire():
            return lock
    raise OSError(f"{MAX_FILES} processes hold catalog files in {directory}")


class _LockFile:
    def __init__(self, path: Path) -> None:
        self.name = str(path)
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)

    def acquire(self) -> bool:
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._fd)
            return False
        return True

    def close(self) -> None:
        os.close(self._fd)


def _remove(path: Path) -> None:
    names = (path.name, path.name + "-journal", path.name + "-wal", path.name + "-shm")
    for each in (path.with_name(name) for name in names):
        with contextlib.suppress(FileNotFoundError):
            each.unlink()
