"""One local Spark session (local[2]) for the whole Spark tier, with the connector jars."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from spark_streaming.session import build_session

# A cold session takes ~30 s and the first test pays for it (and for the broker).
SPARK_TIMEOUT_S = 600

# pyspark reads results over a local socket it leaves to the garbage collector to close
# (pyspark/util.py, _load_from_socket): only that ResourceWarning is expected.
PYSPARK_SOCKETS = pytest.mark.filterwarnings("ignore:unclosed <socket.socket:ResourceWarning")
SPARK_TEST = [pytest.mark.integration, pytest.mark.timeout(SPARK_TIMEOUT_S), PYSPARK_SOCKETS]


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    session = build_session(
        "durable-kafka-tests",
        master="local[2]",
        conf={
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.sql.session.timeZone": "UTC",
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.local.dir": str(tmp_path_factory.mktemp("spark-local")),
            "spark.sql.warehouse.dir": str(tmp_path_factory.mktemp("spark-warehouse")),
            "spark.sql.streaming.forceDeleteTempCheckpointLocation": "true",
        },
    )
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()
