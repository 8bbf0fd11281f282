"""Ownership questions: sent together, answered each by its own slot, never serialised."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any, Literal, cast

from confluent_kafka import KafkaError, TopicPartition

from adapter.cluster.confirmations import NOT_SENT, Confirmations, Question

TOPIC = "p.internal.slots"


class _Commits:
    """Records the commits sent (the one consumer call `send` makes)."""

    def __init__(self) -> None:
        self.sent: list[list[int]] = []

    def commit(self, *, offsets: list[TopicPartition], asynchronous: Literal[True]) -> None:
        assert asynchronous
        self.sent.append([tp.partition for tp in offsets])


def _asking(confirmations: Confirmations, slots: list[int]) -> list[list[Question | None]]:
    answers: list[list[Question | None]] = [[] for _ in slots]
    for i, slot in enumerate(slots):

        def ask(i: int = i, slot: int = slot) -> None:
            answers[i].append(confirmations.ask(slot, 5))

        threading.Thread(target=ask, daemon=True).start()
    return answers


def _until(condition: Any) -> None:
    for _ in range(500):
        if condition():
            return
        time.sleep(0.01)
    raise AssertionError("never happened")


@dataclass(frozen=True)
class _Answered:
    """What `on_commit` reads of each TopicPartition (whose `error` cannot be set)."""

    topic: str
    partition: int
    error: KafkaError | None


def _answer(partitions: dict[int, KafkaError | None]) -> list[TopicPartition]:
    answered = [_Answered(TOPIC, slot, error) for slot, error in partitions.items()]
    return cast(list[TopicPartition], answered)


def _errors(answers: list[list[Question | None]]) -> list[object]:
    """Each asker's error, `None` if confirmed, `"no answer"` if none came."""
    return [a[0].error if a[0] is not None else "no answer" for a in answers]


def test_questions_of_many_slots_go_in_one_commit_and_get_their_own_answers() -> None:
    confirmations, commits = Confirmations(TOPIC), _Commits()
    answers = _asking(confirmations, [3, 1, 3])
    time.sleep(0.1)  # all three are waiting when the consumer's thread comes round
    confirmations.send(commits)
    assert commits.sent == [[1, 3]]
    confirmations.answered(None, _answer({1: None, 3: KafkaError(KafkaError.UNKNOWN_MEMBER_ID)}))
    _until(lambda: all(answers))
    first, second, third = _errors(answers)
    assert second is None
    assert isinstance(first, KafkaError)
    assert isinstance(third, KafkaError)


def test_a_request_error_or_a_slot_not_named_is_no_confirmation() -> None:
    confirmations, commits = Confirmations(TOPIC), _Commits()
    first = _asking(confirmations, [0])
    _until(lambda: not confirmations._waiting.empty())
    confirmations.send(commits)
    second = _asking(confirmations, [1])
    _until(lambda: not confirmations._waiting.empty())
    confirmations.send(commits)
    confirmations.answered(KafkaError(KafkaError.ILLEGAL_GENERATION), [])
    confirmations.answered(None, _answer({0: None}))  # answers the second: slot 1 not named
    _until(lambda: first[0] and second[0])
    assert isinstance(_errors(first)[0], KafkaError)
    assert _errors(second) == ["the answer does not name slot 1"]


def test_closing_answers_every_open_question() -> None:
    confirmations, commits = Confirmations(TOPIC), _Commits()
    answers = _asking(confirmations, [2])
    _until(lambda: not confirmations._waiting.empty())
    confirmations.send(commits)
    later = _asking(confirmations, [5])
    _until(lambda: not confirmations._waiting.empty())
    confirmations.abandon()
    _until(lambda: answers[0] and later[0])
    assert _errors(answers) == _errors(later) == [NOT_SENT]
