"""`ids_after`: the one prefix-and-cursor walk of the catalog and the mounted key index."""

from __future__ import annotations

from topology.listing import ids_after

IDS = ["a", "b-1", "b-10", "b-2", "bz", "c"]


def test_prefix_only() -> None:
    assert list(ids_after(IDS, "b-", None)) == ["b-1", "b-10", "b-2"]


def test_cursor_inside_the_prefix() -> None:
    assert list(ids_after(IDS, "b-", "b-10")) == ["b-2"]


def test_cursor_before_the_prefix_starts_at_the_prefix() -> None:
    assert list(ids_after(IDS, "b-", "a")) == ["b-1", "b-10", "b-2"]


def test_cursor_past_the_prefix_yields_nothing() -> None:
    assert list(ids_after(IDS, "b-", "bz")) == []


def test_empty_prefix_pages_everything() -> None:
    assert list(ids_after(IDS, "", "b-2")) == ["bz", "c"]
    assert list(ids_after([], "", None)) == []
