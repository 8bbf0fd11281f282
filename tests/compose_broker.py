"""docker-compose.yml's `kafka-secure` broker run from Kafka's Maven jars, without Docker.

Its KAFKA_* variables become server.properties as the apache/kafka image makes them (the
image's `configure` script adds the keystore's location and passwords from the files it
names; its KafkaDockerWrapper turns each variable into a key: `KAFKA_` dropped, lower case,
`_` to `.`, `___` to `-`, `__` to `_`). What only Docker provides is mapped onto loopback: the
service's host name becomes `localhost` and each listener gets a free port. The certificates
come from `kafka-secure-certs`' own script, its volumes being folders here.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from devstack import kafka
from devstack.process import ServiceProcess, free_port, run_checked
from tests.services import DISCARD_S

JAAS_OPTION = "-Djava.security.auth.login.config="
START_TIMEOUT_S = 90.0


def property_key(variable: str) -> str:
    """The server.properties key of a KAFKA_* variable, as the image derives it."""
    key = variable.removeprefix("KAFKA_").lower().replace("_", ".")
    return key.replace("...", "-").replace("..", "_")


def make_certificates(
    script: str, environment: Mapping[str, str], volumes: Mapping[str, Path]
) -> None:
    """Run the certs service's script with each volume's mount point (`volumes`' keys) moved
    to a folder."""
    for target, folder in volumes.items():
        folder.mkdir(parents=True, exist_ok=True)
        script = re.sub(rf"(?<![\w/]){re.escape(target)}(?=[/\s]|$)", str(folder), script)
    subprocess.run(
        ["sh", "-ec", script],
        env={**os.environ, **environment},
        capture_output=True,
        check=True,
        timeout=120,
    )


def server_properties(
    env: Mapping[str, str], secrets: Path, ports: Mapping[int, int], home: Path
) -> str:
    """server.properties of the service's variables, its host and ports mapped to loopback."""
    values = {key: value for key, value in env.items() if key.startswith("KAFKA_")}
    values.pop("KAFKA_OPTS", None)  # JVM options, not a property
    values["KAFKA_SSL_KEYSTORE_LOCATION"] = str(secrets / values["KAFKA_SSL_KEYSTORE_FILENAME"])
    values["KAFKA_SSL_KEYSTORE_PASSWORD"] = (
        secrets / values["KAFKA_SSL_KEYSTORE_CREDENTIALS"]
    ).read_text()
    values["KAFKA_SSL_KEY_PASSWORD"] = (secrets / values["KAFKA_SSL_KEY_CREDENTIALS"]).read_text()
    values["KAFKA_LOG_DIRS"] = str(home / "logs")
    lines = [f"{property_key(key)}={_on_loopback(value, ports)}" for key, value in values.items()]
    return "\n".join(lines) + "\n"


def _on_loopback(value: str, ports: Mapping[int, int]) -> str:
    def moved(match: re.Match[str]) -> str:
        return f"{match.group(1)}:{ports[int(match.group(2))]}"

    value = value.replace("kafka-secure:", "localhost:")
    return re.sub(r"(//[\w.-]*|@[\w.-]+|^[\w.-]+):(\d+)\b", moved, value)


@contextlib.contextmanager
def running(
    env: Mapping[str, str],
    secrets: Path,
    jaas: Path,
    home: Path,
    ready: Callable[[Mapping[str, str]], bool],
) -> Iterator[dict[str, str]]:
    """Start the broker of the variables `env` with its keystore in `secrets`; yield each
    listener's loopback address once `ready(addresses)` holds; stop it on the way out."""
    bound = re.findall(r"(\w+)://[\w.-]*:(\d+)", env["KAFKA_LISTENERS"])
    ports = {int(port): free_port() for _, port in bound}
    addresses = {name: f"localhost:{ports[int(port)]}" for name, port in bound}
    config = home / "server.properties"
    config.write_text(server_properties(env, secrets, ports, home))
    (home / "log4j2.properties").write_text(kafka.LOG4J2)
    node = kafka.KafkaNode(home=home)
    cluster = env["CLUSTER_ID"]
    run_checked(
        kafka.java_argv(
            node, "kafka.tools.StorageTool", "format", "-t", cluster, "-c", str(config)
        ),
        "formatting the secure broker's storage",
    )
    process = ServiceProcess("kafka-secure", home)
    java = kafka.java_argv(node, "kafka.Kafka", str(config))
    process.spawn([java[0], f"{JAAS_OPTION}{jaas}", *java[1:]])
    try:
        process.wait_ready(lambda: ready(addresses), START_TIMEOUT_S)
        yield addresses
    finally:
        process.stop(DISCARD_S)
