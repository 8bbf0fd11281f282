"""The adapter's Kafka client properties (librdkafka keys) as options of Spark's Kafka source.

Spark's source runs the Java client, whose keys differ for credentials and certificates; the
rest share their names and pass as they are (`kafka.<key>`). Certificates and keys are read
here, on the driver, and passed inline as PEM, so executors need no files of their own.

- `sasl.username`, `sasl.password`: `sasl.jaas.config` (the PLAIN or the SCRAM login module,
  by `sasl.mechanism`); `sasl.mechanisms`: `sasl.mechanism`.
- `ssl.ca.location` or `ssl.ca.pem`: `ssl.truststore.type=PEM` and
  `ssl.truststore.certificates`.
- `ssl.certificate.location`/`.pem` with `ssl.key.location`/`.pem`: `ssl.keystore.type=PEM`,
  `ssl.keystore.certificate.chain` and `ssl.keystore.key`.
- `ssl.endpoint.identification.algorithm=none`: the same key, empty.
- `sasl.oauthbearer.method=oidc` with `sasl.oauthbearer.client.id`, `.client.secret` and
  `.scope`: the OAUTHBEARER login module and callback handler (`sasl.oauthbearer.token.endpoint
  .url` keeps its name).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from topology.client_properties import ClientPropertiesError, checked

_SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
_PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
_OAUTH = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
_OAUTH_HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
# Consumed by the mapping below; every other key passes under its own name.
_MAPPED = frozenset(
    {
        "sasl.username",
        "sasl.password",
        "sasl.mechanisms",
        "ssl.ca.location",
        "ssl.ca.pem",
        "ssl.certificate.location",
        "ssl.certificate.pem",
        "ssl.key.location",
        "ssl.key.pem",
        "ssl.endpoint.identification.algorithm",
        "sasl.oauthbearer.method",
        "sasl.oauthbearer.client.id",
        "sasl.oauthbearer.client.secret",
        "sasl.oauthbearer.scope",
    }
)


def spark_kafka_options(properties: Mapping[str, str]) -> dict[str, str]:
    """`kafka.`-prefixed options of Spark's Kafka source; ClientPropertiesError for a key
    the reader owns (`group.id`, `isolation.level`, ...) or a file that cannot be read."""
    given = checked(properties, "client properties")
    java = {key: value for key, value in given.items() if key not in _MAPPED}
    if "sasl.mechanisms" in given:
        java.setdefault("sasl.mechanism", given["sasl.mechanisms"])
    java |= _jaas(given, java.get("sasl.mechanism", "GSSAPI"))
    java |= _truststore(given) | _keystore(given)
    if given.get("ssl.endpoint.identification.algorithm", "").lower() == "none":
        java["ssl.endpoint.identification.algorithm"] = ""
    return {f"kafka.{key}": value for key, value in java.items()}


def _jaas(given: Mapping[str, str], mechanism: str) -> dict[str, str]:
    if given.get("sasl.oauthbearer.method", "").lower() == "oidc":
        return _oidc(given)
    if "sasl.username" not in given:
        return {}
    module = _PLAIN if mechanism.upper() == "PLAIN" else _SCRAM
    user, password = json.dumps(given["sasl.username"]), json.dumps(given.get("sasl.password", ""))
    return {"sasl.jaas.config": f"{module} required username={user} password={password};"}


def _oidc(given: Mapping[str, str]) -> dict[str, str]:
    fields = {
        "clientId": given.get("sasl.oauthbearer.client.id"),
        "clientSecret": given.get("sasl.oauthbearer.client.secret"),
        "scope": given.get("sasl.oauthbearer.scope"),
    }
    named = " ".join(f"{k}={json.dumps(v)}" for k, v in fields.items() if v is not None)
    return {
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.login.callback.handler.class": _OAUTH_HANDLER,
        "sasl.jaas.config": f"{_OAUTH} required {named};",
    }


def _truststore(given: Mapping[str, str]) -> dict[str, str]:
    ca = _pem(given, "ssl.ca")
    return {} if ca is None else {"ssl.truststore.type": "PEM", "ssl.truststore.certificates": ca}


def _keystore(given: Mapping[str, str]) -> dict[str, str]:
    cert, key = _pem(given, "ssl.certificate"), _pem(given, "ssl.key")
    if cert is None or key is None:
        return {}
    return {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.certificate.chain": cert,
        "ssl.keystore.key": key,
    }


def _pem(given: Mapping[str, str], stem: str) -> str | None:
    """`<stem>.pem` inline, or the content of `<stem>.location`."""
    if f"{stem}.pem" in given:
        return given[f"{stem}.pem"]
    location = given.get(f"{stem}.location")
    if location is None:
        return None
    try:
        return Path(location).read_text()
    except OSError as error:
        raise ClientPropertiesError(f"{stem}.location: cannot read {location}") from error
