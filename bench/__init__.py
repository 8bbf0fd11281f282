"""Benchmarks: durable-kafka against the reference server and raw Kafka, as ratios."""
