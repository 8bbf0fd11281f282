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


class AccessDenied(BrokerUnavailable):
    """An ACL refused an operation (`DENIED: <operation> on <type> <name>`): retried, so the
    instance becomes ready once an administrator grants it."""
