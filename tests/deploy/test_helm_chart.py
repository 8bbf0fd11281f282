"""The Helm chart lints, renders manifests that Kubernetes' own schemas accept in strict mode,
and wires every setting, file, probe, port and label the server needs."""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from kubernetes_validate.utils import SchemaNotFoundError

from adapter.cli import build_parser
from adapter.config import ConfigError, Settings, env_name, load
from devstack import helm as helm_tool
from tests.deployment import known_variables

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "durable-kafka"
SECURED = CHART / "examples" / "values-secured.yaml"
VALUES: dict[str, tuple[Path, ...]] = {"default": (), "secured": (SECURED,)}
RELEASE = "durable-kafka"
NAMESPACE = "streams"
# The oldest Kubernetes the chart supports (Chart.yaml's kubeVersion), and the newest whose
# schemas kubernetes-validate ships.
KUBERNETES_VERSIONS = ("1.30.0", "1.37.0")
# Custom resources: Kubernetes' schemas do not have them, so they are skipped by name there and
# checked below instead (test_service_monitor_scrapes_the_ops_listener).
NOT_IN_KUBERNETES_SCHEMAS = frozenset({"ServiceMonitor"})
# What kubelet puts in $(POD_IP) and $(POD_NAME), for loading the environment as Settings.
POD_FIELDS = {"POD_IP": "10.1.2.3", "POD_NAME": "durable-kafka-5d9c7b6f4-x2x8q"}

Manifest = dict[str, Any]


@pytest.fixture(scope="module")
def helm() -> Path:
    if not helm_tool.is_cached():
        pytest.fail("helm is not installed: run `make deps`")
    return helm_tool.binary()


def run_helm(helm: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(helm), *args], capture_output=True, text=True, check=False, timeout=120
    )


def template_args(values: Sequence[Path], version: str, chart: Path = CHART) -> list[str]:
    files = [arg for path in values for arg in ("-f", str(path))]
    return ["template", RELEASE, str(chart), "-n", NAMESPACE, "--kube-version", version, *files]


def render(
    helm: Path, values: Sequence[Path], version: str, chart: Path = CHART, *sets: str
) -> list[Manifest]:
    result = run_helm(helm, *template_args(values, version, chart), *sets)
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


@cache
def rendered(helm: Path, name: str) -> tuple[Manifest, ...]:
    return tuple(render(helm, VALUES[name], KUBERNETES_VERSIONS[-1]))


def violations(manifests: list[Manifest], version: str) -> list[str]:
    """Every way a manifest breaks Kubernetes' schema of `version`; an unknown kind is one."""
    found = []
    for manifest in manifests:
        if manifest["kind"] in NOT_IN_KUBERNETES_SCHEMAS:
            continue
        where = f"{manifest['kind']}/{manifest['metadata']['name']}"
        try:
            kubernetes_validate.validate(manifest, version, strict=True)
        except kubernetes_validate.ValidationError as error:
            path = ".".join(str(part) for part in error.path)
            found.append(f"{where}: {path}: {error.message}")
        except SchemaNotFoundError as error:
            found.append(f"{where}: {error.message}")
    return found


def one(manifests: Sequence[Manifest], kind: str) -> Manifest:
    found = [m for m in manifests if m["kind"] == kind]
    assert len(found) == 1, f"expected one {kind}, got {len(found)}"
    return found[0]


def pod(manifests: Sequence[Manifest]) -> dict[str, Any]:
    spec: dict[str, Any] = one(manifests, "Deployment")["spec"]["template"]["spec"]
    return spec


def container(manifests: Sequence[Manifest]) -> dict[str, Any]:
    containers = pod(manifests)["containers"]
    assert len(containers) == 1
    found: dict[str, Any] = containers[0]
    return found


