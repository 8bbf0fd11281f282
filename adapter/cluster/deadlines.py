"""How long the owner of a slot may take to answer a write, term by term; forwarding waits longer.

T is `kafka_timeout_ms`, the deadline of each broker call. A write on the owner:

1. waits for the stream's earlier appends in flight to settle: at most 4T
   (`DecidedWrites.settle`);
2. waits in the slot's queue for the transaction in progress: at most one transaction;
3. is committed in a transaction of its own, which on the writer's thread takes at most
   8T: replacing a failed producer (the ownership question, T, then init_transactions, T),
   the data's flush (T), a missed offset guess (the abort, T, and the slow path's flush, T),
   and three commit attempts (3T);
4. if that commit got no answer, learns its outcome (`adapter/log/outcomes.py`): rounds of
   a new producer (2T) and the read_committed probe (T), 1 s apart, until known or until a
   budget of 3T + 1 s has passed (checked between rounds, so one more round, 3T, at most);
   then the answer is 504 `outcome_unknown`.

So the owner answers within 4T + 8T + 8T + 6T + 1 s = 26T + 1 s, provided the queue holds at
most one transaction's worth of batches (`adapter/log/batch_queue.py` bounds what it takes).
The forwarder waits that long plus a margin for the hop, so a slow owner is never cut off while
it can still answer, and the client then gets the owner's real answer.
"""

from __future__ import annotations

from adapter.log.writer import LEARNING_PAUSE_S, LEARNING_TIMEOUTS

SETTLE_TIMEOUTS = 4
TRANSACTION_TIMEOUTS = 8
FORWARD_MARGIN_S = 5.0


def owner_answer_s(kafka_timeout_s: float) -> float:
    """The owner's documented worst case for answering one write."""
    timeouts = SETTLE_TIMEOUTS + 2 * TRANSACTION_TIMEOUTS + 2 * LEARNING_TIMEOUTS
    return timeouts * kafka_timeout_s + LEARNING_PAUSE_S


def forward_timeout_s(kafka_timeout_s: float) -> float:
    """How long a forwarded write waits for the owner's answer."""
    return owner_answer_s(kafka_timeout_s) + FORWARD_MARGIN_S
