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
from tests.deployment import Acl, documented_acls, known_variables

ROOT = Path(__file__).resolve().parents[2]
SERVICES = ("kafka", "minio", "minio-init", "adapter", "spark")
BROKERS = ("kafka-1", "kafka-2", "kafka-3")  # the `cluster` profile
CLUSTER = (*BROKERS, "adapter-cluster")
SECURE = ("kafka-secure-certs", "kafka-secure", "kafka-secure-setup", "adapter-secure")
SECURE_FILES = ROOT / "deploy" / "compose" / "secure"


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


def test_only_spark_the_cluster_and_secure_are_behind_profiles() -> None:
    profiled = {name: spec.get("profiles") for name, spec in compose()["services"].items()}
    assert {name: p for name, p in profiled.items() if p} == {
        "spark": ["spark"],
        **{name: ["cluster"] for name in CLUSTER},
        **{name: ["secure"] for name in SECURE},
    }


def test_every_durable_kafka_variable_is_a_setting() -> None:
    every = SERVICES + CLUSTER + SECURE
    used = {(name, var) for name in every for var in durable_environment(name)}
    assert used, "no service sets a DURABLE_KAFKA_* variable"
    assert {(name, var) for name, var in used if var not in known_variables()} == set()


@pytest.mark.parametrize("name", SERVICES + CLUSTER + ("adapter-secure",))
def test_durable_kafka_values_load(name: str) -> None:
    env = durable_environment(name)
    try:
        settings = load(None, env, {})
    except ConfigError as error:
        pytest.fail(f"{name}: {error}")
    by_variable = {env_name(field): _text(getattr(settings, field)) for field in setting_names()}
    assert {var: by_variable[var] for var in env if var in by_variable} == {
        var: value for var, value in env.items() if var in by_variable
    }


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


# --- the `secure` profile: SASL_SSL with SCRAM users and ACLs, an adapter through client.properties


def secure_settings() -> Settings:
    return load(None, durable_environment("adapter-secure"), {})


def properties(path: Path) -> dict[str, str]:
    """A Java-style .properties file (as these are written: one `key=value` a line)."""
    lines = [line.strip() for line in path.read_text().splitlines()]
    return dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))


@dataclass(frozen=True)
class Login:
    module: str
    options: dict[str, str]


def jaas(path: Path) -> dict[str, Login]:
    """A JAAS file's sections by name (one login module each, as Kafka's are)."""
    text = re.sub(r"//[^\n]*", "", path.read_text())
    found = {}
    for name, module, options in re.findall(
        r"([\w.]+)\s*\{\s*([\w.]+)\s+required(.*?);\s*\};", text, re.S
    ):
        found[name] = Login(module, dict(re.findall(r'(\w+)="([^"]*)"', options)))
    return found


def mounted(name: str) -> dict[str, str]:
    """A service's mounts: container path -> volume name or host path."""
    pairs = (str(entry).split(":")[:2] for entry in service(name).get("volumes", []))
    return {target: source for source, target in pairs}


def host_file(name: str, container_path: str) -> Path:
    """The repository file bind-mounted at `container_path` (directly or in a mounted folder)."""
    for target, source in mounted(name).items():
        if source.startswith("./") and (container_path + "/").startswith(target + "/"):
            return ROOT / source / container_path[len(target) :].lstrip("/")
    raise AssertionError(f"{name}: {container_path} is not bind-mounted from the repository")


def volume_path(name: str, container_path: str, other: str) -> str:
    """Where service `other` mounts the volume that `name` has `container_path` in."""
    directory, _, file = container_path.rpartition("/")
    volume = mounted(name).get(directory)
    assert volume is not None, f"{name}: nothing is mounted at {directory}"
    assert not volume.startswith("."), f"{name}: {directory} is a host folder, not a volume"
    where = {source: target for target, source in mounted(other).items()}
    assert volume in where, f"{other} does not mount {volume}"
    return f"{where[volume]}/{file}"


def shell(name: str) -> str:
    """A service's script as the shell runs it (compose turns `$$` into `$`)."""
    return script(name).replace("$$", "$")


def protocols(broker: str = "kafka-secure") -> dict[str, str]:
    entries = environment(broker)["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"].split(",")
    return dict(entry.split(":") for entry in entries)


def mechanisms(listener: str, broker: str = "kafka-secure") -> list[str]:
    variable = f"KAFKA_LISTENER_NAME_{listener}_SASL_ENABLED_MECHANISMS"
    return environment(broker)[variable].split(",")


