"""The identity provider the model's deployment trusts: a JWKS served over HTTP from this
process (what `auth_jwt_jwks_url` names), a key that rotates on demand, and a fresh token per
request signed with the newest key. During a rotation the set publishes the new key beside the
previous one, as providers do; it counts the fetches, so a test can tell what reached it."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from devstack.process import free_port
from tests.tokens import AUDIENCE, ISSUER, Signer

SCOPES = ["read:*", "append:*", "admin:*"]  # the model acts on every bucket it names
MAX_AGE_S = 300  # the set's lifetime: within a run, only an unknown kid makes it fetched again


class IdentityProvider:
    def __init__(self) -> None:
        self.signers = [Signer("key-0")]
        self.rotations = 0
        self.fetches = 0
        self.rotated_at = time.monotonic()  # the deployment's start fetched the first set
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/jwks.json"
        self._lock = threading.Lock()

    def settings(self) -> dict[str, str]:
        """What an instance trusting this provider is given."""
        return {
            "DURABLE_KAFKA_AUTH_MODE": "jwt",
            "DURABLE_KAFKA_AUTH_JWT_ISSUER": ISSUER,
            "DURABLE_KAFKA_AUTH_JWT_AUDIENCE": AUDIENCE,
            "DURABLE_KAFKA_AUTH_JWT_JWKS_URL": self.url,
        }

    def rotate(self) -> None:
        """A new signing key: published beside the previous one, used for every token now."""
        with self._lock:
            self.rotations += 1
            self.signers = [self.signers[-1], Signer(f"key-{self.rotations}")]
            self.rotated_at = time.monotonic()

    def headers(self) -> dict[str, str]:
        with self._lock:
            signer = self.signers[-1]
        return {"Authorization": f"Bearer {signer.token(SCOPES)}"}

    def document(self) -> bytes:
        with self._lock:
            self.fetches += 1
            keys: list[Any] = [json.loads(s.jwks())["keys"][0] for s in self.signers]
        return json.dumps({"keys": keys}).encode()

    @contextlib.contextmanager
    def serving(self) -> Iterator[IdentityProvider]:
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = provider.document()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Cache-Control", f"max-age={MAX_AGE_S}")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                return  # quiet: the test's output is the model's

        server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            server.shutdown()
            server.server_close()
