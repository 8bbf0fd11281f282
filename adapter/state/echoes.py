"""Which followed state records are echoes of this instance's own commits.

The meta follower reads back every state record, this instance's own included. Its own were
applied when they committed, and applying them again, later, could undo what came after
(a tombstone replayed over a stream created again since). So each slot writer says where its
state records are, on its own thread, just before the transaction that holds them commits —
before the follower can see them — and the follower skips a record at or below the last offset
this instance wrote for its key. Anything above was written by someone else afterwards (a new
owner while this instance was a stopped zombie) and is news. An entry goes once its echo is
seen, so the table holds only echoes still on their way.
"""

from __future__ import annotations

import threading


class Echoes:
    def __init__(self) -> None:
        self._lock = threading.Lock()  # written by writer threads, read on the event loop
        self._mine: dict[tuple[str, str], int] = {}  # (topic, key) -> last offset written

    def wrote(self, records: list[tuple[str, str, int]]) -> None:
        """State records (topic, key, offset) this instance is about to commit."""
        with self._lock:
            for topic, key, offset in records:
                self._mine[(topic, key)] = max(offset, self._mine.get((topic, key), -1))

    def is_news(self, topic: str, key: str, offset: int) -> bool:
        """Whether a followed record is to be applied: not one of ours, nor older than ours."""
        with self._lock:
            mine = self._mine.get((topic, key))
            if mine is None or offset > mine:
                return True
            if offset == mine:
                del self._mine[(topic, key)]
            return False

    def __len__(self) -> int:
        return len(self._mine)
