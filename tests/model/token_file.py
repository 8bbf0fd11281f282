"""The static tokens a model deployment may trust instead of an identity provider
(`auth_mode = "static"`): one token file both instances read, rotated as an operator does it
(operations, "Rotating secrets"): the new token is listed beside the old one, clients move to
it once every instance lets it in, then the old one is removed and refused everywhere."""

from __future__ import annotations

import json
import secrets
import time
from pathlib import Path

from adapter.auth.static_tokens import digest
from tests.identity_provider import SCOPES

PRINCIPAL = "alice"  # as the identity provider's tokens: producer ids are scoped by it
POLL_MS = 200  # how often the instances read the file again (`secret_poll_ms`)


class TokenFile:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.tokens = [secrets.token_urlsafe(24)]  # the listed ones; clients use the last
        self.rotations = 0
        self.rotated_at = time.monotonic()
        self._write()

    def settings(self) -> dict[str, str]:
        """What an instance trusting this file is given."""
        return {
            "DURABLE_KAFKA_AUTH_MODE": "static",
            "DURABLE_KAFKA_AUTH_TOKEN_FILE": str(self.path),
            "DURABLE_KAFKA_SECRET_POLL_MS": str(POLL_MS),
        }

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[-1]}"}

    def rotate(self) -> dict[str, str]:
        """A new token listed beside the current one, and used from now on; the headers of
        the one it replaces, which stays listed until `retire`."""
        previous = self.headers()
        self.tokens = [self.tokens[-1], secrets.token_urlsafe(24)]
        self.rotations += 1
        self.rotated_at = time.monotonic()
        self._write()
        return previous

    def retire(self) -> None:
        """Only the newest token stays listed."""
        self.tokens = self.tokens[-1:]
        self._write()

    def _write(self) -> None:
        # One entry per token, all naming the same principal; written whole, then renamed, so
        # an instance never reads half a file.
        entries = [
            f'[[token]]\nname = "{PRINCIPAL}"\nsha256 = "{digest(token)}"\n'
            f"scopes = {json.dumps(SCOPES)}\n"
            for token in self.tokens
        ]
        draft = self.path.with_suffix(".draft")
        draft.write_text("\n".join(entries))
        draft.replace(self.path)
