"""A rendered pod run as a local process, the way the kubelet would start its container.

The container's argv is the image's entrypoint (the Dockerfile's `ENTRYPOINT`, the venv's
console script in its place) followed by its `command`/`args`; its environment is the image's
`ENV` plus the container's `env`, with `$(VAR)` expanded, `valueFrom` resolved from the Secrets
and ConfigMaps given (the chart's own and the ones a test provides) and the downward-API fields
from the pod's name and IP. Every mounted Secret, ConfigMap and emptyDir becomes a directory.

Two things differ from a node, the same way for every pod, and nothing else:
- The container's filesystem is a temporary root: a mount at `/etc/x` is `<root>/etc/x`, and
  every variable whose value is an absolute path under a mount (the product reads those paths
  from its settings) is rewritten to the same place; the working directory `/app` is
  `<root>/app`.
- A pod has a network namespace of its own, where `0.0.0.0` means its own address: here each pod
  gets a loopback address of its own (its `POD_IP`), and a listen address of `0.0.0.0` is
  rewritten to it, so two replicas both listen on their container ports, as pods do.
"""

from __future__ import annotations

import base64
import contextlib
import os
import random
import re
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
WORKDIR = "/app"  # the Dockerfile's WORKDIR

Manifest = dict[str, Any]


@dataclass(frozen=True)
class Pod:
    """A running replica: its name, its address and its container's named ports."""

    name: str
    ip: str
    ports: Mapping[str, int]
    root: Path
    process: subprocess.Popen[bytes]
    log: Path

    def url(self, port_name: str, scheme: str = "http") -> str:
        return f"{scheme}://{self.ip}:{self.ports[port_name]}"


def objects_data(manifests: list[Manifest]) -> dict[tuple[str, str], dict[str, bytes]]:
    """(kind, name) -> key -> bytes of every Secret and ConfigMap among `manifests`."""
    found: dict[tuple[str, str], dict[str, bytes]] = {}
    for manifest in manifests:
        if manifest["kind"] not in ("Secret", "ConfigMap"):
            continue
        data = {k: base64.b64decode(v) for k, v in (manifest.get("data") or {}).items()}
        if manifest["kind"] == "ConfigMap":
            data = {k: v.encode() for k, v in (manifest.get("data") or {}).items()}
        data |= {k: v.encode() for k, v in (manifest.get("stringData") or {}).items()}
        found[(manifest["kind"], manifest["metadata"]["name"])] = data
    return found


def secret(name: str, data: Mapping[str, str | bytes]) -> Manifest:
    """A Secret as a test provides it (what cert-manager or an operator would create)."""
    encoded = {
        k: base64.b64encode(v if isinstance(v, bytes) else v.encode()).decode()
        for k, v in data.items()
    }
    return {"kind": "Secret", "metadata": {"name": name}, "data": encoded}


def image_entrypoint() -> list[str]:
    """The adapter image's ENTRYPOINT (the Dockerfile's last one), with its console script
    taken from this venv."""
    found = re.findall(r"^ENTRYPOINT (\[.*\])$", (ROOT / "Dockerfile").read_text(), re.M)
    argv: list[str] = eval(found[-1])
    return [str(VENV_BIN / argv[0]), *argv[1:]]


def image_env() -> dict[str, str]:
    """The runtime stage's `ENV`: PATH leads to this venv's scripts instead of /app/.venv."""
    text = (ROOT / "Dockerfile").read_text()
    block = re.search(r"^ENV ((?:.*\\\n)*.*)$", text.split("AS runtime", 1)[1], re.M)
    assert block, "no ENV in the runtime stage"
    pairs = dict(re.findall(r"(\w+)=(\S+)", block.group(1)))
    pairs["PATH"] = (
        pairs["PATH"]
        .replace("/app/.venv/bin", str(VENV_BIN))
        .replace("$PATH", os.environ.get("PATH", "/usr/bin:/bin"))
    )
    return pairs


def pod_address() -> str:
    """A loopback address of the pod's own (Linux answers on all of 127.0.0.0/8)."""
    return f"127.{random.randint(1, 254)}.{random.randint(1, 254)}.{random.randint(2, 254)}"