def environment(manifests: Sequence[Manifest]) -> dict[str, str]:
    """The container's variables as the process sees them: $(VAR) expanded, Secret references
    as placeholders."""
    env: dict[str, str] = {}
    for entry in container(manifests)["env"]:
        if "value" in entry:
            value = re.sub(r"\$\((\w+)\)", lambda m: env[m.group(1)], entry["value"])
        else:
            source = entry["valueFrom"]
            value = POD_FIELDS[entry["name"]] if "fieldRef" in source else "from-a-secret"
        env[entry["name"]] = value
    return env


def settings(manifests: Sequence[Manifest]) -> Settings:
    """The settings the container loads; its client.properties (mounted from a Secret) is read
    from the Strimzi example's Secret, which the secured values name."""
    env = environment(manifests)
    variable = env_name("kafka_client_file")
    if variable in env:
        env[variable] = str(_example_client_properties())
    return load(None, env, {})


@functools.cache
def _example_client_properties() -> Path:
    secret = yaml.safe_load(
        (CHART / "examples" / "strimzi" / "credentials-secret.yaml").read_text()
    )
    key = yaml.safe_load(SECURED.read_text())["kafka"]["clientProperties"]["key"]
    path = Path(tempfile.mkdtemp()) / "client.properties"
    path.write_text(secret["stringData"][key])
    return path


def port(manifests: Sequence[Manifest], name: str) -> int:
    ports = {p["name"]: int(p["containerPort"]) for p in container(manifests)["ports"]}
    assert name in ports, f"no container port named {name!r}: {ports}"
    return ports[name]


