"""The streams whose state in the catalog is ahead of their last state record: what a write
slot's owner must checkpoint although no commit of its own noted them.

The catalog's state of a stream moves past what the meta and producers topics show in three
ways: a read here learns its tail from its data records while another instance writes it
(`state/data_tails.py`), a new owner of its slot carries it forward over its records
(`state/slot_takeover.py`), and, from format level 7, a pure append commits its data record
alone (`service/decided_writes.py`). Only the last two note it for the slot's checkpoint, and
a note is lost with a hand-over that could not write it; a stream learned here moves none.
When this instance takes the stream's slot later, its catalog holds the tail already, so the
takeover's scan finds nothing new: without this set the stream's metadata would keep the old
tail (and every other instance scan its partition from there on each read) until its records
are tiered.

A stream leaves the set once the follower applies a meta record of it at or past its state
here (anyone's, or the echo of one this instance committed: its checkpoint), or when it is
forgotten (deleted). Only the follower says what is recorded: learning from the data log, a
takeover's scan and a pure append only ever add to the set. Owners checkpoint every interval,
so the set holds the streams that moved since about then, never more than the catalog's
streams. It is saved with the catalog's file (`state/store.py`, `Checkpoint.unrecorded`), so a
restart keeps it with the rows it explains; a row written past the checkpoint saved (a crash
before the next) counts as ahead at the restart (`Store.ahead`), until the meta topic's records
replayed show it recorded. A new owner trusts this set: what no note of its checkpoints and no
entry here names, it takes for recorded, and lets the slot's covered offsets pass
(`state/covered_offsets.py`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from adapter.protocol.model import StreamMeta

StreamKey = tuple[str, str]


class Unrecorded:
    def __init__(self, keys: Iterable[StreamKey] = ()) -> None:
        self._keys: set[StreamKey] = set(keys)

    def moved(self, key: StreamKey) -> None:
        """The stream's state here moved past what its last state record shows."""
        self._keys.add(key)

    def recorded(self, record: StreamMeta, held: StreamMeta | None) -> None:
        """A state record of the stream (`record`) is in the meta topic: the stream is recorded
        unless its state here (`held`) is further on."""
        if held is None or not short_of(record, held):
            self._keys.discard((record.bucket_id, record.stream_id))

    def forget(self, key: StreamKey) -> None:
        """The stream is gone: nothing of it to record."""
        self._keys.discard(key)

    def __contains__(self, key: object) -> bool:
        return key in self._keys

    def __iter__(self) -> Iterator[StreamKey]:
        return iter(sorted(self._keys))

    def __len__(self) -> int:
        return len(self._keys)


def short_of(meta: StreamMeta, further: StreamMeta) -> bool:
    """Whether `meta` is a state of the same incarnation as `further` short of its tail (or of
    its closure)."""
    return meta.created_at_ms == further.created_at_ms and (meta.next_offset, meta.closed) < (
        further.next_offset,
        further.closed,
    )