def container_env(
    container: Manifest,
    objects: Mapping[tuple[str, str], Mapping[str, bytes]],
    fields: Mapping[str, str],
) -> dict[str, str]:
    """The container's variables as the kubelet resolves them, in order."""
    env = image_env()
    for entry in container.get("env", []):
        if "value" in entry:
            value = re.sub(
                r"\$\((\w+)\)", lambda m: env.get(m.group(1), m.group(0)), entry["value"]
            )
        else:
            value = _value_from(entry["valueFrom"], objects, fields)
        env[entry["name"]] = value
    return env


def _value_from(
    source: Manifest,
    objects: Mapping[tuple[str, str], Mapping[str, bytes]],
    fields: Mapping[str, str],
) -> str:
    if "fieldRef" in source:
        return fields[source["fieldRef"]["fieldPath"]]
    kind, ref = (
        ("Secret", source["secretKeyRef"])
        if "secretKeyRef" in source
        else ("ConfigMap", source["configMapKeyRef"])
    )
    assert (kind, ref["name"]) in objects, f"the pod needs {kind} {ref['name']}"
    return objects[(kind, ref["name"])][ref["key"]].decode()


def write_volumes(
    spec: Manifest,
    container: Manifest,
    objects: Mapping[tuple[str, str], Mapping[str, bytes]],
    root: Path,
) -> list[str]:
    """Each mount of the container as a directory under `root`; returns the mount paths."""
    volumes = {volume["name"]: volume for volume in spec.get("volumes", [])}
    paths = []
    for mount in container.get("volumeMounts", []):
        target = inside(root, mount["mountPath"])
        target.mkdir(parents=True, exist_ok=True)
        volume = volumes[mount["name"]]
        for kind, key, name_key in (
            ("Secret", "secret", "secretName"),
            ("ConfigMap", "configMap", "name"),
        ):
            if key in volume:
                source = volume[key]
                assert (kind, source[name_key]) in objects, (
                    f"the pod needs {kind} {source[name_key]}"
                )
                data = objects[(kind, source[name_key])]
                items = source.get("items") or [{"key": k, "path": k} for k in data]
                for item in items:
                    (target / item["path"]).write_bytes(data[item["key"]])
        paths.append(mount["mountPath"])
    return paths


def inside(root: Path, path: str) -> Path:
    return root / path.lstrip("/")


def rewrite(env: dict[str, str], root: Path, mounts: list[str], ip: str) -> dict[str, str]:
    """The two differences from a node (see the module's docstring), applied to `env`."""
    roots = [*mounts, WORKDIR]
    for name, value in env.items():
        if any(value == m or value.startswith(f"{m.rstrip('/')}/") for m in roots):
            env[name] = str(inside(root, value))
        elif value.startswith("0.0.0.0:"):
            env[name] = f"{ip}:{value.partition(':')[2]}"
    return env


@contextlib.contextmanager
def running_pod(
    deployment: Manifest,
    objects: Mapping[tuple[str, str], Mapping[str, bytes]],
    name: str,
    folder: Path,
) -> Iterator[Pod]:
    """The Deployment's pod `name`, started as the kubelet would, until the block ends (then
    SIGTERM, as a pod's deletion sends)."""
    spec = deployment["spec"]["template"]["spec"]
    [container] = spec["containers"]
    ip = pod_address()
    root = folder / name
    mounts = write_volumes(spec, container, objects, root)
    inside(root, WORKDIR).mkdir(parents=True, exist_ok=True)
    fields = {"metadata.name": name, "status.podIP": ip, "metadata.namespace": "streams"}
    env = rewrite(container_env(container, objects, fields), root, mounts, ip)
    env["HOME"] = str(root / "home")
    argv = [*image_entrypoint(), *container.get("command", []), *container.get("args", [])]
    ports = {p["name"]: int(p["containerPort"]) for p in container["ports"]}
    log = folder / f"{name}.log"
    with (
        log.open("ab") as sink,
        subprocess.Popen(
            argv, env=env, cwd=inside(root, WORKDIR), stdout=sink, stderr=sink
        ) as process,
    ):
        try:
            yield Pod(name, ip, ports, root, process, log)
        except BaseException:
            print(f"--- {name}'s log ---\n{log.read_text()[-6000:]}", file=sys.stderr)
            raise
        finally:
            process.terminate()
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
