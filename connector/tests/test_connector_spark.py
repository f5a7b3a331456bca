"""Spark tests that need no broker: automatic lookup of format("rocketmq") and early option errors.

Uses pytest-spark's shared ``spark_session`` (local[2], options in pyproject.toml).  No test calls
``spark.dataSource.register``: the source must be found through ``pyspark_rocketmq`` alone.
"""

from __future__ import annotations

import os
import sys
import tempfile
from typing import Any

import pytest

# Spark starts its Python workers with PYSPARK_PYTHON (else `python3` from PATH, maybe another env).
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

pytestmark = pytest.mark.spark

DEAD_NS = "127.0.0.1:1"  # nothing listens on port 1


def test_format_rocketmq_found_without_register(spark_session: Any) -> None:
    df = spark_session.read.format("rocketmq").option("nameServer", DEAD_NS).option("topic", "t").load()
    assert df.columns[:4] == ["topic", "brokerName", "queueId", "queueOffset"]
    assert dict(df.dtypes)["properties"] == "map<string,string>"
    assert dict(df.dtypes)["bornTimestamp"] == "timestamp"


def test_bad_options_fail_at_load_naming_the_option(spark_session: Any) -> None:
    reader = spark_session.readStream.format("rocketmq").option("nameServer", DEAD_NS)
    with pytest.raises(Exception, match="'topic'"):
        reader.load()
    with pytest.raises(Exception, match="'startingOffsets'"):
        reader.option("topic", "t").option("startingOffsets", "{bad json").load()
    with pytest.raises(Exception, match="'startingOffsets'"):
        reader.option("topic", "t").option("startingOffsets", "newest").load()


def test_unreachable_nameserver_fails_batch_read(spark_session: Any) -> None:
    df = spark_session.read.format("rocketmq").option("nameServer", DEAD_NS).option("topic", "t").load()
    with pytest.raises(Exception, match="'nameServer'"):
        df.count()


def test_unreachable_nameserver_fails_stream_at_start(spark_session: Any) -> None:
    q = (
        spark_session.readStream.format("rocketmq").option("nameServer", DEAD_NS).option("topic", "t").load()
        .writeStream.format("memory").queryName("dead_ns")
        .option("checkpointLocation", tempfile.mkdtemp()).trigger(availableNow=True).start()
    )  # fmt: skip
    with pytest.raises(Exception, match="'nameServer'"):
        q.awaitTermination(120)
    q.stop()


def test_sink_rejects_unknown_columns(spark_session: Any) -> None:
    df = spark_session.createDataFrame([("a", 1)], "body string, value int")
    with pytest.raises(Exception, match="unknown column"):
        df.write.format("rocketmq").option("nameServer", DEAD_NS).option("topic", "t").mode("append").save()
