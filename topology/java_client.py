"""A Java client.properties as librdkafka properties: what has an equivalent is translated,
the rest refused by name (ClientPropertiesError: a start error, exit 2), never passed on to
librdkafka, which would refuse it only when the first client is created.

- `sasl.jaas.config` with the PLAIN or SCRAM login module: `sasl.username`, `sasl.password`.
- `sasl.jaas.config` with the OAUTHBEARER login module and Kafka's OIDC callback handler
  (`sasl.login.callback.handler.class`): `sasl.oauthbearer.method=oidc` with the module's
  `clientId`, `clientSecret`, `scope` and `extension_*` options (the token endpoint's key,
  `sasl.oauthbearer.token.endpoint.url`, is the same in both). Without the handler, Java's
  unsecured tokens: `enable.sasl.oauthbearer.unsecure.jwt` with the `sub` claim.
- `ssl.truststore.*`: a PKCS12 store's certificates become `ssl.ca.pem`; a PEM store
  `ssl.ca.location` (or `ssl.ca.pem` for inline `ssl.truststore.certificates`).
- `ssl.keystore.*`: a PKCS12 store stays librdkafka's own `ssl.keystore.location` and
  `.password` (checked here: it opens with that password and holds a key); a PEM store
  becomes `ssl.certificate.*` and `ssl.key.*`.
- A JKS store (Java's default type) is refused with the `keytool` command converting it.
- `ssl.endpoint.identification.algorithm=` (empty, Java's "off"): `none`.

A file with none of these keys is returned as it is.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from cryptography.hazmat.primitives.serialization import Encoding, pkcs12

from topology.client_properties import ClientPropertiesError

_PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
_SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
_OAUTH = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
# Kafka 3.4+ and its earlier name (3.1-3.3).
_OIDC_HANDLERS = frozenset(
    {
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
        "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler",
    }
)
_HANDLER = "sasl.login.callback.handler.class"
_ENDPOINT = "ssl.endpoint.identification.algorithm"
# Java-only keys with no librdkafka equivalent: the operator removes them.
_JAVA_ONLY = frozenset(
    {
        "sasl.client.callback.handler.class",
        "sasl.login.class",
        "ssl.protocol",
        "ssl.enabled.protocols",
        "ssl.provider",
        "ssl.keymanager.algorithm",
        "ssl.trustmanager.algorithm",
        "ssl.secure.random.implementation",
        "ssl.engine.factory.class",
    }
)
_JAVA_KEYS = re.compile(
    r"^(sasl\.jaas\.config|ssl\.truststore\.|ssl\.keystore\.|ssl\.key\.password$)"
)
_JKS_MAGIC = b"\xfe\xed\xfe\xed"
_OPTION = re.compile(r'([A-Za-z_][\w.]*)\s*=\s*("(?:[^"\\]|\\.)*"|[^\s;"]+)')
_ENTRY = re.compile(
    r"^\s*([\w.$]+)\s+(?:required|requisite|sufficient|optional)\b(.*?);?\s*$", re.S
)


def is_java(properties: Mapping[str, str]) -> bool:
    """Whether any key is one only the Java client knows."""
    return any(_JAVA_KEYS.match(key) or key in _JAVA_ONLY or key == _HANDLER for key in properties)


def translated(properties: Mapping[str, str], origin: str) -> dict[str, str]:
    """librdkafka properties for `properties`; ClientPropertiesError naming the key (never a
    value) that has no equivalent."""
    if not is_java(properties):
        return dict(properties)
    if stray := sorted(key for key in properties if key in _JAVA_ONLY):
        raise ClientPropertiesError(
            f"{origin}: {', '.join(stray)}: Java client only, with no librdkafka equivalent; "
            "remove it (librdkafka negotiates TLS 1.2 or 1.3 with the system's OpenSSL)"
        )
    given = dict(properties)
    result = {k: v for k, v in given.items() if not _JAVA_KEYS.match(k) and k != _HANDLER}
    result |= _sasl(given, origin) | _truststore(given, origin) | _keystore(given, origin)
    algorithm = given.get(_ENDPOINT)
    if algorithm is not None:  # Java's "" (off) is librdkafka's "none"
        result[_ENDPOINT] = algorithm.lower() or "none"
    return result


def _sasl(given: Mapping[str, str], origin: str) -> dict[str, str]:
    handler = given.get(_HANDLER)
    if "sasl.jaas.config" not in given:
        if handler is not None:
            raise ClientPropertiesError(f"{origin}: {_HANDLER} needs sasl.jaas.config")
        return {}
    module, options = _jaas(given["sasl.jaas.config"], origin)
    if handler is not None and (module != _OAUTH or handler not in _OIDC_HANDLERS):
        raise ClientPropertiesError(
            f"{origin}: {_HANDLER}: only Kafka's OAUTHBEARER OIDC handler has a librdkafka "
            "equivalent (sasl.oauthbearer.method=oidc)"
        )
    if module in (_PLAIN, _SCRAM):
        return _credentials(options, origin)
    if module == _OAUTH:
        return _oidc(options, origin) if handler else _unsecured(options, origin)
    raise ClientPropertiesError(
        f"{origin}: sasl.jaas.config: the login module {module} has no librdkafka equivalent "
        "(PlainLoginModule, ScramLoginModule and OAuthBearerLoginModule do)"
    )


def _jaas(text: str, origin: str) -> tuple[str, dict[str, str]]:
    """The one login module of a client's JAAS config and its options (values unquoted)."""
    entry = _ENTRY.match(text)
    rest = _OPTION.sub("", entry.group(2)) if entry else ";"
    if entry is None or rest.strip():
        raise ClientPropertiesError(
            f"{origin}: sasl.jaas.config: not one '<LoginModule> required key=\"value\" ...;'"
        )
    options = {
        name: re.sub(r"\\(.)", r"\1", value[1:-1]) if value.startswith('"') else value
        for name, value in _OPTION.findall(entry.group(2))
    }
    return entry.group(1), options


