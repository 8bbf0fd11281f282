"""Pure protocol rules: they know nothing of HTTP or Kafka."""
