"""durable-kafka: a Durable Streams HTTP server that keeps every byte in Kafka.

Its packages form layers (docs/architecture.md, "Layers"; tests/unit/test_layers.py).
"""
