"""Client certificates as principals: a verified certificate's subject mapped to its scopes.

The TLS layer has already verified the certificate against `tls_client_ca_file` (chain,
validity dates) before any request is read, so what is left here is naming: the subject's
common name, spelt `CN=<name>`, looked up in `[auth.certificates]`. The principal's name is
that spelling, which no token name can take (`=` is not allowed in one), so a certificate
and a token never share producer ids by accident. A certificate whose subject is not listed
proves nothing: the request is treated as one without credentials.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from adapter.auth.principals import Principal
from adapter.auth.scopes import parse_scope

# `ssl.SSLSocket.getpeercert()`'s subject: RDNs, each a tuple of (attribute, value) pairs.
Subject = tuple[tuple[tuple[str, str], ...], ...]


class CertificateMappingError(ValueError):
    """An `[auth.certificates]` entry that is not valid; says which."""


def subject_name(subject: Subject) -> str | None:
    """`CN=<common name>` of a verified certificate's subject; None without exactly one CN."""
    names = [value for rdn in subject for key, value in rdn if key == "commonName"]
    return f"CN={names[0]}" if len(names) == 1 else None


@dataclass(frozen=True)
class CertificatePrincipals:
    by_subject: Mapping[str, Principal]

    @classmethod
    def of(cls, entries: Iterable[tuple[str, tuple[str, ...]]]) -> CertificatePrincipals:
        return cls({subject: _principal(subject, scopes) for subject, scopes in entries})

    def principal(self, subject: Subject) -> Principal | None:
        """The principal a verified certificate proves, or None when it is not listed."""
        name = subject_name(subject)
        return None if name is None else self.by_subject.get(name)


def _principal(subject: str, texts: tuple[str, ...]) -> Principal:
    scopes = [parse_scope(text) for text in texts]
    if None in scopes:
        raise CertificateMappingError(
            f"auth_certificates {subject!r}: scopes are read:, append: or admin: and a bucket"
        )
    # The certificate's own notAfter is enforced by the handshake: no expiry of our own.
    return Principal(subject, frozenset(s for s in scopes if s), None)
