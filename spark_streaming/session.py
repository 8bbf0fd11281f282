"""SparkSessions with the Kafka connector: its jars are passed as `spark.jars` up front.

`spark.jars.packages` (Ivy) is not used: the jars come from the project's own Maven fetch
(`python -m devstack fetch spark`, cached under ~/.cache/durable-kafka), or from the
comma-separated paths in `$DURABLE_KAFKA_SPARK_JARS`. On a cluster of your own, use
`--packages` with `devstack.spark.PACKAGES` instead (see docs/spark.md).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from pyspark.sql import SparkSession

JARS_ENV = "DURABLE_KAFKA_SPARK_JARS"


def connector_jars(env: Mapping[str, str] | None = None) -> list[str]:
    """The connector jars: `$DURABLE_KAFKA_SPARK_JARS` if set, else the devstack cache."""
    given = (os.environ if env is None else env).get(JARS_ENV, "")
    if given.strip():
        return [jar.strip() for jar in given.split(",") if jar.strip()]
    from devstack import spark  # fetches with Maven on first use

    return [str(jar) for jar in spark.connector_jars()]


def build_session(
    app_name: str,
    master: str | None = None,
    conf: Mapping[str, str] | None = None,
    jars: list[str] | None = None,
) -> SparkSession:
    """A session (or the active one) with the connector jars; `master` None keeps Spark's own.

    The jars only take effect when this creates the JVM: call it before any other session.
    """
    builder = SparkSession.builder.appName(app_name)
    if master is not None:
        builder = builder.master(master)
    builder = builder.config("spark.jars", ",".join(connector_jars() if jars is None else jars))
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    return builder.getOrCreate()
