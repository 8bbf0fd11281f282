"""How streams map onto Kafka: topic naming, placement, write slots, the record format
(`wire`), topic specs, and the admin that creates and verifies the topics.

Everything here but `admin` is pure and standard-library only, so importing the package (or
`topology.wire`) from a Spark job loads no Kafka client.
"""
