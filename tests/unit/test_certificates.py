"""Client certificates as principals: a verified subject's CN looked up in the mapping."""

from __future__ import annotations

import pytest

from adapter.auth.certificates import (
    CertificateMappingError,
    CertificatePrincipals,
    Subject,
    subject_name,
)
from adapter.auth.scopes import Operation

BOT: Subject = ((("organizationName", "acme"),), (("commonName", "ingest-bot"),))


def test_the_subject_is_named_by_its_single_common_name() -> None:
    assert subject_name(BOT) == "CN=ingest-bot"
    assert subject_name(((("organizationName", "acme"),),)) is None
    two: Subject = ((("commonName", "a"),), (("commonName", "b"),))
    assert subject_name(two) is None  # ambiguous: proves neither


def test_a_listed_subject_is_a_principal_with_its_scopes() -> None:
    principals = CertificatePrincipals.of([("CN=ingest-bot", ("append:logs-*", "read:logs-*"))])
    principal = principals.principal(BOT)
    assert principal is not None
    assert principal.name == "CN=ingest-bot"
    assert principal.may(Operation.APPEND, "logs-eu")
    assert not principal.may(Operation.ADMIN, "logs-eu")
    assert principal.expires_at is None


def test_an_unlisted_subject_proves_nothing() -> None:
    principals = CertificatePrincipals.of([("CN=other", ("read:*",))])
    assert principals.principal(BOT) is None


def test_a_scope_that_is_not_ours_is_an_error_naming_the_subject() -> None:
    with pytest.raises(CertificateMappingError, match="'CN=ingest-bot'"):
        CertificatePrincipals.of([("CN=ingest-bot", ("write:logs",))])
