"""Runnable example Spark jobs over the bucket topics (`python -m spark_streaming.jobs.<name>`)."""