def broker_jaas() -> dict[str, Login]:
    option = environment("kafka-secure")["KAFKA_OPTS"]
    found = re.fullmatch(r"-Djava\.security\.auth\.login\.config=(\S+)", option)
    assert found, option
    return jaas(host_file("kafka-secure", found.group(1)))


def client_file() -> dict[str, str]:
    path = durable_environment("adapter-secure")[env_name("kafka_client_file")]
    return properties(host_file("adapter-secure", path))


LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


def test_secure_listeners_are_consistent() -> None:
    env = environment("kafka-secure")
    bound = listeners("KAFKA_LISTENERS", "kafka-secure")
    advertised = listeners("KAFKA_ADVERTISED_LISTENERS", "kafka-secure")
    assert set(bound) == set(protocols())
    assert {name: port for name, (_, port) in advertised.items()} == {
        name: bound[name][1] for name in advertised
    }
    controller, inter_broker = (
        env["KAFKA_CONTROLLER_LISTENER_NAMES"],
        env["KAFKA_INTER_BROKER_LISTENER_NAME"],
    )
    assert controller in bound
    assert controller not in advertised
    assert inter_broker in advertised
    assert env["KAFKA_SASL_MECHANISM_CONTROLLER_PROTOCOL"] in mechanisms(controller)
    assert env["KAFKA_SASL_MECHANISM_INTER_BROKER_PROTOCOL"] in mechanisms(inter_broker)
    assert all(protocol.startswith("SASL_") for protocol in protocols().values())


def test_every_sasl_listener_has_its_logins() -> None:
    sections = broker_jaas()
    for listener in protocols():
        section = sections.get(f"{listener.lower()}.KafkaServer")
        assert section is not None, f"no JAAS section for the listener {listener}"
        assert [LOGIN_MODULES[m] for m in mechanisms(listener)] == [section.module]


def test_the_broker_itself_is_the_only_super_user() -> None:
    env = environment("kafka-secure")
    own = [
        broker_jaas()[f"{env[v].lower()}.KafkaServer"]
        for v in ("KAFKA_CONTROLLER_LISTENER_NAMES", "KAFKA_INTER_BROKER_LISTENER_NAME")
    ]
    for login in own:
        user, password = login.options["username"], login.options["password"]
        assert login.options[f"user_{user}"] == password
    assert env["KAFKA_SUPER_USERS"] == f"User:{own[0].options['username']}"
    assert env["KAFKA_AUTHORIZER_CLASS_NAME"].endswith(".StandardAuthorizer")
    assert env["KAFKA_ALLOW_EVERYONE_IF_NO_ACL_FOUND"] == "false"
    assert env["KAFKA_AUTO_CREATE_TOPICS_ENABLE"] == "false"


def test_admin_tools_log_in_on_the_broker_listener() -> None:
    """The healthcheck and kafka-secure-setup use admin.properties on the inter-broker listener."""
    env = environment("kafka-secure")
    listener = env["KAFKA_INTER_BROKER_LISTENER_NAME"]
    host, port = listeners("KAFKA_ADVERTISED_LISTENERS", "kafka-secure")[listener]
    check = argv(service("kafka-secure")["healthcheck"]["test"])
    config = check[check.index("--command-config") + 1]
    assert check[check.index("--bootstrap-server") + 1] == f"localhost:{port}"
    assert f"--bootstrap-server {host}:{port} --command-config {config}" in shell(
        "kafka-secure-setup"
    )
    admin = properties(host_file("kafka-secure", config))
    assert host_file("kafka-secure-setup", config) == host_file("kafka-secure", config)
    assert admin["security.protocol"] == protocols()[listener]
    assert admin["sasl.mechanism"] in mechanisms(listener)
    login = broker_jaas()[f"{listener.lower()}.KafkaServer"].options
    assert (
        f'username="{login["username"]}" password="{login["password"]}"'
        in admin["sasl.jaas.config"]
    )


def test_broker_keystore_is_the_one_certs_makes() -> None:
    """The image reads KAFKA_SSL_KEYSTORE_FILENAME and the two credentials files under
    /etc/kafka/secrets; kafka-secure-certs writes them into the volume mounted there."""
    env = environment("kafka-secure")
    made = shell("kafka-secure-certs")
    keystore = volume_path(
        "kafka-secure",
        f"/etc/kafka/secrets/{env['KAFKA_SSL_KEYSTORE_FILENAME']}",
        "kafka-secure-certs",
    )
    assert env["KAFKA_SSL_KEYSTORE_TYPE"] == "PKCS12"
    out = re.escape(f"-out {keystore}")
    assert re.search(rf'openssl pkcs12 -export .*-passout "pass:\$KEYSTORE_PASSWORD" {out}\n', made)
    for variable in ("KAFKA_SSL_KEYSTORE_CREDENTIALS", "KAFKA_SSL_KEY_CREDENTIALS"):
        path = volume_path(
            "kafka-secure", f"/etc/kafka/secrets/{env[variable]}", "kafka-secure-certs"
        )
        assert f"printf '%s' \"$KEYSTORE_PASSWORD\" > {path}\n" in made
    assert depends_on("kafka-secure") == {"kafka-secure-certs": "service_completed_successfully"}


