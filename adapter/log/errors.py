"""Failures of the Kafka layer, translated where they enter our code."""

from __future__ import annotations


class LogUnavailable(Exception):
    """Kafka did not take or serve the data in time; nothing was made visible. Retry later."""