def mounts(manifests: Sequence[Manifest]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(mount path, volume) of every volume the container mounts."""
    volumes = {volume["name"]: volume for volume in pod(manifests)["volumes"]}
    for mount in container(manifests)["volumeMounts"]:
        yield mount["mountPath"], volumes[mount["name"]]


def services(manifests: Sequence[Manifest]) -> dict[str, Manifest]:
    """Each Service by its component label (`api`, `ops`)."""
    found = [m for m in manifests if m["kind"] == "Service"]
    return {s["metadata"]["labels"].get("app.kubernetes.io/component", ""): s for s in found}


# --- helm lint, helm template and Kubernetes' schemas ---------------------------------------


@pytest.mark.parametrize("name", VALUES)
def test_chart_lints_strictly(helm: Path, name: str) -> None:
    files = [arg for path in VALUES[name] for arg in ("-f", str(path))]
    result = run_helm(helm, "lint", "--strict", str(CHART), *files)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize("name", VALUES)
def test_every_manifest_is_valid_kubernetes(helm: Path, name: str, version: str) -> None:
    manifests = render(helm, VALUES[name], version)
    assert violations(manifests, version) == []


def test_default_and_secured_render_every_resource(helm: Path) -> None:
    basics = {"Deployment", "Service", "PodDisruptionBudget", "Secret", "ServiceAccount"}
    assert basics <= {m["kind"] for m in rendered(helm, "default")}
    secured = {m["kind"] for m in rendered(helm, "secured")}
    assert basics - {"Secret"} | {"HorizontalPodAutoscaler", "ServiceMonitor"} <= secured


def test_oldest_version_is_the_charts_minimum() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["kubeVersion"] == f">={KUBERNETES_VERSIONS[0]}-0"


def broken_chart(tmp_path: Path, template: str, old: str, new: str) -> Path:
    copy = tmp_path / "chart"
    shutil.copytree(CHART, copy)
    path = copy / "templates" / template
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))
    return copy


def test_a_misspelled_field_fails_validation(helm: Path, tmp_path: Path) -> None:
    chart = broken_chart(tmp_path, "deployment.yaml", "readinessProbe:", "readinesProbe:")
    version = KUBERNETES_VERSIONS[0]
    found = violations(render(helm, (), version, chart), version)
    assert len(found) == 1
    assert "'readinesProbe' was unexpected" in found[0]


def test_a_value_of_the_wrong_type_fails_validation(helm: Path, tmp_path: Path) -> None:
    chart = broken_chart(tmp_path, "pdb.yaml", "maxUnavailable: {{", "maxUnavailable: [{{")
    chart_pdb = chart / "templates" / "pdb.yaml"
    chart_pdb.write_text(chart_pdb.read_text().replace(".maxUnavailable }}", ".maxUnavailable }}]"))
    version = KUBERNETES_VERSIONS[0]
    found = violations(render(helm, (), version, chart), version)
    assert [line.split(":")[0] for line in found] == [f"PodDisruptionBudget/{RELEASE}"]


def test_a_kind_without_a_schema_fails_validation(helm: Path, tmp_path: Path) -> None:
    chart = broken_chart(
        tmp_path, "pdb.yaml", "kind: PodDisruptionBudget", "kind: DisruptionBudget"
    )
    version = KUBERNETES_VERSIONS[0]
    found = violations(render(helm, (), version, chart), version)
    assert len(found) == 1
    assert "Couldn't find schema for kind DisruptionBudget" in found[0]


# --- the Deployment and the server's settings -----------------------------------------------


@pytest.mark.parametrize("name", VALUES)
def test_every_variable_is_a_setting_and_loads(helm: Path, name: str) -> None:
    manifests = rendered(helm, name)
    env = environment(manifests)
    unknown = {var for var in env if var.startswith("DURABLE_KAFKA_")} - known_variables()
    assert unknown == set()
    try:
        loaded = settings(manifests)
    except ConfigError as error:
        pytest.fail(f"{name}: {error}")
    assert loaded.port == port(manifests, "https" if name == "secured" else "http")
    assert loaded.advertised_url.startswith("https://" if name == "secured" else "http://")
    assert loaded.advertised_url == f"{loaded.advertised_url.split(':')[0]}://10.1.2.3:4437"


def test_secured_values_reach_the_server(helm: Path) -> None:
    values = yaml.safe_load(SECURED.read_text())
    env = environment(rendered(helm, "secured"))
    loaded = settings(rendered(helm, "secured"))
    assert loaded.topic_prefix == values["kafka"]["topicPrefix"]
    assert loaded.bootstrap_servers == values["kafka"]["bootstrapServers"]
    assert env["DURABLE_KAFKA_TOPIC_MANAGEMENT"] == values["kafka"]["topicManagement"]
    assert (loaded.auth_mode, loaded.auth_jwt_issuer) == ("jwt", values["auth"]["jwt"]["issuer"])
    assert (loaded.replication_factor, loaded.min_insync_replicas) == (3, 2)
    assert {"DURABLE_KAFKA_TLS_CERT_FILE", "DURABLE_KAFKA_TLS_KEY_FILE"} <= set(env)
    assert "DURABLE_KAFKA_TLS_CLIENT_CA_FILE" in env
    assert "DURABLE_KAFKA_KAFKA_CLIENT_FILE" in env


@pytest.mark.parametrize("name", VALUES)
def test_every_file_setting_names_a_mounted_file(helm: Path, name: str) -> None:
    manifests = rendered(helm, name)
    files = {var: path for var, path in environment(manifests).items() if var.endswith("_FILE")}
    assert files, "no file setting"
    by_dir = dict(mounts(manifests))
    for var, path in files.items():
        directory, _, file = path.rpartition("/")
        assert directory in by_dir, f"{var}: nothing is mounted at {directory}"
        items = by_dir[directory]["secret"].get("items")
        assert items is None or file in {item["path"] for item in items}, f"{var}: no {file}"


def test_secured_client_properties_name_mounted_files(helm: Path) -> None:
    """The example client.properties' ssl.* files are in the Secrets the values mount."""
    secret = yaml.safe_load(
        (CHART / "examples" / "strimzi" / "credentials-secret.yaml").read_text()
    )
    values = yaml.safe_load(SECURED.read_text())
    assert secret["metadata"]["name"] == values["kafka"]["clientProperties"]["existingSecret"]
    lines = secret["stringData"][values["kafka"]["clientProperties"]["key"]].splitlines()
    pairs = dict(line.split("=", 1) for line in lines if line.strip())
    paths = [value for key, value in pairs.items() if key.endswith(".location")]
    assert paths
    mounted = dict(mounts(rendered(helm, "secured")))
    for path in paths:
        assert path.rpartition("/")[0] in mounted, f"{path} is not in a mounted Secret"


def test_probes_ask_the_ops_listener(helm: Path) -> None:
    manifests = rendered(helm, "default")
    spec = container(manifests)
    ops = settings(manifests).ops_address
    assert ops == ("0.0.0.0", port(manifests, "ops"))
    assert spec["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "ops"}
    assert spec["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "ops"}
    assert spec["startupProbe"]["httpGet"] == {"path": "/healthz", "port": "ops"}


@pytest.mark.parametrize("name", VALUES)
def test_grace_period_outlasts_a_stop(helm: Path, name: str) -> None:
    """SIGTERM comes after the preStop sleep; then requests drain, and the write slots are
    handed over and the clients closed within 3 Kafka timeouts (as `serve --workers` allows)."""
    manifests = rendered(helm, name)
    loaded = settings(manifests)
    sleep = container(manifests)["lifecycle"]["preStop"]["sleep"]["seconds"]
    stop_s = sleep + (loaded.drain_timeout_ms + 3 * loaded.kafka_timeout_ms) / 1000
    assert pod(manifests)["terminationGracePeriodSeconds"] > stop_s


def test_a_grace_period_shorter_than_a_stop_is_refused(helm: Path) -> None:
    args = template_args((), KUBERNETES_VERSIONS[-1])
    result = run_helm(helm, *args, "--set", "terminationGracePeriodSeconds=30")
    assert result.returncode != 0
    assert "terminationGracePeriodSeconds 30 is shorter than a stop can take" in result.stderr


@pytest.mark.parametrize(
    ("setting", "refusal"),
    [
        ("auth.mode=off", "auth.offBeyondLoopback=true"),
        ("coldTier.backend=fs", "coldTier.fs.claimName"),
        ("tls.enabled=true", "tls.existingSecret"),
        ("kafka.topicManagement=manual", "topicManagement"),
    ],
)
def test_values_that_cannot_work_are_refused(helm: Path, setting: str, refusal: str) -> None:
    result = run_helm(helm, *template_args((), KUBERNETES_VERSIONS[-1]), "--set", setting)
    assert result.returncode != 0
    assert refusal in result.stderr


def dockerfile_uid() -> int:
    found = re.search(r"useradd .*--uid (\d+)", (ROOT / "Dockerfile").read_text())
    assert found
    return int(found.group(1))


def test_runs_the_image_as_its_own_user_read_only(helm: Path) -> None:
    manifests = rendered(helm, "default")
    context = pod(manifests)["securityContext"]
    assert context["runAsNonRoot"] is True
    assert context["runAsUser"] == dockerfile_uid()
    own = container(manifests)["securityContext"]
    assert own["readOnlyRootFilesystem"] is True
    assert own["allowPrivilegeEscalation"] is False
    assert own["capabilities"]["drop"] == ["ALL"]
    assert "command" not in container(manifests), "the image's entrypoint is durable-kafka"
    assert build_parser().parse_args(container(manifests)["args"]).command == "serve"


def test_the_servers_working_files_are_on_writable_volumes(helm: Path) -> None:
    """The image works in /app; the catalog and mount indexes write under it."""
    manifests = rendered(helm, "default")
    loaded = settings(manifests)
    writable = {path for path, volume in mounts(manifests) if "emptyDir" in volume}
    for relative in (loaded.catalog_dir, loaded.mount_index_dir):
        assert any(f"/app/{relative}".startswith(f"{path}/") for path in writable), relative


@pytest.mark.parametrize("name", VALUES)
def test_selectors_find_the_pods(helm: Path, name: str) -> None:
    manifests = rendered(helm, name)
    deployment = one(manifests, "Deployment")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    for service in services(manifests).values():
        assert service["spec"]["selector"].items() <= labels.items()
    budget = one(manifests, "PodDisruptionBudget")["spec"]["selector"]["matchLabels"]
    assert budget.items() <= labels.items()
    for scaler in (m for m in manifests if m["kind"] == "HorizontalPodAutoscaler"):
        target = scaler["spec"]["scaleTargetRef"]
        assert (target["kind"], target["name"]) == ("Deployment", deployment["metadata"]["name"])
        assert "replicas" not in deployment["spec"], "the autoscaler owns the replica count"


@pytest.mark.parametrize("name", VALUES)
def test_service_ports_are_container_ports(helm: Path, name: str) -> None:
    manifests = rendered(helm, name)
    for service in services(manifests).values():
        for entry in service["spec"]["ports"]:
            assert entry["port"] == port(manifests, entry["targetPort"])


def test_service_monitor_scrapes_the_ops_listener(helm: Path) -> None:
    """Checked here, the Prometheus Operator's schema not being one of Kubernetes'."""
    manifests = rendered(helm, "secured")
    monitor = one(manifests, "ServiceMonitor")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    service = services(manifests)["ops"]
    assert (
        monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    )
    [endpoint] = monitor["spec"]["endpoints"]
    assert (endpoint["path"], endpoint["scheme"]) == ("/metrics", "http")
    by_name = {entry["name"]: entry for entry in service["spec"]["ports"]}
    assert by_name[endpoint["port"]]["targetPort"] == "ops"
    assert "ServiceMonitor" not in {m["kind"] for m in rendered(helm, "default")}


# --- completeness: the ops Service, checksums, the values' schema, the test hook ------------


@pytest.mark.parametrize("name", VALUES)
def test_the_ops_listener_has_a_service_of_its_own(helm: Path, name: str) -> None:
    """Metrics and debug answers are not for the API's clients: the API Service (what an
    Ingress or a client reaches) does not carry the ops port."""
    manifests = rendered(helm, name)
    by_component = services(manifests)
    assert set(by_component) == {"api", "ops"}
    api_ports = {p["targetPort"] for p in by_component["api"]["spec"]["ports"]}
    ops_ports = {p["targetPort"] for p in by_component["ops"]["spec"]["ports"]}
    assert (api_ports, ops_ports) == ({"https" if name == "secured" else "http"}, {"ops"})
    for monitor in (m for m in manifests if m["kind"] == "ServiceMonitor"):
        selector = monitor["spec"]["selector"]["matchLabels"].items()
        assert selector <= by_component["ops"]["metadata"]["labels"].items()
        assert not selector <= by_component["api"]["metadata"]["labels"].items()


def pod_annotations(manifests: Sequence[Manifest]) -> dict[str, str]:
    found: dict[str, str] = one(manifests, "Deployment")["spec"]["template"]["metadata"][
        "annotations"
    ]
    return found


@pytest.mark.parametrize(
    "change",
    [
        "tls.existingSecret=another-tls",
        "tls.clientCA.existingSecret=another-ca",
        "kafka.clientProperties.existingSecret=another-client",
        "coldTier.s3.existingSecret=another-s3",
    ],
)
def test_naming_another_existing_secret_rolls_the_pods(helm: Path, change: str) -> None:
    """Each Secret the pods mount or read, the chart's own and the existing ones the values
    name, is in the pod template's checksums: pointing the values elsewhere rolls the pods."""
    args = template_args((SECURED,), KUBERNETES_VERSIONS[-1])
    before = pod_annotations(rendered(helm, "secured"))
    result = run_helm(helm, *args, "--set", change)
    assert result.returncode == 0, result.stderr
    after = pod_annotations([d for d in yaml.safe_load_all(result.stdout) if d])
    changed = {key for key in before if before[key] != after.get(key)}
    assert changed == {"checksum/existing-secrets"}


def test_every_mounted_secret_is_under_a_checksum(helm: Path) -> None:
    """The Secrets the chart renders under `checksum/secrets`; every other one the pod uses
    named in `checksum/existing-secrets`' input (`durable-kafka.existingSecrets`)."""
    manifests = rendered(helm, "secured")
    rendered_names = {m["metadata"]["name"] for m in manifests if m["kind"] == "Secret"}
    used = {volume["secret"]["secretName"] for _, volume in mounts(manifests) if "secret" in volume}
    used |= {
        entry["valueFrom"]["secretKeyRef"]["name"]
        for entry in container(manifests)["env"]
        if "secretKeyRef" in entry.get("valueFrom", {})
    }
    template = (CHART / "templates" / "_helpers.tpl").read_text()
    existing = template.split('define "durable-kafka.existingSecrets"')[1].split("{{- end -}}\n\n")[
        0
    ]
    values = yaml.safe_load(SECURED.read_text())
    named = {
        values["tls"]["existingSecret"],
        values["tls"]["clientCA"]["existingSecret"],
        values["kafka"]["clientProperties"]["existingSecret"],
        values["coldTier"]["s3"]["existingSecret"],
        *(mount["secretName"] for mount in values["kafka"]["secretMounts"]),
    }
    assert used - rendered_names == named
    for path in ("tls.existingSecret", "clientCA", "clientProperties", "s3", "secretMounts"):
        assert path.split(".")[0] in existing, f"{path} is not hashed"
    assert {"checksum/secrets", "checksum/existing-secrets"} <= pod_annotations(manifests).keys()


@pytest.mark.parametrize(
    ("setting", "refusal"),
    [
        ("replicaCount=three", "replicaCount"),
        ("service.port=0", "service.port"),
        ("ingress.enabled=yes", "ingress.enabled"),
        ("kafka.writeSlots=-1", "kafka.writeSlots"),
    ],
)
def test_values_of_the_wrong_shape_are_refused_by_the_schema(
    helm: Path, setting: str, refusal: str
) -> None:
    result = run_helm(helm, *template_args((), KUBERNETES_VERSIONS[-1]), "--set", setting)
    assert result.returncode != 0
    assert "values don't meet the specifications of the schema" in result.stderr
    assert refusal.rsplit(".", 1)[-1] in result.stderr


def test_a_misspelled_value_is_refused_by_the_schema(helm: Path) -> None:
    result = run_helm(helm, *template_args((), KUBERNETES_VERSIONS[-1]), "--set", "replicas=2")
    assert result.returncode != 0
    assert "replicas" in result.stderr


@pytest.mark.parametrize("name", VALUES)
def test_helm_test_calls_the_api_service(helm: Path, name: str) -> None:
    manifests = rendered(helm, name)
    [hook] = [m for m in manifests if m["kind"] == "Pod"]
    assert hook["metadata"]["annotations"]["helm.sh/hook"] == "test"
    [step] = hook["spec"]["containers"]
    api = services(manifests)["api"]
    port = api["spec"]["ports"][0]["port"]
    url = f"{api['metadata']['name']}.{NAMESPACE}.svc:{port}/readyz"
    assert any(url in arg for arg in step["args"]), step["args"]


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_the_ingress_is_valid_and_its_host_is_answered_for(helm: Path, version: str) -> None:
    host = "streams.example.com"
    sets = ("--set", "ingress.enabled=true", "--set", f"ingress.host={host}")
    manifests = render(helm, (SECURED,), version, CHART, *sets, "--set", "ingress.tlsSecretName=t")
    assert violations(manifests, version) == []
    rule = one(manifests, "Ingress")["spec"]["rules"][0]
    backend = rule["http"]["paths"][0]["backend"]["service"]
    assert backend == {
        "name": services(manifests)["api"]["metadata"]["name"],
        "port": {"name": "https"},
    }
    assert host in settings(manifests).allowed_hosts.split(",")


def test_an_ingress_without_a_host_is_refused(helm: Path) -> None:
    args = template_args((), KUBERNETES_VERSIONS[-1])
    result = run_helm(helm, *args, "--set", "ingress.enabled=true")
    assert result.returncode != 0
    assert "ingress.enabled needs ingress.host" in result.stderr
