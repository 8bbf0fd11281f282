# syntax=docker/dockerfile:1
# The durable-kafka adapter image (default target), and `spark`: the same venv plus pyspark
# and a Java runtime, for the example Spark jobs. `docker compose` builds both.

# Bookworm, not the newer default: it is the Debian that still ships openjdk-17 for `spark`.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
# EXTRAS=spark adds pyspark (`--extra spark`); empty for the adapter alone.
ARG EXTRAS=""
ENV UV_PROJECT_ENVIRONMENT=/app/.venv \
    UV_COMPILE_BYTECODE=1 \
    UV_LINK_MODE=copy \
    UV_PYTHON_DOWNLOADS=never
RUN pip install --no-cache-dir uv==0.13.8
WORKDIR /src
# Dependencies first, in their own layer: it survives edits to the sources.
COPY pyproject.toml uv.lock README.md ./
RUN --mount=type=cache,target=/root/.cache/uv \
    uv sync --frozen --no-dev --no-install-project ${EXTRAS:+--extra "$EXTRAS"}
COPY adapter ./adapter
COPY topology ./topology
COPY schemas ./schemas
COPY spark_streaming ./spark_streaming
COPY devstack ./devstack
# --no-editable: the project lands in site-packages, so the venv alone is the application.
RUN --mount=type=cache,target=/root/.cache/uv \
    uv sync --frozen --no-dev --no-editable ${EXTRAS:+--extra "$EXTRAS"}

FROM ${PYTHON_IMAGE} AS runtime
RUN groupadd --system --gid 10001 durable \
    && useradd --system --uid 10001 --gid durable --create-home --home-dir /home/durable durable
WORKDIR /app
COPY --from=build /app/.venv /app/.venv
# The `fs` cold tier writes under ./.data (relative to /app) when S3 is not configured.
RUN install -d -o durable -g durable /app/.data
ENV PATH=/app/.venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    DURABLE_KAFKA_LISTEN=0.0.0.0:4437

FROM runtime AS spark
RUN apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless maven \
    && rm -rf /var/lib/apt/lists/*
USER durable
# The Kafka connector's jars, fetched with Maven at build time (devstack/spark.py) so the job
# starts without network access; DURABLE_KAFKA_SPARK_JARS overrides them.
RUN python -c "from devstack import spark; spark.jars_dir()"
ENTRYPOINT []
CMD ["python", "-m", "spark_streaming.jobs.bucket_activity", "--help"]

FROM runtime AS adapter
USER durable
EXPOSE 4437
ENTRYPOINT ["durable-kafka"]
CMD ["serve"]
