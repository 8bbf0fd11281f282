"""docker-compose.yml and the Dockerfile agree with the adapter's settings and with each other."""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from adapter.cli import build_parser
from adapter.config import ENV_PREFIX, ConfigError, Settings, env_name, load, setting_names

ROOT = Path(__file__).resolve().parents[2]
SERVICES = ("kafka", "minio", "minio-init", "adapter", "spark")
BROKERS = ("kafka-1", "kafka-2", "kafka-3")  # the `cluster` profile
CLUSTER = (*BROKERS, "adapter-cluster")


# --- docker-compose.yml ---------------------------------------------------------------------


@cache
def compose() -> dict[str, Any]:
    document = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert isinstance(document, dict)
    return document


def service(name: str) -> dict[str, Any]:
    services = compose()["services"]
    assert name in services, f"docker-compose.yml has no service {name!r}"
    found = services[name]
    assert isinstance(found, dict)
    return found


def environment(name: str) -> dict[str, str]:
    raw = service(name).get("environment") or {}
    if isinstance(raw, list):
        raw = dict(item.partition("=")[::2] for item in raw)
    return {str(key): str(value) for key, value in raw.items()}


def durable_environment(name: str) -> dict[str, str]:
    return {k: v for k, v in environment(name).items() if k.startswith(ENV_PREFIX)}


def adapter_settings() -> Settings:
    return load(None, durable_environment("adapter"), {})


def argv(value: str | list[str]) -> list[str]:
    """A compose `command`/`entrypoint` as the argument list Docker runs."""
    return shlex.split(value) if isinstance(value, str) else [str(part) for part in value]


def script(name: str) -> str:
    """Everything a service runs, as one text (entrypoint then command)."""
    spec = service(name)
    return " ".join(argv(spec.get("entrypoint", [])) + argv(spec.get("command", [])))


def container_ports(name: str) -> set[int]:
    return {int(str(entry).rpartition(":")[2].split("/")[0]) for entry in service(name)["ports"]}


def published(name: str) -> dict[int, int]:
    """Container port -> host port, for `HOST:CONTAINER` entries."""
    pairs = (str(entry).split("/")[0].rsplit(":", 2)[-2:] for entry in service(name)["ports"])
    return {int(container): int(host) for host, container in pairs}


def listeners(variable: str, broker: str = "kafka") -> dict[str, tuple[str, int]]:
    """`NAME://host:port,...` from a broker service's environment, by listener name."""
    found: dict[str, tuple[str, int]] = {}
    for entry in environment(broker)[variable].split(","):
        listener, _, address = entry.partition("://")
        host, _, port = address.rpartition(":")
        found[listener] = (host, int(port))
    return found


