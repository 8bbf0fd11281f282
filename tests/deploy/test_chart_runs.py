"""The chart's pod, run as the kubelet runs it (tests/deploy/kubelet.py), answers the cluster:
its probes where the chart points them, API calls through every name of its Service (and its
Ingress host), and a second replica joining. Default and secured values, on the real broker and
MinIO; the Secrets the values name as existing are made here, as cert-manager or an operator
would."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import pytest
import yaml
from aiohttp import web

from adapter.auth.static_tokens import digest
from devstack.process import free_port
from tests.certificates import TestCA
from tests.cluster import until_read
from tests.deploy import kubelet
from tests.deploy.kubelet import Manifest, Pod
from tests.deploy.test_helm_chart import (
    KUBERNETES_VERSIONS,
    NAMESPACE,
    SECURED,
    VALUES,
    helm,  # noqa: F401 - the fixture
    one,
    render,
    services,
)
from tests.services import S3Server
from tests.tokens import AUDIENCE, ISSUER, Signer

TOKEN = "chart-contract-token"
INGRESS_HOST = "streams.example.test"
TEXT = {"Content-Type": "text/plain"}


def service_hosts(service: str) -> list[str]:
    """Every name a client in the cluster may call the Service by."""
    ns = NAMESPACE
    return [service, f"{service}.{ns}", f"{service}.{ns}.svc", f"{service}.{ns}.svc.cluster.local"]


@pytest.fixture
async def jwks_url() -> AsyncIterator[tuple[Signer, str]]:
    """An identity provider's JWKS endpoint, as the secured values' `auth.jwt.jwksUrl`."""
    signer = Signer()

    async def keys(_: web.Request) -> web.Response:
        return web.Response(text=signer.jwks(), content_type="application/json")

    app = web.Application()
    app.router.add_get("/jwks.json", keys)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield signer, f"http://127.0.0.1:{port}/jwks.json"
    finally:
        await runner.cleanup()


def overrides(
    name: str, kafka_bootstrap: str, s3: S3Server, unique: str, jwks: str
) -> dict[str, Any]:
    """What a user of the values sets for this cluster: its broker (one node), its S3, and
    credentials; the secured values' topics are made by the server here."""
    values: dict[str, Any] = {
        "kafka": {
            "bootstrapServers": kafka_bootstrap,
            "topicPrefix": f"chart{unique}.",
            "topicManagement": "auto",
            "partitions": 3,
            "replicationFactor": 1,
            "minInsyncReplicas": 1,
            "timeoutMs": 5000,
        },
        "coldTier": {
            "s3": {
                "bucket": f"chart-{unique}",
                "endpointUrl": s3.endpoint_url,
                "existingSecret": "s3-credentials",
            }
        },
        "ingress": {"enabled": True, "host": INGRESS_HOST},
    }
    if name == "default":
        tokens = [
            {"name": "app", "sha256": digest(TOKEN), "scopes": ["admin:*", "append:*", "read:*"]}
        ]
        values["auth"] = {"static": {"tokens": tokens}}
    else:
        values["auth"] = {"jwt": {"issuer": ISSUER, "audience": AUDIENCE, "jwksUrl": jwks}}
    return values


def provided_secrets(name: str, s3: S3Server, ca: TestCA, folder: Path) -> list[Manifest]:
    """The Secrets the values name as existing: S3 keys; for the secured values also the Kafka
    client's properties and CA (plaintext here: the session broker) and cert-manager's TLS
    Secret with the issuer's CA."""
    found = [
        kubelet.secret(
            "s3-credentials",
            {"access-key-id": s3.access_key_id, "secret-access-key": s3.secret_access_key},
        )
    ]
    if name == "secured":
        values = yaml.safe_load(SECURED.read_text())
        client = values["kafka"]["clientProperties"]
        [ca_mount] = values["kafka"]["secretMounts"]
        pair = ca.server("api")
        found += [
            kubelet.secret(
                client["existingSecret"], {client["key"]: "security.protocol=PLAINTEXT\n"}
            ),
            kubelet.secret(ca_mount["secretName"], {"ca.crt": ca.path.read_bytes()}),
            kubelet.secret(
                values["tls"]["existingSecret"],
                {
                    "tls.crt": pair.cert.read_bytes(),
                    "tls.key": pair.key.read_bytes(),
                    "ca.crt": ca.path.read_bytes(),
                },
            ),
        ]
    return found


async def probe(session: aiohttp.ClientSession, pod: Pod, spec: Mapping[str, Any]) -> int:
    """One probe as the kubelet sends it: httpGet on the pod's address and the named port."""
    get = spec["httpGet"]
    port = pod.ports[get["port"]] if isinstance(get["port"], str) else int(get["port"])
    scheme = get.get("scheme", "HTTP").lower()
    url = f"{scheme}://{pod.ip}:{port}{get['path']}"
    try:
        async with session.get(url, ssl=False) as reply:
            return reply.status
    except aiohttp.ClientError:
        return 0


