"""Where a mounted topic's record is, as one integer: the read position behind its token.

A position is `partition * 10**16 + offset`, so its offset token (`topology.wire`) reads
`PPPPPPPPPPPPPPPP_OOOOOOOOOOOOOOOO`, partition then Kafka offset: the tokens of one key sort in
(partition, offset) order and mean the same across restarts, instances and retention. Kafka
offsets stay below 10**16 for centuries at any real rate.
"""

from __future__ import annotations

from typing import Final

PARTITION_SPAN: Final = 10**16


def position(partition: int, offset: int) -> int:
    return partition * PARTITION_SPAN + offset


def split(at: int) -> tuple[int, int]:
    """(partition, Kafka offset) of a read position."""
    return divmod(at, PARTITION_SPAN)
