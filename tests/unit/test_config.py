"""Settings precedence (defaults < TOML < environment < flags) and validation."""

from __future__ import annotations

import os
import re
from dataclasses import fields
from pathlib import Path

import pytest

from adapter.config import (
    CONFIG_ENV,
    ConfigError,
    Settings,
    env_name,
    flag_name,
    load,
    load_peer_key,
)
from adapter.parts import configured_mounts
from topology.replication import AUTO


def _toml(tmp_path: Path, text: str) -> str:
    path = tmp_path / "durable-kafka.toml"
    path.write_text(text)
    return str(path)


def test_defaults_are_the_embedded_stack() -> None:
    settings = load(None, {}, {})
    assert settings == Settings()
    assert (settings.host, settings.port) == ("127.0.0.1", 4437)
    assert settings.bootstrap_servers == "127.0.0.1:9092"
    assert settings.cold_backend == "fs"


def test_each_source_overrides_the_one_before(tmp_path: Path) -> None:
    config = _toml(
        tmp_path,
        '[server]\nlisten = "0.0.0.0:1000"\n[kafka]\npartitions = 5\ntopic_prefix = "toml."\n'
        '[cold]\nbackend = "s3"\ns3_bucket = "from-toml"\n[auth]\noff_beyond_loopback = true\n',
    )
    env = {env_name("partitions"): "7", env_name("topic_prefix"): "env."}
    settings = load(config, env, {"topic_prefix": "flag."})
    assert settings.listen == "0.0.0.0:1000"  # TOML over default
    assert settings.partitions == 7  # environment over TOML
    assert settings.topic_prefix == "flag."  # flag over environment
    assert (settings.cold_backend, settings.s3_bucket) == ("s3", "from-toml")


