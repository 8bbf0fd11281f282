"""Errors of the topology layer, each saying whether retrying can help."""

from __future__ import annotations


class TopologyError(Exception):
    retriable = False


class BrokerUnavailable(TopologyError):
    """The broker did not answer in time: retry later."""

    retriable = True


class TopologyMismatch(TopologyError):
    """An existing topic is configured in a way we must not write to: an operator must act."""


class TopicNotKnownYet(BrokerUnavailable):
    """The broker answering has not learnt of a topic that exists (just created, perhaps by
    another instance): ask again in a moment."""


class TopicMissing(TopologyError):
    """Topics we need do not exist, and a platform team manages topics: it must create them.

    `commands` are the `kafka-topics.sh` commands that create them as we would have."""

    def __init__(self, names: list[str], commands: list[str]) -> None:
        super().__init__(
            f"topic_management is external and {', '.join(names)} "
            f"{'does' if len(names) == 1 else 'do'} not exist; create "
            f"{'it' if len(names) == 1 else 'them'} with: {' ; '.join(commands)}"
        )
        self.names = names
        self.commands = commands
