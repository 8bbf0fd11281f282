"""The decoded rows' schema: `schemas/stream_row.avsc`, as a Spark `StructType`.

The Avro document is the one definition; streaming and batch reads both select exactly these
columns, in this order, with these types.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    DataType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from schemas import load

ROW_SCHEMA = "stream_row"

_PRIMITIVES: dict[str, DataType] = {
    "string": StringType(),
    "bytes": BinaryType(),
    "int": IntegerType(),
    "long": LongType(),
    "boolean": BooleanType(),
    "float": FloatType(),
    "double": DoubleType(),
}

# Lifecycle control records (header `dk-control`): one row per create, close or delete.
LIFECYCLE_SCHEMA = StructType(
    [
        StructField("bucket", StringType(), False),
        StructField("stream_id", StringType(), False),
        StructField("event", StringType(), False),  # create | close | delete
        StructField("offset", StringType(), False),
        StructField("timestamp", TimestampType(), False),
        StructField("partition", IntegerType(), False),
        StructField("kafka_offset", LongType(), False),
    ]
)


def spark_type(avro_type: Any) -> tuple[DataType, bool]:
    """The Spark type of an Avro field type, and whether it is nullable (a union with null)."""
    if isinstance(avro_type, list):
        branches = [branch for branch in avro_type if branch != "null"]
        if len(branches) != 1:
            raise ValueError(f"only unions of null and one type are supported: {avro_type!r}")
        return spark_type(branches[0])[0], True
    if isinstance(avro_type, dict):
        if avro_type.get("logicalType") in ("timestamp-millis", "timestamp-micros"):
            return TimestampType(), False
        return spark_type(avro_type["type"])
    if avro_type in _PRIMITIVES:
        return _PRIMITIVES[avro_type], False
    raise ValueError(f"no Spark type for Avro type {avro_type!r}")


@cache
def row_schema() -> StructType:
    """The data rows' schema, from `schemas/stream_row.avsc`."""
    fields = []
    for field in load(ROW_SCHEMA)["fields"]:
        data_type, nullable = spark_type(field["type"])
        fields.append(StructField(field["name"], data_type, nullable))
    return StructType(fields)
