"""The console script's choice of event loop, and what `serve --help` says of the settings."""

from __future__ import annotations

import asyncio
import contextlib
import io
import re
from dataclasses import fields

import pytest
import uvloop

from adapter.cli import awaits, loop_factory, main
from adapter.declared import flag_name
from adapter.faults_for_tests import PlantedFaults


def test_uvloop_is_the_loop_asked_for() -> None:
    loop = loop_factory("uvloop")()
    try:
        assert isinstance(loop, uvloop.Loop)
    finally:
        loop.close()


def test_asyncio_is_the_standard_library_loop() -> None:
    loop = loop_factory("asyncio")()
    try:
        assert isinstance(loop, asyncio.BaseEventLoop)
        assert not isinstance(loop, uvloop.Loop)
        assert loop.run_until_complete(asyncio.sleep(0, "ran")) == "ran"
    finally:
        loop.close()


def _serve_help() -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        main(["serve", "--help"])
    return " ".join(out.getvalue().split())  # argparse wraps lines


def test_serve_help_gives_each_default_as_it_is() -> None:
    text = _serve_help()
    assert re.search(r"--workers WORKERS default 1;", text), text
    assert re.search(r"--replication-factor FACTOR default auto;", text), text


def test_serve_help_has_no_flag_of_a_test_fault() -> None:
    text = _serve_help()
    faults = [field.name for field in fields(PlantedFaults)]
    assert faults
    assert [name for name in faults if flag_name(name) in text] == []


async def test_the_awaits_of_a_suspended_task_are_named_outermost_first() -> None:
    """What a request held to the drain's end waits on (`log_held_requests`)."""
    event = asyncio.Event()

    async def inner() -> None:
        await event.wait()

    async def outer() -> None:
        await inner()

    task = asyncio.create_task(outer())
    await asyncio.sleep(0)
    names = [where.split()[0] for where in awaits(task.get_coro())]
    assert names[:3] == ["outer", "inner", "wait"]
    event.set()
    await task
    assert awaits(task.get_coro()) == []
