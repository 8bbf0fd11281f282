"""How streams map onto Kafka: topic naming, placement, write slots, the record format
(`wire`), the internal topics' keys and values (`internal_records`), topic specs, and the admin
that creates and verifies the topics.

Everything here but `admin` is pure and imports the standard library only (`internal_records`
loads fastavro when it first encodes or decodes), so importing the package, `topology.wire` or
`topology.internal_records` from a Spark job loads no Kafka client.
"""
