"""`durable-kafka topics plan` as a user runs it, compared with what auto mode creates."""

from __future__ import annotations

import asyncio
import shlex
import subprocess
from typing import Any

import yaml
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from adapter.app import create_app
from adapter.config import Settings
from tests.adapter_process import SCRIPT
from tests.conftest import ClientFactory, SettingsFactory, wait_ready
from topology.naming import bucket_topic

TIMEOUT_S = 30


def _plan(settings: Settings, *extra: str) -> str:
    """The plan for these settings, by the console script (flags over any environment)."""
    flags = [
        "--bootstrap-servers",
        settings.bootstrap_servers,
        "--topic-prefix",
        settings.topic_prefix,
        "--partitions",
        str(settings.partitions),
    ]
    result = subprocess.run(
        [SCRIPT, "topics", "plan", *flags, *extra],
        capture_output=True,
        text=True,
        check=False,
        timeout=TIMEOUT_S * 2,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def _commands(script: str) -> dict[str, dict[str, Any]]:
    """Each `kafka-topics.sh --create` line as topic -> partitions, replicas and configs."""
    planned: dict[str, dict[str, Any]] = {}
    for line in script.splitlines():
        words = shlex.split(line)
        assert words[:2] == ["kafka-topics.sh", "--bootstrap-server"]
        assert words[3] == "--create"
        pairs = list(zip(words[4::2], words[5::2], strict=True))
        options = {flag: value for flag, value in pairs if flag != "--config"}
        configs = dict(value.split("=", 1) for flag, value in pairs if flag == "--config")
        planned[options["--topic"]] = {
            "partitions": int(options["--partitions"]),
            "replicas": int(options["--replication-factor"]),
            "configs": configs,
        }
    return planned


def _strimzi(text: str) -> dict[str, dict[str, Any]]:
    documents = [d for d in yaml.safe_load_all(text) if d]
    return {
        d["spec"]["topicName"]: {
            "partitions": d["spec"]["partitions"],
            "replicas": d["spec"]["replicas"],
            "configs": d["spec"]["config"],
        }
        for d in documents
    }


def _actual(bootstrap: str, topics: list[str]) -> dict[str, dict[str, Any]]:
    """Each topic as the broker has it: partitions, replicas and every config value."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    metadata = admin.list_topics(timeout=TIMEOUT_S)
    resources = [ConfigResource(ResourceType.TOPIC, name) for name in topics]
    found: dict[str, dict[str, Any]] = {}
    for resource, future in admin.describe_configs(resources).items():
        topic = metadata.topics[resource.name]
        found[resource.name] = {
            "partitions": len(topic.partitions),
            "replicas": len(topic.partitions[0].replicas),
            "configs": {k: v.value for k, v in future.result(TIMEOUT_S).items()},
        }
    return found


async def test_the_plan_is_what_auto_mode_creates(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, unique: str
) -> None:
    settings = make_settings()
    bucket = f"orders-{unique}"
    client = await aiohttp_client(create_app(settings))
    await wait_ready(client)
    assert (await client.put(f"/{bucket}")).status == 201

    planned = _commands(await asyncio.to_thread(_plan, settings, "--bucket", bucket))
    assert len(planned) == 7  # five compacted, the slots, the bucket's
    assert bucket_topic(settings.topic_prefix, bucket) in planned
    actual = await asyncio.to_thread(_actual, settings.bootstrap_servers, sorted(planned))
    for topic, plan in planned.items():
        made = actual[topic]
        assert (made["partitions"], made["replicas"]) == (plan["partitions"], plan["replicas"])
        assert plan["configs"], topic
        for key, value in plan["configs"].items():
            assert made["configs"][key] == value, (topic, key)
    strimzi = await asyncio.to_thread(
        _plan, settings, "--bucket", bucket, "--format", "strimzi", "--strimzi-cluster", "dk"
    )
    assert _strimzi(strimzi) == planned
    assert 'strimzi.io/cluster: "dk"' in strimzi


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    command = [SCRIPT, "topics", "plan", "--replication-factor", "3", *args]
    return subprocess.run(command, capture_output=True, text=True, check=False, timeout=TIMEOUT_S)


def test_a_bad_bucket_name_is_refused() -> None:
    result = _run("--bucket", "Bad.Name")
    assert result.returncode == 1
    assert "bucket id 'Bad.Name'" in result.stderr


def test_explicit_counts_are_planned_without_a_cluster() -> None:
    offline = _run(
        "--bootstrap-servers", "127.0.0.1:1", "--min-insync-replicas", "2", "--topic-prefix", "p."
    )
    assert offline.returncode == 0, offline.stderr
    assert "--topic p.internal.meta --partitions 1 --replication-factor 3" in offline.stdout
    assert "--config min.insync.replicas=2" in offline.stdout