async def until_probe_passes(
    session: aiohttp.ClientSession, pod: Pod, spec: Mapping[str, Any]
) -> None:
    """Within the probe's own budget (periodSeconds x failureThreshold), generously scaled
    for a loaded machine; an exited process fails at once."""
    for _ in range(600):
        if pod.process.poll() is not None:
            raise AssertionError(f"{pod.name} exited:\n{pod.log.read_text()}")
        if 200 <= await probe(session, pod, spec) < 400:
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"{pod.name}: {spec['httpGet']} never passed:\n{pod.log.read_text()}")


async def until_serving(session: aiohttp.ClientSession, pod: Pod, container: Manifest) -> None:
    """As the kubelet does: the startup probe, then readiness; liveness holds meanwhile."""
    await until_probe_passes(session, pod, container["startupProbe"])
    assert 200 <= await probe(session, pod, container["livenessProbe"]) < 400
    await until_probe_passes(session, pod, container["readinessProbe"])


async def helm_test(manifests: list[Manifest], pod: Pod) -> int:
    """`helm test`'s pod, its curl run here: the Service's name resolves to `pod` (curl's
    `--resolve`, as the cluster's DNS and the Service would route it)."""
    [hook] = [m for m in manifests if m["kind"] == "Pod"]
    [step] = hook["spec"]["containers"]
    url = urlsplit(step["args"][-1])
    assert url.hostname
    assert url.port
    resolve = ["--resolve", f"{url.hostname}:{url.port}:{pod.ip}"]
    curl = await asyncio.create_subprocess_exec(
        "curl", *resolve, *step["args"], stdout=asyncio.subprocess.DEVNULL
    )
    return await asyncio.wait_for(curl.wait(), 120)


async def until_slots_split(session: aiohttp.ClientSession, pods: list[Pod]) -> None:
    """Until the write slots are split between `pods` and each knows every slot's owner (as
    `/readyz` on the ops port says): a joining replica takes slots over, and writes to a slot
    changing owner meanwhile are answered 503 with Retry-After."""
    for _ in range(600):
        reports = []
        for pod in pods:
            async with session.get(f"{pod.url('ops')}/readyz") as reply:
                reports.append((await reply.json())["checks"]["ownership"])
        owned = sorted(int(slot) for report in reports for slot in report["owned_slots"])
        if all(r["unroutable_slots"] == [] and r["owned_slots"] for r in reports) and owned == list(
            range(reports[0]["slot_count"])
        ):
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"the slots were never split: {reports}")


@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", VALUES)
async def test_the_rendered_pod_serves_the_cluster(
    helm: Path,  # noqa: F811 - the fixture
    name: str,
    kafka_bootstrap: str,
    s3: S3Server,
    unique: str,
    tmp_path: Path,
    jwks_url: tuple[Signer, str],
) -> None:
    signer, jwks = jwks_url
    values_file = tmp_path / "cluster-values.yaml"
    values_file.write_text(yaml.safe_dump(overrides(name, kafka_bootstrap, s3, unique, jwks)))
    manifests = render(helm, (*VALUES[name], values_file), KUBERNETES_VERSIONS[-1])
    ca = TestCA(tmp_path / "ca")
    objects = kubelet.objects_data(manifests + provided_secrets(name, s3, ca, tmp_path))
    deployment = one(manifests, "Deployment")
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    service = services(manifests)["api"]
    ingress = one(manifests, "Ingress")
    [rule] = ingress["spec"]["rules"]
    scheme = "https" if name == "secured" else "http"
    tls: ssl.SSLContext | bool = True
    if name == "secured":
        tls = ssl.create_default_context(cafile=str(ca.path))
        tls.check_hostname = False  # connected by the pod's address; the Host header varies
    bearer = TOKEN if name == "default" else signer.token(["admin:*", "append:*", "read:*"])
    auth = {"Authorization": f"Bearer {bearer}"}
    [api_port] = [p for p in service["spec"]["ports"] if p["name"] == scheme]
    hosts = [*service_hosts(service["metadata"]["name"]), rule["host"]]

    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session:
        with kubelet.running_pod(deployment, objects, "durable-kafka-7c9f-a1", tmp_path) as a:
            await until_serving(session, a, container)
            base = a.url(api_port["targetPort"], scheme)
            statuses = {}
            for host in hosts:
                # A Service's clients send its name with the Service's port.
                headers = auth | TEXT | {"Host": f"{host}:{api_port['port']}"}
                url = f"{base}/v1/stream/{host.replace('.', '-')}"
                async with session.put(url, headers=headers, data=b"x", ssl=tls) as reply:
                    statuses[host] = (reply.status, await reply.text())
            assert {h: s for h, (s, _) in statuses.items() if s != 201} == {}, statuses
            assert await helm_test(manifests, a) == 0

            with kubelet.running_pod(deployment, objects, "durable-kafka-7c9f-b2", tmp_path) as b:
                await until_serving(session, b, container)
                assert 200 <= await probe(session, a, container["readinessProbe"]) < 400
                await until_slots_split(session, [a, b])
                host = {"Host": hosts[-2]}
                # Every replica reads what another wrote.
                created = f"{b.url(api_port['targetPort'], scheme)}/v1/stream/{hosts[0]}"

                async def read_created() -> tuple[int, bytes]:
                    async with session.get(
                        created, params={"offset": "-1"}, headers=auth | host, ssl=tls
                    ) as reply:
                        return reply.status, await reply.read()

                assert await until_read(read_created, (200, b"x")) == (200, b"x")
                # A write sent to the new replica is served or forwarded to its slot's owner
                # (over HTTPS at the owner's pod IP, verified against the issuer's CA).
                joined = f"{b.url(api_port['targetPort'], scheme)}/v1/stream/joined"
                async with session.put(joined, headers=auth | TEXT | host, ssl=tls) as reply:
                    assert reply.status == 201, await reply.text()
                for body in (b"1", b"2"):
                    async with session.post(
                        joined, headers=auth | TEXT | host, data=body, ssl=tls
                    ) as reply:
                        assert reply.status == 204, await reply.text()

                async def read() -> tuple[int, bytes]:
                    async with session.get(
                        f"{base}/v1/stream/joined",
                        params={"offset": "-1"},
                        headers=auth | host,
                        ssl=tls,
                    ) as reply:
                        return reply.status, await reply.read()

                # Through another pod: once its follower has applied the writes.
                assert await until_read(read, (200, b"12")) == (200, b"12")


