"""The console script's choice of event loop."""

from __future__ import annotations

import asyncio

import uvloop

from adapter.cli import loop_factory


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
