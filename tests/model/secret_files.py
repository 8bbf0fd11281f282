"""The secrets a model deployment may take from files an operator rotates instead of an identity
provider: static tokens (`auth_mode = "static"`, one token file both instances read), the
HTTPS certificate both serve (from a CA of the test's own that clients and peers trust), the
CAs of the client certificates they take as a principal (`tls_client_ca_file`, optional
client certificates, `auth_certificates`), and their credential on a secured broker
(`kafka_client_file`: a SCRAM user's password or a client certificate, `KafkaCredential`).

Each is rotated as an operator does it (operations, "Rotating secrets"): the new token is
listed beside the old one, clients move to it once every instance lets it in, then the old one
is removed and refused everywhere; a new certificate and key replace the files, and every new
connection to either instance is shown the new certificate; a new client CA is listed beside
the old one, a client moves to a certificate of the new one once every instance lets it in,
then the old CA is removed and a certificate of it refused in the handshake; the Kafka
credential is rotated as `KafkaCredential` says, and every instance takes it up."""

from __future__ import annotations

import json
import secrets
import ssl
import time
from pathlib import Path

from adapter.auth.static_tokens import digest
from tests.certificates import TestCA
from tests.identity_provider import SCOPES
from tests.model.kafka_access import KafkaCredential, replace

PRINCIPAL = "alice"  # as the identity provider's tokens: producer ids are scoped by it
CERTIFIED = "model-reader"  # the principal of the client certificates (`read:*`)
POLL_MS = 200  # how often the instances read the files again (`secret_poll_ms`)


class SecretFiles:
    def __init__(self, folder: Path, kafka: KafkaCredential) -> None:
        self.kafka = kafka  # how the instances reach the broker
        self.tokens_path = folder / "tokens.toml"
        self.cert_path, self.key_path = folder / "tls.crt", folder / "tls.key"
        (folder / "ca").mkdir(parents=True, exist_ok=True)
        self.ca = TestCA(folder / "ca")
        self.folder = folder
        self.rotations = 0
        self.rotated_at = time.monotonic()
        self.client_ca_path = folder / "client-ca.crt"
        self.client_cas = [self._client_ca([])]  # listed in the file; clients use the last one's
        self.client = self._client_context()  # presents a certificate of the newest client CA
        self.former_client = self.client
        self.tokens = [secrets.token_urlsafe(24)]  # the listed ones; clients use the last
        self.serial = self._issue()
        self._write_tokens()

    def settings(self) -> dict[str, str]:
        """What an instance reading these files is given (`SSL_CERT_FILE`: its peers'
        certificates are checked against the test's CA when it forwards to them)."""
        return {
            "DURABLE_KAFKA_AUTH_MODE": "static",
            "DURABLE_KAFKA_AUTH_TOKEN_FILE": str(self.tokens_path),
            "DURABLE_KAFKA_TLS_CERT_FILE": str(self.cert_path),
            "DURABLE_KAFKA_TLS_KEY_FILE": str(self.key_path),
            "DURABLE_KAFKA_TLS_CLIENT_CA_FILE": str(self.client_ca_path),
            "DURABLE_KAFKA_TLS_CLIENT_AUTH": "optional",
            "DURABLE_KAFKA_AUTH_CERTIFICATES": json.dumps({f"CN={CERTIFIED}": ["read:*"]}),
            "DURABLE_KAFKA_SECRET_POLL_MS": str(POLL_MS),
            "DURABLE_KAFKA_BOOTSTRAP_SERVERS": self.kafka.bootstrap,
            "DURABLE_KAFKA_KAFKA_CLIENT_FILE": str(self.kafka.client_path),
            "SSL_CERT_FILE": str(self.ca.path),
        }

    def trusting(self) -> ssl.SSLContext:
        """A client's TLS context trusting the test's CA."""
        return ssl.create_default_context(cafile=str(self.ca.path))

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[-1]}"}

    def rotate(self) -> dict[str, str]:
        """A new token listed beside the current one, a new client CA beside the current one
        (with a client of it, `client`, the former one kept as `former_client`), a new
        certificate served and the Kafka credential rotated; the headers of the token it replaces,
        which stays listed, as the former client CA does, until `retire`."""
        previous = self.headers()
        self.rotations += 1
        self.rotated_at = time.monotonic()
        self.tokens = [self.tokens[-1], secrets.token_urlsafe(24)]
        self._write_tokens()
        self.client_cas = [self.client_cas[-1], self._client_ca(self.client_cas[-1:])]
        self.former_client, self.client = self.client, self._client_context()
        self.serial = self._issue()
        self.kafka.rotate()
        return previous

    def retire(self) -> None:
        """Only the newest token and client CA stay listed, and the Kafka credential's former
        one is refused."""
        self.tokens = self.tokens[-1:]
        self._write_tokens()
        self.client_cas = self.client_cas[-1:]
        replace(self.client_ca_path, b"".join(ca.path.read_bytes() for ca in self.client_cas))
        self.kafka.retire()

    def _client_ca(self, listed: list[TestCA]) -> TestCA:
        """A new CA of client certificates, written to the client CA file after `listed`."""
        folder = self.folder / f"client-ca-{self.rotations}"
        folder.mkdir(parents=True, exist_ok=True)
        ca = TestCA(folder, f"client CA {self.rotations}")
        replace(self.client_ca_path, b"".join(c.path.read_bytes() for c in [*listed, ca]))
        return ca

    def _client_context(self) -> ssl.SSLContext:
        """A client presenting a certificate of the newest client CA (`CN=` `CERTIFIED`)."""
        pair = self.client_cas[-1].client(f"client-{self.rotations}", CERTIFIED)
        context = self.trusting()
        context.load_cert_chain(pair.cert, pair.key)
        return context

    def _issue(self) -> int:
        """A new certificate for 127.0.0.1, written over the served files (the key first: a
        poll between the two sees a pair that does not match, which is refused and tried
        again at the next change); its serial."""
        pair = self.ca.server(f"server-{self.rotations}")
        replace(self.key_path, pair.key.read_bytes())
        replace(self.cert_path, pair.cert.read_bytes())
        return pair.serial

    def _write_tokens(self) -> None:
        # One entry per token, all naming the same principal.
        entries = [
            f'[[token]]\nname = "{PRINCIPAL}"\nsha256 = "{digest(token)}"\n'
            f"scopes = {json.dumps(SCOPES)}\n"
            for token in self.tokens
        ]
        replace(self.tokens_path, "\n".join(entries).encode())