async def openapi_answered(session: aiohttp.ClientSession, target: str) -> float:
    """`GET /openapi.json` answers a process counted, from one scrape of `target`'s metrics
    (a route nothing else asks: `/healthz` is the instance's own reach check)."""
    async with session.get(target) as reply:
        assert reply.status == 200, await reply.text()
        text = await reply.text()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("durable_kafka_http_requests_total{")
        and 'route="/openapi.json"' in line
        and 'method="GET"' in line
    )


@pytest.mark.timeout(300)
async def test_every_worker_of_a_pod_is_scraped_once(
    helm: Path,  # noqa: F811 - the fixture
    kafka_bootstrap: str,
    s3: S3Server,
    unique: str,
    tmp_path: Path,
    jwks_url: tuple[Signer, str],
) -> None:
    """With `workers: 2` the ServiceMonitor's endpoints reach each worker's own metrics (a
    target per process): requests spread over the workers add up to what was sent."""
    values = overrides("default", kafka_bootstrap, s3, unique, jwks_url[1])
    values |= {"workers": 2, "metrics": {"serviceMonitor": {"enabled": True}}}
    values_file = tmp_path / "cluster-values.yaml"
    values_file.write_text(yaml.safe_dump(values))
    manifests = render(helm, (values_file,), KUBERNETES_VERSIONS[-1])
    ca = TestCA(tmp_path / "ca")
    objects = kubelet.objects_data(manifests + provided_secrets("default", s3, ca, tmp_path))
    deployment = one(manifests, "Deployment")
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    endpoints = one(manifests, "ServiceMonitor")["spec"]["endpoints"]
    ops = {p["name"]: p["targetPort"] for p in services(manifests)["ops"]["spec"]["ports"]}
    [api_port] = [p for p in services(manifests)["api"]["spec"]["ports"] if p["name"] == "http"]
    sent = 24
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session:
        with kubelet.running_pod(deployment, objects, "durable-kafka-7c9f-w2", tmp_path) as pod:
            await until_serving(session, pod, container)
            ports = [ops[endpoint["port"]] for endpoint in endpoints]
            assert len({pod.ports[name] for name in ports}) == 2, endpoints
            for name in ports:  # each worker ready, so that it takes its share of connections
                await until_probe_passes(
                    session, pod, {"httpGet": {"path": "/readyz", "port": name}}
                )
            targets = [
                f"{pod.url(name)}{e['path']}" for name, e in zip(ports, endpoints, strict=True)
            ]
            before = [await openapi_answered(session, target) for target in targets]
            # A connection per request: the kernel spreads them over the workers.
            api = f"{pod.url(api_port['targetPort'])}/openapi.json"
            async with aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(force_close=True)
            ) as fresh:
                for _ in range(sent):
                    async with fresh.get(api) as reply:
                        assert reply.status == 200
            after = [await openapi_answered(session, target) for target in targets]
    taken = [now - then for now, then in zip(after, before, strict=True)]
    assert sum(taken) == sent, taken  # each request counted once, by the worker answering it
    assert all(taken), taken  # and each worker took some (24 connections: all on one is 2^-23)
