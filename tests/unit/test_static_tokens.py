"""The static token file: hashed tokens with scopes, and every way an entry can be wrong."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapter.auth.principals import InvalidToken
from adapter.auth.scopes import Operation
from adapter.auth.static_tokens import StaticTokens, TokenFileError, digest, new_token
from tests.tokens import token_file


def test_a_listed_token_is_its_principal(tmp_path: Path) -> None:
    token = new_token()
    tokens = StaticTokens.load(token_file(tmp_path / "t.toml", {"bot": (token, ["read:a*"])}))
    principal = tokens.verify(token, 0)
    assert principal.name == "bot"
    assert principal.may(Operation.READ, "abc")
    assert not principal.may(Operation.APPEND, "abc")
    assert principal.expires_at is None
    with pytest.raises(InvalidToken, match="unknown"):
        tokens.verify(token + "x", 0)


def test_the_file_holds_digests_not_tokens(tmp_path: Path) -> None:
    token = new_token()
    path = token_file(tmp_path / "t.toml", {"bot": (token, [])})
    assert token not in path.read_text()
    assert digest(token) in path.read_text()
    assert len(token) >= 43


def test_an_expired_entry_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "t.toml"
    path.write_text(
        f'[[token]]\nname = "old"\nsha256 = "{digest("x" * 30)}"\nscopes = []\n'
        "expires_at = 2020-01-01T00:00:00Z\n"
    )
    tokens = StaticTokens.load(path)
    assert tokens.verify("x" * 30, 1_500_000_000).name == "old"
    with pytest.raises(InvalidToken, match="expired"):
        tokens.verify("x" * 30, 1_600_000_000)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[[token]]\nname = 'a'\nsha256 = 'abc'\n", "sha256"),
        (f"[[token]]\nname = 'a b'\nsha256 = '{'0' * 64}'\n", "name"),
        (f"[[token]]\nname = 'a'\nsha256 = '{'0' * 64}'\nscopes = ['write:x']\n", "scopes"),
        (f"[[token]]\nname = 'a'\nsha256 = '{'0' * 64}'\nscopes = 'read:x'\n", "scopes"),
        (f"[[token]]\nname = 'a'\nsha256 = '{'0' * 64}'\ntoken = 'x'\n", "keys are"),
        (f"[[token]]\nname = 'a'\nsha256 = '{'0' * 64}'\nexpires_at = 2020-01-01\n", "date"),
        (
            f"[[token]]\nname='a'\nsha256='{'0' * 64}'\n[[token]]\nname='b'\nsha256='{'0' * 64}'\n",
            "repeats",
        ),
        ("[other]\nx = 1\n", "only"),
        ("= broken", "cannot read"),
    ],
)
def test_bad_files_name_the_problem(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "t.toml"
    path.write_text(text)
    with pytest.raises(TokenFileError, match=message):
        StaticTokens.load(path)


def test_a_missing_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(TokenFileError, match="cannot read"):
        StaticTokens.load(tmp_path / "absent.toml")