def _credentials(options: Mapping[str, str], origin: str) -> dict[str, str]:
    if set(options) != {"username", "password"}:
        raise ClientPropertiesError(
            f"{origin}: sasl.jaas.config: expected exactly the options username and password"
        )
    return {"sasl.username": options["username"], "sasl.password": options["password"]}


_OIDC_OPTIONS = {
    "clientId": "sasl.oauthbearer.client.id",
    "clientSecret": "sasl.oauthbearer.client.secret",
    "scope": "sasl.oauthbearer.scope",
}


def _oidc(options: Mapping[str, str], origin: str) -> dict[str, str]:
    extensions = {k: v for k, v in options.items() if k.startswith("extension_")}
    if stray := sorted(set(options) - set(_OIDC_OPTIONS) - set(extensions)):
        raise ClientPropertiesError(
            f"{origin}: sasl.jaas.config: OAUTHBEARER option(s) {', '.join(stray)} have no "
            "librdkafka equivalent (clientId, clientSecret, scope and extension_* do)"
        )
    found = {"sasl.oauthbearer.method": "oidc"}
    found |= {_OIDC_OPTIONS[k]: v for k, v in options.items() if k in _OIDC_OPTIONS}
    if extensions:
        found["sasl.oauthbearer.extensions"] = ",".join(
            f"{k.removeprefix('extension_')}={v}" for k, v in extensions.items()
        )
    return found


def _unsecured(options: Mapping[str, str], origin: str) -> dict[str, str]:
    sub = options.get("unsecuredLoginStringClaim_sub")
    if sub is None or set(options) != {"unsecuredLoginStringClaim_sub"}:
        raise ClientPropertiesError(
            f"{origin}: sasl.jaas.config: OAUTHBEARER without {_HANDLER} (unsecured tokens) "
            "translates only unsecuredLoginStringClaim_sub; for OIDC set the handler class"
        )
    return {
        "enable.sasl.oauthbearer.unsecure.jwt": "true",
        "sasl.oauthbearer.config": f"principal={sub}",
    }


