"""The local stack: a real Apache Kafka broker and a real MinIO server, run without Docker."""
