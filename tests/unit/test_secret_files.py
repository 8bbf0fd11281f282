"""A watched file is reloaded once per change of what it holds or resolves to, as a Secret
volume's update swaps it (tests/secret_volume.py), and a failed reload is tried again at the
next change only."""

from __future__ import annotations

from pathlib import Path

from adapter.secret_files import SecretFiles
from adapter.tasks import Tasks
from tests.secret_volume import SecretVolume


async def test_a_swapped_file_is_reloaded_once_per_change(tmp_path: Path) -> None:
    volume = SecretVolume(tmp_path / "secret", {"token": b"one", "other": b"x"})
    reloads: list[bytes] = []

    def reload() -> bool:
        reloads.append(volume.path("token").read_bytes())
        return False  # refused: the next change is tried again all the same

    files = SecretFiles(0.1, Tasks())
    files.watch("token", [str(volume.path("token")), ""], reload)
    await files.check()
    assert reloads == []
    volume.update({"token": b"two", "other": b"x"})
    await files.check()
    await files.check()
    assert reloads == [b"two"]
    volume.update({"token": b"three", "other": b"x"})
    await files.check()
    assert reloads == [b"two", b"three"]


async def test_a_file_removed_and_back_is_two_changes(tmp_path: Path) -> None:
    path = tmp_path / "ca.pem"
    path.write_bytes(b"ca")
    reloads: list[bool] = []
    files = SecretFiles(0.1, Tasks())

    def reload() -> bool:
        reloads.append(path.exists())
        return True

    files.watch("ca", [str(path)], reload)
    path.unlink()
    await files.check()
    path.write_bytes(b"ca")
    await files.check()
    assert reloads == [False, True]
