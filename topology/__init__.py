"""The layout on Kafka, without HTTP: names, a stream's partition, write slots, topic specs,
and the admin that creates and verifies the topics."""
