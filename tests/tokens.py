"""Real credentials for tests: an EC signing key with its JWKS, JWTs minted with it, and a
static token file. Nothing is faked: the adapter verifies them with the libraries it ships."""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec
from jwt.algorithms import ECAlgorithm

from adapter.auth.static_tokens import digest

ISSUER = "https://id.test"
AUDIENCE = "durable-streams"
KID = "test-key"


class Signer:
    """An ES256 key pair: `jwks` is what the adapter trusts, `token()` what a client sends."""

    def __init__(self, kid: str = KID) -> None:
        self.kid = kid
        self.key = ec.generate_private_key(ec.SECP256R1())

    def jwks(self) -> str:
        public: dict[str, Any] = json.loads(ECAlgorithm.to_jwk(self.key.public_key()))
        return json.dumps({"keys": [public | {"kid": self.kid, "use": "sig"}]})

    def token(
        self, scopes: list[str], ttl_s: float = 300, claims: dict[str, Any] | None = None
    ) -> str:
        now = time.time()
        body: dict[str, Any] = {
            "iss": ISSUER,
            "aud": AUDIENCE,
            "sub": "alice",
            "iat": int(now),
            "exp": int(now + ttl_s),
            "scope": " ".join(scopes),
        }
        return jwt.encode(
            body | (claims or {}), self.key, algorithm="ES256", headers={"kid": self.kid}
        )


def unsigned(scopes: list[str]) -> str:
    """An `alg: none` token carrying the given scopes (and otherwise valid claims)."""

    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    now = int(time.time())
    claims = {"iss": ISSUER, "aud": AUDIENCE, "sub": "mallory", "exp": now + 300}
    return f"{part({'alg': 'none', 'typ': 'JWT'})}.{part(claims | {'scope': ' '.join(scopes)})}."


def token_file(path: Path, entries: dict[str, tuple[str, list[str]]]) -> Path:
    """A static token file: name -> (token, scopes)."""
    lines = []
    for name, (token, scopes) in entries.items():
        lines += [
            "[[token]]",
            f'name = "{name}"',
            f'sha256 = "{digest(token)}"',
            f"scopes = {json.dumps(scopes)}",
            "",
        ]
    path.write_text("\n".join(lines))
    return path


def jwt_settings(signer: Signer, folder: Path) -> dict[str, Any]:
    """The settings of an adapter trusting `signer` (its JWKS written under `folder`)."""
    jwks = folder / "jwks.json"
    jwks.write_text(signer.jwks())
    return {
        "auth_mode": "jwt",
        "auth_jwt_issuer": ISSUER,
        "auth_jwt_audience": AUDIENCE,
        "auth_jwt_jwks_file": str(jwks),
    }
