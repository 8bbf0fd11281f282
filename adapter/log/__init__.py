"""The Kafka side: the transactional writer with group commit, the catch-up reader and the
hot tail in memory; Kafka errors become `LogUnavailable` here."""
