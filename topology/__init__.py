"""Naming and placement on Kafka: bucket topics, internal compacted topics, and their admin."""
