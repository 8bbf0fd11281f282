"""How streams map onto Kafka: topic naming, placement, the record format (`wire`), topic admin.

Everything here but `admin` is pure and standard-library only, so importing the package (or
`topology.wire`) from a Spark job loads no Kafka client.
"""
