"""Spark's Kafka and Avro connectors for the pinned pyspark, run from Maven Central's jars.

pyspark's wheel ships Spark without its external connectors. `mvn dependency:copy-dependencies`
of `spark-sql-kafka-0-10_2.13` and `spark-avro_2.13` fetches their whole tree once into the
cache; of those jars pyspark lacks only five, and those five are what `spark.jars` needs
(passing the rest, e.g. an older slf4j-api, would shadow pyspark's own).
"""

from __future__ import annotations

from pathlib import Path

from devstack import maven
from devstack.paths import cache_dir
from devstack.process import ServiceError

SPARK_VERSION = "4.0.0"  # pyspark's pin (pyproject, extra `spark`) and the connectors' version
SCALA_BINARY = "2.13"
POM = Path(__file__).resolve().parent / "spark" / "pom.xml"

# Maven coordinates for a cluster of one's own: `spark-submit --packages ...`.
PACKAGES = (
    f"org.apache.spark:spark-sql-kafka-0-10_{SCALA_BINARY}:{SPARK_VERSION}",
    f"org.apache.spark:spark-avro_{SCALA_BINARY}:{SPARK_VERSION}",
)

# The artifacts of the connectors' tree that pyspark's own jars/ directory does not have.
MISSING_FROM_PYSPARK = (
    "spark-sql-kafka-0-10_",
    "spark-token-provider-kafka-0-10_",
    "kafka-clients-",
    "commons-pool2-",
    "spark-avro_",
)


def _target() -> Path:
    return cache_dir() / f"spark-connectors-{SPARK_VERSION}"


def is_cached() -> bool:
    """Whether the jars are already fetched (for `python -m devstack status`)."""
    return maven.is_fetched(_target())


def jars_dir() -> Path:
    """The connectors' whole runtime tree, fetched once with Maven and cached."""
    return maven.copy_dependencies(POM, _target(), "Spark's Kafka connector jars")


def select_missing(directory: Path) -> list[Path]:
    """The jars in `directory` that pyspark lacks, one per artifact, in a stable order."""
    jars = sorted(directory.glob("*.jar"))
    chosen: list[Path] = []
    for prefix in MISSING_FROM_PYSPARK:
        matches = [jar for jar in jars if jar.name.startswith(prefix)]
        if len(matches) != 1:
            raise ServiceError(
                f"expected one {prefix}*.jar in {directory}, found {len(matches)}: "
                "remove the directory to fetch it again"
            )
        chosen.append(matches[0])
    return chosen


def connector_jars() -> list[Path]:
    """The five jars to pass as `spark.jars` before the first SparkSession (fetched if needed)."""
    return select_missing(jars_dir())
