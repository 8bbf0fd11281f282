"""Failures of the Kafka layer, translated where they enter our code."""

from __future__ import annotations


class Retriable(Exception):
    """Kafka did not do what was asked, for now. A request is answered 503 (504 for an unknown
    outcome) and may be retried; background work logs it and tries again later, never stops."""


class LogUnavailable(Retriable):
    """Kafka did not take or serve the data in time; nothing was made visible. Retry later."""


class BelowLogStart(LogUnavailable):
    """The read started below the partition's log start offset: that data was freed (tiered
    to the cold store since the read was planned). Nothing was returned."""


class OutcomeUnknown(Retriable):
    """A write whose outcome could not be learned in time: it may or may not be in the log.
    Never a LogUnavailable, which says nothing was made visible."""
