"""`python -m devstack up|down|status|fetch [kafka] [minio] [adapter] [chromium] [nginx] ...`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass

from devstack import (
    adapter,
    browser,
    clients,
    cluster,
    helm,
    jaeger,
    kafka,
    minio,
    nginx,
    promtool,
    spark,
)
from devstack.paths import data_dir
from devstack.process import ServiceError

KAFKA = kafka.KafkaNode(home=data_dir() / "kafka")
MINIO = minio.MinioNode(home=data_dir() / "minio")
# `make cluster-up`: three brokers on fixed loopback ports, apart from the single node's.
CLUSTER_HOME = data_dir() / "cluster"
CLUSTER_PORTS = [(19092, 19093), (19192, 19193), (19292, 19293)]
ADAPTER_HOME = data_dir() / "adapter"
ADAPTER_URL = "http://127.0.0.1:4437"  # the protocol's default port, on loopback


@dataclass(frozen=True)
class Service:
    up: Callable[[], str]
    down: Callable[[], None]
    fetch: Callable[[], object]
    status: Callable[[], bool]


SERVICES: dict[str, Service] = {
    "kafka": Service(
        up=lambda: kafka.start(KAFKA),
        down=lambda: kafka.stop(KAFKA),
        fetch=kafka.jars_dir,
        status=lambda: kafka.answers_metadata(KAFKA.bootstrap_servers),
    ),
    "cluster": Service(
        up=lambda: cluster.start_cluster(CLUSTER_HOME, CLUSTER_PORTS),
        down=lambda: cluster.stop_cluster(CLUSTER_HOME),
        fetch=kafka.jars_dir,
        status=lambda: cluster.is_up(CLUSTER_HOME),
    ),
    "minio": Service(
        up=lambda: minio.start(MINIO),
        down=lambda: minio.stop(MINIO),
        fetch=minio.binary,
        status=lambda: minio.is_live(MINIO.endpoint_url),
    ),
    "adapter": Service(
        up=lambda: adapter.start(ADAPTER_HOME, ADAPTER_URL, kafka.start(KAFKA)),
        down=lambda: adapter.stop(ADAPTER_HOME),
        fetch=lambda: "the project virtualenv",
        status=lambda: adapter.is_ready(ADAPTER_URL),
    ),
    # A tool, not a server: "up" and "fetch" install it, "status" says whether it runs.
    "chromium": Service(
        up=browser.chromium_path,
        down=lambda: None,
        fetch=browser.chromium_path,
        status=lambda: browser.chromium_version() is not None,
    ),
    "nginx": Service(
        up=nginx.nginx_path,
        down=lambda: None,
        fetch=nginx.nginx_path,
        status=lambda: nginx.nginx_version() is not None,
    ),
    "spark": Service(
        up=lambda: str(spark.jars_dir()),
        down=lambda: None,
        fetch=spark.jars_dir,
        status=spark.is_cached,
    ),
    # A tool too: the chart tests render `deploy/helm` with it.
    "helm": Service(
        up=lambda: str(helm.binary()),
        down=lambda: None,
        fetch=helm.binary,
        status=helm.is_cached,
    ),
    # A tool too: the monitoring tests check and unit-test the alerting rules with it.
    "promtool": Service(
        up=lambda: str(promtool.binary()),
        down=lambda: None,
        fetch=promtool.binary,
        status=promtool.is_cached,
    ),
    # A tool too: the tracing tests start one (tests/tracing_collector.py) and query it.
    "jaeger": Service(
        up=lambda: str(jaeger.binary()),
        down=lambda: None,
        fetch=jaeger.binary,
        status=jaeger.is_cached,
    ),
    # The official Python client's published tests, run against the adapter by `make clients`.
    "clients": Service(
        up=lambda: str(clients.python_tests()),
        down=lambda: None,
        fetch=clients.python_tests,
        status=clients.is_cached,
    ),
}


# Not part of "all" (but of status): the 3-broker cluster is asked for by name (`make cluster-up`).
OPT_IN = {"cluster"}


def run(action: str, service: Service) -> str:
    if action == "up":
        return f"up at {service.up()}"
    if action == "down":
        service.down()
        return "down"
    if action == "fetch":
        return f"cached at {service.fetch()}"
    return "up" if service.status() else "down"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devstack", description=__doc__)
    parser.add_argument("action", choices=["up", "down", "status", "fetch"])
    parser.add_argument("services", nargs="*", help=f"of {', '.join(SERVICES)} (default: all)")
    args = parser.parse_args(argv)
    unknown = set(args.services) - set(SERVICES)
    if unknown:
        parser.error(f"unknown service(s): {', '.join(sorted(unknown))}")
    try:
        default = [n for n in SERVICES if args.action == "status" or n not in OPT_IN]
        for name in args.services or default:
            print(f"{name}: {run(args.action, SERVICES[name])}", flush=True)
    except ServiceError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
