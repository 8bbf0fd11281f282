"""Fetching a runtime classpath from Maven Central once, into a cache folder."""

from __future__ import annotations

import shutil
from pathlib import Path

from devstack.process import ServiceError, run_checked

COMPLETE = ".complete"


def is_fetched(target: Path) -> bool:
    return (target / COMPLETE).exists()


def copy_dependencies(pom: Path, target: Path, what: str) -> Path:
    """The runtime jars of `pom` in `target`, fetched with `mvn` unless already there.

    Fetched into a staging folder and renamed, so an interrupted fetch never looks complete.
    """
    if is_fetched(target):
        return target
    if shutil.which("mvn") is None:
        raise ServiceError(f"Maven (mvn) is needed to fetch {what}")
    staging = target.with_name(target.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    run_checked(
        [
            "mvn", "-q", "-B", "-f", str(pom), "dependency:copy-dependencies",
            "-DincludeScope=runtime", f"-DoutputDirectory={staging}",
        ],
        f"fetching {what} with Maven",
    )  # fmt: skip
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    (target / COMPLETE).touch()
    return target
