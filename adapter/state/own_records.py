"""Which followed state records are echoes of this instance's own commits.

The meta follower reads back every state record, this instance's own included. Its own were
applied when they committed, and applying them again, later, could undo what came after
(a tombstone replayed over a stream created again since). So each slot writer says where its
state records are, on its own thread, just before the transaction that holds them commits —
before the follower can see them — and the follower skips a record at or below the last offset
this instance wrote for its key. Anything above was written by someone else afterwards (a new
owner while this instance was a stopped zombie) and is news. An entry goes once its echo is
seen, so the table holds only echoes still on their way.

Only an applied commit may hide its echo. A commit whose outcome the writer could not learn
(answered 503, the catalog left as it was) may still have happened: its state records are
then *settled unapplied*, and from that moment an echo of them is news like anyone else's. An
echo seen before that (while the commit's outcome was open) is held, and handed back when the
commit settles unapplied, unless a newer record of its key was applied meanwhile.
"""

from __future__ import annotations

import threading

Written = tuple[str, str, int]  # (topic, key, offset) of a state record
Late = tuple[str, str, bytes | None]  # (topic, key, value) to apply after all


class Echoes:
    def __init__(self) -> None:
        self._lock = threading.Lock()  # written by writer threads, read on the event loop
        self._mine: dict[tuple[str, str], int] = {}  # (topic, key) -> last offset written
        self._open: set[Written] = set()  # written; its commit not settled yet
        self._held: dict[tuple[str, str], tuple[int, bytes | None]] = {}  # seen while open

    def wrote(self, records: list[Written]) -> None:
        """State records (topic, key, offset) this instance is about to commit."""
        with self._lock:
            for topic, key, offset in records:
                self._mine[(topic, key)] = max(offset, self._mine.get((topic, key), -1))
                self._open.add((topic, key, offset))

    def settled(self, records: list[Written], applied: bool) -> list[Late]:
        """The commit that held these records was applied to the catalog, or not (its outcome
        unknown, or aborted): then its echoes are news, and those already seen come back."""
        late: list[Late] = []
        with self._lock:
            for topic, key, offset in records:
                self._open.discard((topic, key, offset))
                held = self._held.get((topic, key))
                if held is not None and held[0] == offset:
                    del self._held[(topic, key)]
                else:
                    held = None
                if applied:
                    continue
                if self._mine.get((topic, key)) == offset:
                    del self._mine[(topic, key)]
                if held is not None:
                    late.append((topic, key, held[1]))
        return late

    def is_news(self, topic: str, key: str, offset: int, value: bytes | None = None) -> bool:
        """Whether a followed record is to be applied: not one of ours, nor older than ours."""
        with self._lock:
            mine = self._mine.get((topic, key))
            if mine is None or offset > mine:
                self._held.pop((topic, key), None)  # superseded by what is applied now
                return True
            if offset == mine:
                del self._mine[(topic, key)]
            if (topic, key, offset) in self._open:
                self._held[(topic, key)] = (offset, value)
            return False

    def floor(self, topic: str) -> int | None:
        """The lowest offset of `topic` whose commit is still open: the catalog may not hold it
        even though the follower has passed it (a checkpoint stays below it)."""
        with self._lock:
            return min((o for t, _, o in self._open if t == topic), default=None)

    def __len__(self) -> int:
        return len(self._mine)
