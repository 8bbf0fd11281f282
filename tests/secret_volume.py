"""A folder laid out as the kubelet mounts a Secret, and updated as it updates one.

    <root>/tls.crt -> ..data/tls.crt
    <root>/..data -> ..2026_12_06_07_00_00.1
    <root>/..2026_12_06_07_00_00.1/tls.crt

An update writes every file into a new timestamped folder, points a new symlink `..data_tmp`
at it and renames that over `..data` (one atomic step), then removes the old folder: a reader
sees the old set or the new one, never a mix, and no file's own path changes.
"""

from __future__ import annotations

import itertools
import os
import shutil
from collections.abc import Mapping
from pathlib import Path

_VERSIONS = itertools.count(1)


class SecretVolume:
    def __init__(self, root: Path, files: Mapping[str, bytes]) -> None:
        self.root = root
        root.mkdir(parents=True)
        self.update(files)
        for name in files:
            (root / name).symlink_to(Path("..data") / name)

    def path(self, name: str) -> Path:
        return self.root / name

    def update(self, files: Mapping[str, bytes]) -> None:
        data = self.root / "..data"
        old = data.resolve() if data.is_symlink() else None
        version = self.root / f"..2026_12_06_07_00_00.{next(_VERSIONS)}"
        version.mkdir()
        for name, content in files.items():
            (version / name).write_bytes(content)
        staged = self.root / "..data_tmp"
        staged.symlink_to(version.name)
        os.replace(staged, data)
        if old is not None:
            shutil.rmtree(old)
