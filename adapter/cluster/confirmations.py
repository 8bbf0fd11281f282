"""Ownership questions from writer threads, sent in one commit and answered one by one.

A writer that must replace its producer first asks whether this member still holds its slot
(`SlotOwnership.confirm`). The question is an offset commit for the slot's partition of the
empty slots topic, which only the consumer's own thread may send. Questions of different
slots never wait for each other: every question waiting when the consumer's thread comes
round goes out in one asynchronous commit, and each asker waits for its own answer, at most
`timeout_s`, however many slots ask at once.
"""

from __future__ import annotations

import collections
import queue
import threading
from dataclasses import dataclass, field
from typing import Literal, Protocol

from confluent_kafka import KafkaError, KafkaException, TopicPartition

NOT_SENT = "the question was not sent (the owners' consumer is closing)"


class Committer(Protocol):
    """The one consumer call a question needs (the owners' consumer)."""

    def commit(self, *, offsets: list[TopicPartition], asynchronous: Literal[True]) -> None: ...


@dataclass
class Question:
    slot: int
    error: KafkaError | str | None = None
    answered: threading.Event = field(default_factory=threading.Event)

    def answer(self, error: KafkaError | str | None) -> None:
        self.error = error
        self.answered.set()


class Confirmations:
    """Questions asked on writer threads, sent and answered on the consumer's thread."""

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self._waiting: queue.SimpleQueue[Question] = queue.SimpleQueue()
        # One entry per commit in flight: librdkafka answers commits in the order sent.
        self._sent: collections.deque[list[Question]] = collections.deque()

    def ask(self, slot: int, timeout_s: float) -> Question | None:
        """Queue a question and wait for its answer; None if none came in `timeout_s`."""
        question = Question(slot)
        self._waiting.put(question)
        return question if question.answered.wait(timeout_s) else None

    def send(self, consumer: Committer) -> None:
        """Send every waiting question in one commit (on the consumer's thread)."""
        batch: list[Question] = []
        while True:
            try:
                batch.append(self._waiting.get_nowait())
            except queue.Empty:
                break
        if not batch:
            return
        slots = sorted({question.slot for question in batch})
        offsets = [TopicPartition(self.topic, slot, 0) for slot in slots]
        try:
            consumer.commit(offsets=offsets, asynchronous=True)
        except KafkaException as error:
            for question in batch:
                question.answer(error.args[0])
            return
        self._sent.append(batch)

    def answered(self, error: KafkaError | None, partitions: list[TopicPartition]) -> None:
        """The answer to the oldest commit in flight (librdkafka's `on_commit`, in poll())."""
        if not self._sent:
            return
        per_slot = {tp.partition: tp.error for tp in partitions if tp.topic == self.topic}
        for question in self._sent.popleft():
            if error is not None:
                question.answer(error)
            elif question.slot not in per_slot:
                question.answer(f"the answer does not name slot {question.slot}")
            else:
                question.answer(per_slot[question.slot])

    def abandon(self) -> None:
        """Answer every question still open as not confirmed (the consumer is closing)."""
        self._drop_waiting()
        while self._sent:
            for question in self._sent.popleft():
                question.answer(NOT_SENT)

    def _drop_waiting(self) -> None:
        while True:
            try:
                self._waiting.get_nowait().answer(NOT_SENT)
            except queue.Empty:
                return