def test_config_file_may_come_from_the_environment(tmp_path: Path) -> None:
    config = _toml(tmp_path, "[kafka]\nreplication_factor = 3\nmin_insync_replicas = 2\n")
    settings = load(None, {CONFIG_ENV: config}, {})
    assert (settings.replication_factor, settings.min_insync_replicas) == (3, 2)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[kafka]\npartitions = "many"\n', "expected int"),
        ("[kafka]\npartition = 3\n", "unknown setting"),
        ("[nope]\nx = 1\n", "unknown setting"),
        ("not toml at all = = =\n", "cannot read"),
    ],
)
def test_bad_toml_names_the_problem(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load(_toml(tmp_path, text), {}, {})


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("partitions", "0", "partitions"),
        ("partitions", "x", "not an integer"),
        ("listen", "4437", "HOST:PORT"),
        ("listen", "host:99999", "HOST:PORT"),
        ("topic_prefix", "bad/prefix", "topic_prefix"),
        ("cold_backend", "ftp", "cold_backend"),
        ("console", "yes", "console must be 'off', 'ro' or 'rw'"),
        ("console_max_last", "0", "console_max_last must be in 1..1000000"),
        ("min_insync_replicas", "-1", "min_insync_replicas"),
        ("replication_factor", "some", "not an integer"),
        ("topic_management", "platform", "topic_management must be 'auto' or 'external'"),
        ("log_level", "loud", "log_level"),
        ("event_loop", "trio", "event_loop"),
        ("max_inflight_body_bytes", "1000", "max_inflight_body_bytes"),
        ("tracing_endpoint", "127.0.0.1:4318", "tracing_endpoint must be http"),
        ("tracing_sample_ratio", "half", "not a number"),
        ("tracing_sample_ratio", "1.5", "tracing_sample_ratio must be in 0..1"),
        ("tracing_service_name", " ", "tracing_service_name is empty"),
    ],
)
def test_bad_values_are_refused(name: str, value: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load(None, {env_name(name): value}, {})


def test_a_ratio_is_a_number_from_every_source(tmp_path: Path) -> None:
    assert load(None, {env_name("tracing_sample_ratio"): "0.25"}, {}).tracing_sample_ratio == 0.25
    config = tmp_path / "c.toml"
    config.write_text("[tracing]\nsample_ratio = 1\n")  # TOML's integer for a ratio is fine
    assert load(str(config), {}, {}).tracing_sample_ratio == 1.0


def test_the_inflight_body_limit_comes_from_every_source(tmp_path: Path) -> None:
    assert Settings().max_inflight_body_bytes == 256 * 1024 * 1024
    config = _toml(tmp_path, "[server]\nmax_inflight_body_bytes = 100000000\n")
    assert load(config, {}, {}).max_inflight_body_bytes == 100_000_000
    env = {env_name("max_inflight_body_bytes"): "200000000"}
    assert load(config, env, {}).max_inflight_body_bytes == 200_000_000
    flags = {"max_inflight_body_bytes": "300000000"}
    assert load(config, env, flags).max_inflight_body_bytes == 300_000_000


def test_the_console_mode_comes_from_every_source(tmp_path: Path) -> None:
    assert Settings().console == "rw"
    config = _toml(tmp_path, '[server]\nconsole = "ro"\n')
    assert load(config, {}, {}).console == "ro"
    assert load(config, {env_name("console"): "off"}, {}).console == "off"
    assert load(config, {}, {"console": "rw"}).console == "rw"


def test_names_of_sources() -> None:
    assert env_name("bootstrap_servers") == "DURABLE_KAFKA_BOOTSTRAP_SERVERS"
    assert flag_name("bootstrap_servers") == "--bootstrap-servers"


def test_cluster_settings_come_from_every_source(tmp_path: Path) -> None:
    config = _toml(tmp_path, "[cluster]\nwrite_slots = 16\nsession_timeout_ms = 6000\n")
    env = {env_name("advertise_url"): "http://adapter-1.internal:4437"}
    settings = load(config, env, {})
    assert (settings.write_slots, settings.owner_session_timeout_ms) == (16, 6000)
    assert settings.advertised_url == "http://adapter-1.internal:4437"


def test_renewal_memory_and_mountable_topics_come_from_their_tables(tmp_path: Path) -> None:
    text = '[cluster]\nowner_renewal_entries = 500\n[server]\nmount_topics = "orders,shared-*"\n'
    settings = load(_toml(tmp_path, text), {}, {})
    assert (settings.owner_renewal_entries, settings.mount_topics) == (500, "orders,shared-*")
    assert Settings().mount_topics == ""  # nothing is mountable over HTTP unless allowed


def test_the_advertised_url_defaults_to_the_listen_address() -> None:
    assert Settings(listen="127.0.0.1:4000").advertised_url == "http://127.0.0.1:4000"
    assert Settings(listen="[::1]:4000").advertised_url == "http://[::1]:4000"
    assert Settings(listen="0.0.0.0:4000").advertised_url != "http://0.0.0.0:4000"


def test_the_instance_id_is_stable_and_derived_from_the_advertised_url() -> None:
    assert Settings(listen="127.0.0.1:4000").group_instance_id == "http___127.0.0.1_4000"
    assert Settings(listen="[::1]:4000").group_instance_id == "http______1__4000"
    assert Settings(advertise_url="https://a.b:1/").group_instance_id == "https___a.b_1"


def test_an_instance_id_given_is_taken_as_it_is(tmp_path: Path) -> None:
    settings = load(_toml(tmp_path, '[cluster]\ninstance_id = "adapter-1"\n'), {}, {})
    assert settings.group_instance_id == "adapter-1"


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"write_slots": "0"}, "write_slots"),
        ({"advertise_url": "adapter:4437"}, "advertise_url"),
        ({"owner_session_timeout_ms": "10"}, "owner_session_timeout_ms"),
        ({"instance_id": "adapter 1"}, "instance_id"),
        ({"instance_id": "a" * 250}, "instance_id"),
        ({"owner_renewal_entries": "0"}, "owner_renewal_entries"),
        ({"peer_connect_timeout_ms": "10"}, "peer_connect_timeout_ms"),
        ({"owner_refused_ms": "0"}, "owner_refused_ms"),
        ({"owner_unanswered_ms": "500"}, "owner_unanswered_ms"),
    ],
)
def test_cluster_settings_are_validated(flags: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load(None, {}, flags)


def test_require_durable_topics_comes_from_every_source(tmp_path: Path) -> None:
    assert Settings().require_durable_topics is False
    config = _toml(tmp_path, "[kafka]\nrequire_durable_topics = true\n")
    assert load(config, {}, {}).require_durable_topics is True
    env = {env_name("require_durable_topics"): "TRUE"}
    assert load(None, env, {}).require_durable_topics is True
    assert load(config, env, {"require_durable_topics": "false"}).require_durable_topics is False


@pytest.mark.parametrize("value", ["yes", "1", "", "on"])
def test_a_bool_setting_is_true_or_false(value: str) -> None:
    with pytest.raises(ConfigError, match="not true or false"):
        load(None, {env_name("require_durable_topics"): value}, {})


def test_a_bool_setting_in_toml_is_a_toml_bool(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="expected bool"):
        load(_toml(tmp_path, "[kafka]\nrequire_durable_topics = 1\n"), {}, {})


# The switches that break the server on purpose, planted by the test suites only
# (tests/faulty_adapter.py): no source of settings may turn one on.
TEST_FAULTS = (
    "lose_commit_every",
    "trust_unknown_outcomes",
    "crash_after_forwarded_commit",
    "serve_below_retention",
    "cold_reads_empty",
    "tier_skip_puts",
)


def test_a_testing_table_in_a_config_file_is_refused(tmp_path: Path) -> None:
    config = _toml(tmp_path, "[testing]\nlose_commit_every = 7\n")
    with pytest.raises(ConfigError, match=r"\[testing\] is not a table of settings"):
        load(config, {}, {})


def test_the_test_faults_are_no_settings() -> None:
    assert {field.name for field in fields(Settings)}.isdisjoint(TEST_FAULTS)
    env = {env_name(name): "true" for name in TEST_FAULTS}  # unknown variables: ignored
    assert load(None, env, {}) == Settings()


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"listen": "0.0.0.0:4437"}, "needs a loopback listen address"),
        ({"listen": "10.1.2.3:4437"}, "needs a loopback listen address"),
        ({"auth_mode": "basic"}, "auth_mode"),
        ({"auth_mode": "static"}, "auth_token_file"),
        ({"auth_mode": "jwt", "auth_jwt_audience": "a", "auth_jwt_jwks_file": "k"}, "issuer"),
        ({"auth_mode": "jwt", "auth_jwt_issuer": "i", "auth_jwt_jwks_file": "k"}, "audience"),
        ({"auth_mode": "jwt", "auth_jwt_issuer": "i", "auth_jwt_audience": "a"}, "exactly one"),
        ({"auth_jwt_algorithms": "RS256,none"}, "auth_jwt_algorithms"),
        ({"auth_jwt_algorithms": "HS256"}, "auth_jwt_algorithms"),
        ({"auth_jwt_algorithms": ""}, "auth_jwt_algorithms"),
        ({"auth_jwt_leeway_s": "3600"}, "leeway"),
    ],
)
def test_auth_settings_are_validated(flags: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load(None, {}, flags)


@pytest.mark.parametrize("listen", ["127.0.0.1:1", "127.9.9.9:1", "[::1]:1", "localhost:1"])
def test_auth_may_be_off_on_loopback(listen: str) -> None:
    assert load(None, {}, {"listen": listen}).auth_mode == "off"


def test_auth_off_beyond_loopback_is_an_explicit_choice(tmp_path: Path) -> None:
    config = _toml(tmp_path, '[server]\nlisten = "0.0.0.0:4437"\n')
    with pytest.raises(ConfigError):
        load(config, {}, {})
    settings = load(config, {env_name("auth_off_beyond_loopback"): "true"}, {})
    assert (settings.auth_mode, settings.auth_off_beyond_loopback) == ("off", True)


def test_auth_settings_come_from_the_auth_table(tmp_path: Path) -> None:
    config = _toml(
        tmp_path,
        '[server]\nlisten = "0.0.0.0:4437"\n'
        '[auth]\nmode = "jwt"\njwt_issuer = "https://id.example"\njwt_audience = "streams"\n'
        'jwt_jwks_url = "https://id.example/jwks"\njwt_algorithms = "ES256, EdDSA"\n'
        'jwt_leeway_s = 5\npublic_read = "pub-*"\nconceal = true\nquery_token = true\n'
        '[http]\nallowed_hosts = "streams.example"\ncors_origins = "https://app.example"\n',
    )
    settings = load(config, {}, {})
    assert settings.jwt_algorithms == ("ES256", "EdDSA")
    assert (settings.auth_jwt_leeway_s, settings.auth_conceal) == (5, True)
    assert (settings.allowed_hosts, settings.cors_origins) == (
        "streams.example",
        "https://app.example",
    )


@pytest.mark.parametrize(
    "name",
    [
        "rate_limit_requests",
        "rate_limit_burst",
        "rate_limit_append_bytes",
        "max_live_readers_per_bucket",
    ],
)
def test_limits_are_not_negative(name: str) -> None:
    assert getattr(load(None, {}, {}), name) == 0  # off by default
    with pytest.raises(ConfigError, match=name):
        load(None, {env_name(name): "-1"}, {})


def test_the_event_loop_is_uvloop_unless_asked_otherwise(tmp_path: Path) -> None:
    assert Settings().event_loop == "uvloop"
    config = _toml(tmp_path, '[server]\nevent_loop = "asyncio"\n')
    assert load(config, {}, {}).event_loop == "asyncio"
    env = {env_name("event_loop"): "uvloop"}
    assert load(config, env, {}).event_loop == "uvloop"
    assert load(config, env, {"event_loop": "asyncio"}).event_loop == "asyncio"


def test_workers_default_to_one_and_zero_means_one_per_core(tmp_path: Path) -> None:
    assert Settings().workers == 1
    assert Settings().worker_count == 1
    count = Settings(workers=0).worker_count
    assert 1 <= count <= min(os.cpu_count() or 1, Settings().write_slots)
    assert Settings(workers=0, write_slots=1).worker_count == 1
    config = _toml(tmp_path, "[server]\nworkers = 3\n")
    assert load(config, {}, {}).worker_count == 3
    assert load(config, {env_name("workers"): "2"}, {}).workers == 2
    assert load(config, {env_name("workers"): "2"}, {"workers": "1"}).worker_count == 1
    with pytest.raises(ConfigError, match=r"workers must be in 0\.\.64"):
        load(None, {}, {"workers": "-1"})


def test_mounts_come_from_toml_tables_or_a_json_array(tmp_path: Path) -> None:
    config = _toml(
        tmp_path,
        '[[mounts]]\nbucket = "orders"\ntopic = "orders-v1"\n'
        '[[mounts]]\nbucket = "users"\ntopic = "users"\ncontent_type = "application/json"\n'
        "[server]\nmount_index_positions_per_key = 64\n",
    )
    settings = load(config, {}, {})
    assert [table["bucket"] for table in settings.mounts] == ["orders", "users"]
    assert settings.mount_index_positions_per_key == 64
    env = {"DURABLE_KAFKA_MOUNTS": '[{"bucket": "logs", "topic": "logs"}]'}
    assert load(config, env, {}).mounts == ({"bucket": "logs", "topic": "logs"},)


@pytest.mark.parametrize(
    "raw", ["not json", '{"bucket": "x"}', '["x"]', '[{"bucket": "a"}, {"bucket": "a"}]']
)
def test_bad_mount_lists_are_refused(raw: str) -> None:
    with pytest.raises(ConfigError, match="DURABLE_KAFKA_MOUNTS"):
        load(None, {"DURABLE_KAFKA_MOUNTS": raw}, {})


def test_a_bad_mount_table_is_a_configuration_error() -> None:
    settings = load(None, {"DURABLE_KAFKA_MOUNTS": '[{"bucket": "logs", "topik": "x"}]'}, {})
    with pytest.raises(ConfigError, match="unknown mount field"):
        configured_mounts(settings)


def test_replication_is_auto_unless_set(tmp_path: Path) -> None:
    assert (Settings().replication_factor, Settings().min_insync_replicas) == (AUTO, AUTO)
    config = _toml(tmp_path, '[kafka]\nreplication_factor = "auto"\nmin_insync_replicas = 2\n')
    settings = load(config, {}, {})
    assert (settings.replication_factor, settings.min_insync_replicas) == (AUTO, 2)
    env = {env_name("replication_factor"): "3", env_name("min_insync_replicas"): "Auto"}
    settings = load(config, env, {})
    assert (settings.replication_factor, settings.min_insync_replicas) == (3, AUTO)


def test_more_in_sync_than_replicas_is_refused() -> None:
    env = {env_name("replication_factor"): "2", env_name("min_insync_replicas"): "3"}
    with pytest.raises(
        ConfigError, match=r"min_insync_replicas must be in 1\.\.replication_factor"
    ):
        load(None, env, {})


def test_topic_management_and_unreplicated_are_read(tmp_path: Path) -> None:
    config = _toml(tmp_path, '[kafka]\ntopic_management = "external"\nallow_unreplicated = true\n')
    settings = load(config, {}, {})
    assert (settings.topic_management, settings.allow_unreplicated) == ("external", True)
    assert load(None, {}, {"topic_management": "external"}).topic_management == "external"
    assert Settings().topic_management == "auto"


def test_tls_settings_come_from_the_tls_table_env_and_flags(tmp_path: Path) -> None:
    config = _toml(
        tmp_path,
        '[tls]\ncert_file = "a.crt"\nkey_file = "a.key"\nclient_ca_file = "ca.pem"\n'
        'client_auth = "required"\n[auth]\nmode = "static"\ntoken_file = "t.toml"\n'
        '[auth.certificates]\n"CN=ingest-bot" = ["append:logs", "read:logs"]\n',
    )
    settings = load(config, {env_name("tls_key_file"): "b.key"}, {"tls_cert_file": "c.crt"})
    assert (settings.tls_cert_file, settings.tls_key_file) == ("c.crt", "b.key")
    assert (settings.tls_client_ca_file, settings.tls_client_auth) == ("ca.pem", "required")
    assert settings.auth_certificates == (("CN=ingest-bot", ("append:logs", "read:logs")),)
    assert settings.tls
    assert settings.advertised_url.startswith("https://")
    from_env = load(config, {env_name("auth_certificates"): '{"CN=b": ["read:*"]}'}, {})
    assert from_env.auth_certificates == (("CN=b", ("read:*",)),)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"tls_cert_file": "a.crt"}, "tls_key_file is required with tls_cert_file"),
        ({"tls_key_file": "a.key"}, "tls_cert_file is required with tls_key_file"),
        ({"tls_client_ca_file": "ca.pem"}, "tls_client_ca_file needs tls_cert_file"),
        (
            {"tls_cert_file": "a", "tls_key_file": "b", "tls_client_auth": "required"},
            "'required' needs tls_client_ca_file",
        ),
        (
            {
                "tls_cert_file": "a",
                "tls_key_file": "b",
                "tls_client_ca_file": "c",
                "tls_client_auth": "none",
            },
            "tls_client_ca_file is set but tls_client_auth is 'none'",
        ),
        ({"tls_client_auth": "sometimes"}, "tls_client_auth must be"),
        (
            {"auth_certificates": '{"CN=a": ["read:*"]}'},
            "auth_certificates needs tls_client_ca_file",
        ),
        (
            {
                "tls_cert_file": "a",
                "tls_key_file": "b",
                "tls_client_ca_file": "c",
                "auth_certificates": '{"CN=a": []}',
            },
            "auth_certificates needs auth_mode 'static' or 'jwt'",
        ),
        ({"auth_certificates": '{"O=acme": ["read:*"]}'}, "a subject is CN=<common name>"),
        ({"auth_certificates": '{"CN=a": "read:*"}'}, "scopes must be a list of strings"),
        ({"auth_certificates": '["CN=a"]'}, "expected a table of subject"),
        ({"auth_certificates": "{"}, "not a JSON object of subjects"),
    ],
)
def test_tls_settings_that_cannot_work_are_refused(values: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        load(None, {}, values)


def test_kafka_client_properties_come_from_a_file_a_table_and_the_environment(
    tmp_path: Path,
) -> None:
    properties = tmp_path / "client.properties"
    properties.write_text("security.protocol=SASL_SSL\nsasl.password=from-file\nretries=1\n")
    config = _toml(
        tmp_path,
        f'[kafka]\nclient_file = "{properties}"\n'
        '[kafka.client]\n"sasl.password" = "from-toml"\n"socket.keepalive.enable" = true\n',
    )
    settings = load(config, {}, {})
    assert dict(settings.kafka_client) == {
        "security.protocol": "SASL_SSL",
        "sasl.password": "from-toml",  # the table over the file
        "retries": "1",
        "socket.keepalive.enable": "true",
    }
    env = {env_name("kafka_client"): '{"sasl.password": "from-env"}'}
    assert dict(load(config, env, {}).kafka_client)["sasl.password"] == "from-env"
    assert env_name("kafka_client_file") == "DURABLE_KAFKA_KAFKA_CLIENT_FILE"
    assert "from-toml" not in repr(settings)


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ('{"group.id": "g", "acks": "1", "sasl.password": "s3cr3t"}', "acks, group.id"),
        ('{"sasl.password": "s3cr3t"', "not a JSON object"),
        ('["sasl.password", "s3cr3t"]', "expected a table"),
    ],
)
def test_bad_kafka_client_properties_are_refused_without_their_values(
    source: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as raised:
        load(None, {env_name("kafka_client"): source}, {})
    assert "s3cr3t" not in str(raised.value)


def test_an_owned_key_in_the_client_file_is_refused(tmp_path: Path) -> None:
    properties = tmp_path / "client.properties"
    properties.write_text("bootstrap.servers=elsewhere:9092\ntransactional.id=t\n")
    env = {env_name("kafka_client_file"): str(properties)}
    with pytest.raises(ConfigError, match=r"bootstrap\.servers, transactional\.id"):
        load(None, env, {})


def test_workers_auto_is_one_per_core(tmp_path: Path) -> None:
    config = _toml(tmp_path, '[server]\nworkers = "auto"\n')
    assert load(config, {}, {}).workers == 0
    assert load(None, {env_name("workers"): "AUTO"}, {}).workers == 0
    assert load(None, {}, {"workers": "auto"}).workers == 0
    expected = min(os.cpu_count() or 1, Settings().write_slots)
    assert load(config, {}, {}).worker_count == expected


def test_a_peer_key_is_read_from_its_file_and_a_short_or_missing_one_is_refused(
    tmp_path: Path,
) -> None:
    assert load_peer_key(Settings()) == ""
    key = tmp_path / "peer.key"
    key.write_text("  a key long enough for peers\n")
    assert load_peer_key(Settings(peer_key_file=str(key))) == "a key long enough for peers"
    key.write_text("short")
    with pytest.raises(ConfigError, match="at least 16"):
        load_peer_key(Settings(peer_key_file=str(key)))
    with pytest.raises(ConfigError, match="cannot read"):
        load_peer_key(Settings(peer_key_file=str(tmp_path / "missing")))