def host_port(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host, int(port)


def depends_on(name: str) -> dict[str, str]:
    return {dep: spec["condition"] for dep, spec in service(name)["depends_on"].items()}


def test_every_service_exists() -> None:
    assert set(SERVICES) <= set(compose()["services"])


def test_only_spark_and_the_cluster_are_behind_profiles() -> None:
    profiled = {name: spec.get("profiles") for name, spec in compose()["services"].items()}
    assert {name: p for name, p in profiled.items() if p} == {
        "spark": ["spark"],
        **{name: ["cluster"] for name in CLUSTER},
    }


def test_every_durable_kafka_variable_is_a_setting() -> None:
    known = {env_name(name) for name in setting_names()}
    used = {(name, var) for name in SERVICES + CLUSTER for var in durable_environment(name)}
    assert used, "no service sets a DURABLE_KAFKA_* variable"
    assert {(name, var) for name, var in used if var not in known} == set()


@pytest.mark.parametrize("name", SERVICES + CLUSTER)
def test_durable_kafka_values_load(name: str) -> None:
    env = durable_environment(name)
    try:
        settings = load(None, env, {})
    except ConfigError as error:
        pytest.fail(f"{name}: {error}")
    by_variable = {env_name(field): _text(getattr(settings, field)) for field in setting_names()}
    assert {var: by_variable.get(var) for var in env} == env


def _text(value: object) -> str:
    """A setting as the environment spells it (booleans `true`/`false`)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def test_adapter_publishes_its_listen_port() -> None:
    settings = adapter_settings()
    assert (settings.host, settings.port) == ("0.0.0.0", 4437)
    assert published("adapter") == {settings.port: 4437}


def test_bootstrap_servers_are_advertised_kafka_listeners() -> None:
    advertised = listeners("KAFKA_ADVERTISED_LISTENERS")
    bound = listeners("KAFKA_LISTENERS")
    for address in adapter_settings().bootstrap_servers.split(","):
        host, port = host_port(address)
        names = [name for name, where in advertised.items() if where == (host, port)]
        assert len(names) == 1, f"{address} is not one advertised listener: {advertised}"
        assert host in (service("kafka").get("hostname"), "kafka")
        assert bound[names[0]][1] == port


def test_spark_job_uses_the_adapters_kafka() -> None:
    bootstrap = adapter_settings().bootstrap_servers
    assert environment("spark")["KAFKA_BOOTSTRAP_SERVERS"] == bootstrap
    command = argv(service("spark")["command"])
    assert command[command.index("--bootstrap-servers") + 1] == bootstrap


def test_host_listener_is_published() -> None:
    host, port = listeners("KAFKA_ADVERTISED_LISTENERS")["EXTERNAL"]
    assert host == "localhost"
    assert published("kafka") == {port: port}


def test_s3_endpoint_is_the_minio_service() -> None:
    settings = adapter_settings()
    endpoint = urlsplit(settings.s3_endpoint_url)
    assert (settings.cold_backend, endpoint.scheme, endpoint.port) == ("s3", "http", 9000)
    assert endpoint.hostname == "minio"
    assert "--address" not in script("minio"), "minio serves its API off the default :9000"
    assert 9000 in container_ports("minio")
    assert f"mc alias set local {settings.s3_endpoint_url} " in script("minio-init")


def test_adapter_uses_the_minio_credentials() -> None:
    settings = adapter_settings()
    minio = environment("minio")
    assert (settings.s3_access_key_id, settings.s3_secret_access_key) == (
        minio["MINIO_ROOT_USER"],
        minio["MINIO_ROOT_PASSWORD"],
    )


def test_minio_init_creates_the_adapters_bucket() -> None:
    made = re.findall(r"mc mb --ignore-existing local/(\S+)", script("minio-init"))
    assert made == [adapter_settings().s3_bucket]


def test_start_order_waits_for_health() -> None:
    assert depends_on("minio-init") == {"minio": "service_healthy"}
    assert depends_on("adapter") == {
        "kafka": "service_healthy",
        "minio-init": "service_completed_successfully",
    }
    assert depends_on("spark") == {"adapter": "service_healthy"}
    assert all("test" in service(name)["healthcheck"] for name in ("kafka", "minio", "adapter"))


def test_adapter_healthcheck_asks_readyz_on_the_listen_port() -> None:
    check = " ".join(argv(service("adapter")["healthcheck"]["test"]))
    assert f":{adapter_settings().port}/readyz" in check


# --- the `cluster` profile: three brokers, an adapter with durable topics on them -----------


def cluster_settings() -> Settings:
    return load(None, durable_environment("adapter-cluster"), {})


def test_cluster_brokers_form_one_three_voter_quorum() -> None:
    ids = [environment(name)["KAFKA_NODE_ID"] for name in BROKERS]
    assert sorted(ids) == ["1", "2", "3"]
    assert len({environment(name)["CLUSTER_ID"] for name in BROKERS}) == 1
    for name, node_id in zip(BROKERS, ids, strict=True):
        env = environment(name)
        assert env["KAFKA_PROCESS_ROLES"] == "broker,controller"
        voters = dict(v.split("@") for v in env["KAFKA_CONTROLLER_QUORUM_VOTERS"].split(","))
        controllers = {
            voter: host_port(address) for voter, address in voters.items()
        }  # every voter is a broker service's CONTROLLER listener
        assert set(controllers) == {"1", "2", "3"}
        assert controllers[node_id] == (
            service(name)["hostname"],
            listeners("KAFKA_LISTENERS", name)["CONTROLLER"][1],
        )


def test_cluster_internal_topics_have_three_replicas_two_in_sync() -> None:
    for name in BROKERS:
        env = environment(name)
        assert env["KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR"] == "3"
        assert env["KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR"] == "3"
        assert env["KAFKA_TRANSACTION_STATE_LOG_MIN_ISR"] == "2"
        assert env["KAFKA_MIN_INSYNC_REPLICAS"] == "2"


def test_cluster_adapter_writes_durable_topics_on_every_broker() -> None:
    settings = cluster_settings()
    assert (settings.replication_factor, settings.min_insync_replicas) == (3, 2)
    assert settings.topic_prefix != adapter_settings().topic_prefix
    hosts = {host_port(address) for address in settings.bootstrap_servers.split(",")}
    advertised = {listeners("KAFKA_ADVERTISED_LISTENERS", b)["PLAINTEXT"] for b in BROKERS}
    assert hosts == advertised
    assert set(depends_on("adapter-cluster")) == {*BROKERS, "minio-init"}
    assert all(depends_on("adapter-cluster")[b] == "service_healthy" for b in BROKERS)


def test_cluster_host_listeners_are_published_apart() -> None:
    ports = []
    for name in BROKERS:
        host, port = listeners("KAFKA_ADVERTISED_LISTENERS", name)["EXTERNAL"]
        assert host == "localhost"
        assert published(name) == {port: port}
        ports.append(port)
    assert len(set(ports)) == 3
    assert 4437 not in published("adapter-cluster").values()
    assert list(published("adapter-cluster")) == [cluster_settings().port]


# --- Dockerfile and pyproject.toml ----------------------------------------------------------


@dataclass(frozen=True)
class Stage:
    name: str
    base: str
    instructions: tuple[tuple[str, str], ...]


@cache
def stages() -> tuple[Stage, ...]:
    """The Dockerfile's stages in order, each with its (KEYWORD, arguments) instructions."""
    text = re.sub(r"\\\n", " ", (ROOT / "Dockerfile").read_text())
    lines = [line.strip() for line in text.splitlines()]
    found: list[Stage] = []
    for line in (line for line in lines if line and not line.startswith("#")):
        keyword, _, rest = line.partition(" ")
        if keyword.upper() == "FROM":
            words = rest.split()
            name = words[2] if len(words) == 3 and words[1].upper() == "AS" else ""
            found.append(Stage(name, words[0], ()))
        elif found:
            last = found[-1]
            found[-1] = Stage(last.name, last.base, (*last.instructions, (keyword.upper(), rest)))
    return tuple(found)


def stage(name: str) -> Stage:
    named = {stage.name: stage for stage in stages()}
    assert name in named, f"the Dockerfile has no stage {name!r}"
    return named[name]


def lineage(target: Stage) -> list[Stage]:
    """The stage and the stages it is built FROM, base first."""
    names = {stage.name for stage in stages()}
    chain = [target]
    while chain[0].base in names:
        chain.insert(0, stage(chain[0].base))
    return chain


def instructions(target: Stage, keyword: str) -> list[str]:
    return [rest for s in lineage(target) for key, rest in s.instructions if key == keyword]


def image_env(target: Stage) -> dict[str, str]:
    pairs = (word.partition("=") for rest in instructions(target, "ENV") for word in rest.split())
    return {key: value for key, _, value in pairs}


def pyproject() -> dict[str, Any]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_default_target_exposes_the_listen_port() -> None:
    final = stages()[-1]
    variable = env_name("listen")
    # The image listens beyond loopback, so it needs auth configured (or explicitly off).
    auth = {env_name("auth_mode"): "static", env_name("auth_token_file"): "/etc/tokens.toml"}
    listen = load(None, {variable: image_env(final)[variable]} | auth, {})
    assert instructions(final, "EXPOSE") == [str(listen.port)]
    assert listen.port == adapter_settings().port


def test_default_target_runs_the_console_script() -> None:
    final = stages()[-1]
    entrypoint = json.loads(instructions(final, "ENTRYPOINT")[-1])
    assert entrypoint == ["durable-kafka"]
    assert entrypoint[0] in pyproject()["project"]["scripts"]
    command = json.loads(instructions(final, "CMD")[-1])
    assert build_parser().parse_args(command).command == "serve"


def test_default_target_is_not_root() -> None:
    users = instructions(stages()[-1], "USER")
    assert users
    assert users[-1] not in ("root", "0")


def test_image_holds_every_wheel_package() -> None:
    packages = pyproject()["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"]
    copied = {rest.split()[0] for rest in instructions(stage("build"), "COPY")}
    assert set(packages) <= copied
    assert {"pyproject.toml", "uv.lock", "README.md"} <= set(
        " ".join(instructions(stage("build"), "COPY")).split()
    )


def test_spark_service_builds_the_spark_stage() -> None:
    build = service("spark")["build"]
    spark = stage(build["target"])
    declared = {rest.split("=")[0] for rest in instructions(stage("build"), "ARG")}
    assert set(build["args"]) <= declared
    assert build["args"]["EXTRAS"] in pyproject()["project"]["optional-dependencies"]
    assert instructions(spark, "ENTRYPOINT")[-1:] == ["[]"], (
        "its command must not follow durable-kafka"
    )


def test_spark_command_is_a_module() -> None:
    command = argv(service("spark")["command"])
    assert command[:2] == ["python", "-m"]
    assert importlib.util.find_spec(command[2]) is not None