def test_broker_certificate_names_every_tls_address() -> None:
    names = re.search(r"subjectAltName=([^\\']+)", shell("kafka-secure-certs"))
    assert names
    covered = {entry.split(":", 1)[1] for entry in names.group(1).split(",")}
    advertised = listeners("KAFKA_ADVERTISED_LISTENERS", "kafka-secure")
    tls = {host for name, (host, _) in advertised.items() if protocols()[name].endswith("SSL")}
    assert tls
    assert tls <= covered


def test_secure_adapter_logs_in_with_scram_over_tls() -> None:
    settings = secure_settings()
    properties = client_file()
    [address] = settings.bootstrap_servers.split(",")
    advertised = listeners("KAFKA_ADVERTISED_LISTENERS", "kafka-secure")
    [listener] = [name for name, where in advertised.items() if where == host_port(address)]
    assert protocols()[listener] == properties["security.protocol"] == "SASL_SSL"
    assert properties["sasl.mechanism"] in mechanisms(listener)
    assert properties["sasl.mechanism"].startswith("SCRAM-")


def test_secure_adapter_trusts_the_ca_certs_makes() -> None:
    ca = client_file()["ssl.ca.location"]
    assert f"cp ca.pem {volume_path('adapter-secure', ca, 'kafka-secure-certs')}\n" in shell(
        "kafka-secure-certs"
    )


def test_setup_creates_the_adapters_scram_user() -> None:
    properties = client_file()
    mechanism, user, password = (
        properties[k] for k in ("sasl.mechanism", "sasl.username", "sasl.password")
    )
    made = shell("kafka-secure-setup")
    assert (
        f"--entity-type users --entity-name {user} --add-config '{mechanism}=[password={password}]'"
        in made
    )
    assert f"--allow-principal User:{user} " in made


def granted_acls(text: str) -> set[Acl]:
    """The rules of every `acl ...` line (kafka-acls.sh --add arguments) of a script."""
    found = set()
    for line in (line for line in text.splitlines() if line.startswith("acl ")):
        words = shlex.split(line)[1:]
        kinds = {"--topic": "topic", "--group": "group", "--transactional-id": "transactional-id"}
        [resource] = [kinds[w] for w in words if w in kinds] or (
            ["cluster"] if "--cluster" in words else []
        )
        name = words[words.index(f"--{resource}") + 1] if resource != "cluster" else ""
        pattern = (
            words[words.index("--resource-pattern-type") + 1]
            if "--resource-pattern-type" in words
            else "literal"
        )
        operations = frozenset(words[i + 1] for i, w in enumerate(words) if w == "--operation")
        found.add(Acl(resource, name, pattern, operations))
    return found


def test_setup_grants_exactly_the_documented_acls() -> None:
    settings = secure_settings()
    management = durable_environment("adapter-secure").get(env_name("topic_management"), "auto")
    assert granted_acls(shell("kafka-secure-setup")) == documented_acls(
        settings.topic_prefix, management
    )
    assert settings.topic_prefix not in {
        adapter_settings().topic_prefix,
        cluster_settings().topic_prefix,
    }


def test_secure_start_order() -> None:
    assert depends_on("kafka-secure-setup") == {"kafka-secure": "service_healthy"}
    assert depends_on("adapter-secure") == {
        "kafka-secure-setup": "service_completed_successfully",
        "minio-init": "service_completed_successfully",
    }
    for one_shot in ("kafka-secure-certs", "kafka-secure-setup"):
        assert service(one_shot)["restart"] == "no"


def test_secure_ports_are_apart() -> None:
    assert list(published("adapter-secure")) == [secure_settings().port]
    taken = {*published("adapter").values(), *published("adapter-cluster").values()}
    assert not taken & set(published("adapter-secure").values())
    host, port = listeners("KAFKA_ADVERTISED_LISTENERS", "kafka-secure")["EXTERNAL"]
    assert host == "localhost"
    assert published("kafka-secure") == {port: port}
    assert port not in published("kafka").values()


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