def _store_type(given: Mapping[str, str], which: str, origin: str) -> str:
    """PKCS12 or PEM (no type given: PKCS12, which Java also reads as its default JKS type).
    JKS, named or recognized by its bytes, is refused with the command that converts it."""
    location = given.get(f"ssl.{which}.location")
    kind = given.get(f"ssl.{which}.type", "").upper()
    head = _read(location, f"ssl.{which}.location", origin)[:4] if location else b""
    if kind == "JKS" or head == _JKS_MAGIC:
        key = f"ssl.{which}.type" if kind == "JKS" else f"ssl.{which}.location"
        raise ClientPropertiesError(
            f"{origin}: {key}: a JKS {which} cannot be used (librdkafka reads PKCS12 and PEM); "
            f"convert it: keytool -importkeystore -srckeystore {location or '<file>'} "
            f"-srcstoretype JKS -destkeystore {which}.p12 -deststoretype PKCS12, then set "
            f"ssl.{which}.location={which}.p12 and ssl.{which}.type=PKCS12"
        )
    if kind not in ("", "PKCS12", "PEM"):
        raise ClientPropertiesError(f"{origin}: ssl.{which}.type: PKCS12, PEM or JKS")
    return kind or "PKCS12"


def _truststore(given: Mapping[str, str], origin: str) -> dict[str, str]:
    if "ssl.truststore.certificates" in given:
        return {"ssl.ca.pem": given["ssl.truststore.certificates"]}
    location = given.get("ssl.truststore.location")
    if location is None:
        return {}
    if _store_type(given, "truststore", origin) == "PEM":
        return {"ssl.ca.location": location}
    store = _pkcs12(given, "truststore", origin)
    certificates = [c.certificate for c in store.additional_certs]
    if store.cert is not None:
        certificates.insert(0, store.cert.certificate)
    if not certificates:
        raise ClientPropertiesError(f"{origin}: ssl.truststore.location: no certificate in it")
    return {"ssl.ca.pem": "".join(c.public_bytes(Encoding.PEM).decode() for c in certificates)}


def _keystore(given: Mapping[str, str], origin: str) -> dict[str, str]:
    if "ssl.keystore.key" in given or "ssl.keystore.certificate.chain" in given:
        return {
            "ssl.certificate.pem": given.get("ssl.keystore.certificate.chain", ""),
            "ssl.key.pem": given.get("ssl.keystore.key", ""),
            **_key_password(given),
        }
    location = given.get("ssl.keystore.location")
    if location is None:
        return {}
    if _store_type(given, "keystore", origin) == "PEM":
        return {"ssl.certificate.location": location, "ssl.key.location": location}
    if _pkcs12(given, "keystore", origin).key is None:
        raise ClientPropertiesError(f"{origin}: ssl.keystore.location: no private key in it")
    return {
        "ssl.keystore.location": location,
        "ssl.keystore.password": _password(given, "keystore"),
    }


def _key_password(given: Mapping[str, str]) -> dict[str, str]:
    return {"ssl.key.password": given["ssl.key.password"]} if "ssl.key.password" in given else {}


def _password(given: Mapping[str, str], which: str) -> str:
    return given.get(f"ssl.{which}.password", "")


def _pkcs12(given: Mapping[str, str], which: str, origin: str) -> pkcs12.PKCS12KeyAndCertificates:
    key = f"ssl.{which}.location"
    data = _read(given[key], key, origin)
    password = _password(given, which).encode() or None
    try:
        return pkcs12.load_pkcs12(data, password)
    except ValueError:
        raise ClientPropertiesError(
            f"{origin}: {key}: not a PKCS12 store, or ssl.{which}.password does not open it"
        ) from None


def _read(path: str, key: str, origin: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as error:
        raise ClientPropertiesError(f"{origin}: {key} {path}: {error.strerror}") from None
