"""The official Python client's own test suite, from its published source distribution.

`durable-streams` 0.1.0 on PyPI ships its tests in the sdist (not in the wheel): the
integration ones (`tests/test_integration.py`) talk to a server through a `test_server`
fixture, which the client's own conftest starts from its monorepo's Node server. The tier in
`tests/clients/` runs that file unchanged with a conftest of ours whose `test_server` is the
adapter. The TypeScript client (`@durable-streams/client` 0.2.7 on npm) publishes no tests:
`tests/clients/ts_client.mjs` drives its public API instead, from the conformance node tree.
"""

from __future__ import annotations

import hashlib
import tarfile
from pathlib import Path

from devstack.paths import cache_dir
from devstack.process import ServiceError, run_checked

PYTHON_CLIENT = "durable-streams==0.1.0"
SDIST = "durable_streams-0.1.0.tar.gz"
SDIST_SHA256 = "3984b126010ada9d5208d0b2135acaaf1c20b3852908328c4ba8cc8e0ed42fd2"
UV_TOOLS = "uv-0.13.8"  # the Makefile's tool venv, which has pip


def python_tests() -> Path:
    """The folder of the client's published tests, fetched and unpacked once."""
    home = cache_dir() / "clients"
    unpacked = home / SDIST.removesuffix(".tar.gz") / "tests"
    if unpacked.is_dir():
        return unpacked
    sdist = home / SDIST
    if not sdist.exists():
        _download(home)
    if hashlib.sha256(sdist.read_bytes()).hexdigest() != SDIST_SHA256:
        sdist.unlink()
        raise ServiceError(f"{SDIST} does not have the expected sha256; removed, fetch again")
    with tarfile.open(sdist) as archive:
        archive.extractall(home, filter="data")
    return unpacked


def _download(home: Path) -> None:
    pip = cache_dir() / "tools" / UV_TOOLS / "bin" / "pip"
    if not pip.exists():
        raise ServiceError(f"{pip} is missing: run `make venv` first")
    argv = [str(pip), "download", "--quiet", "--no-deps", "--no-binary", ":all:"]
    run_checked([*argv, "--dest", str(home), PYTHON_CLIENT], f"pip download {PYTHON_CLIENT}")


def is_cached() -> bool:
    return (cache_dir() / "clients" / SDIST.removesuffix(".tar.gz") / "tests").is_dir()
