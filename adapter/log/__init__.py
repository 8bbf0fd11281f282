"""The Kafka side: the transactional writer with group commit, and the catch-up reader."""
