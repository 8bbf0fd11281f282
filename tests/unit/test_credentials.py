"""How long a key set fetched from an identity provider is used before it is fetched again."""

from __future__ import annotations

from adapter.http.credentials import lifetime


def test_a_key_sets_lifetime_follows_its_max_age_within_the_bounds() -> None:
    assert lifetime(None, 300) == 300
    assert lifetime("public, max-age=60", 300) == 60
    assert lifetime("max-age=86400", 300) == 300
    assert lifetime("max-age=0", 300) == 10
    assert lifetime("no-store", 300) == 10
    assert lifetime("max-age=soon", 300) == 300
