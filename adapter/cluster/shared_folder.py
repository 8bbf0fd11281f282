"""Whether every instance of the deployment sees this instance's `fs` cold folder.

The `fs` object store is a folder of one machine. An instance that cannot see the chunks and
snapshot blobs another instance wrote there answers 500 for them (the manifest lists them,
Kafka has freed their records): the deployment must run as one instance, or its instances
on one machine sharing the folder, or on a folder every host mounts (`cold_dir_shared`).

The instances of a deployment are the members of its owners' group (`ownership.py`), each
known by its static instance id (a `serve --workers` worker is a member of its own). Each
instance writes a marker `instances/<instance id>` into its folder before it joins the group,
so a member whose marker is in our folder shares it; a member without one does not:

- at start (before joining), such a member makes this instance refuse to start;
- later (every supervisor round), one that joined since makes the `object_store` check
  fail, with the members named: the instance goes on serving (the chunks it wrote are
  still readable from it, none is lost) while an operator fixes the deployment.

`cold_dir_shared = true` skips the markers and trusts the operator's word.
"""

from __future__ import annotations

from collections.abc import Iterable

from adapter.log.errors import LogUnavailable
from adapter.objects.base import ObjectStore
from topology.admin import TopologyAdmin
from topology.errors import TopologyError

MARKERS = "instances/"


class FolderNotShared(TopologyError):
    """Another instance of the deployment writes to a folder this one cannot see."""


def strangers(members: Iterable[str], marked: Iterable[str], ours: str) -> list[str]:
    """The members (instance ids) other than us that left no marker in our folder."""
    known = {key.removeprefix(MARKERS) for key in marked} | {ours}
    return sorted(set(members) - known)


def refusal(others: list[str]) -> str:
    return (
        f"the fs cold folder is not shared with instance(s) {', '.join(others)} of this "
        "deployment: each would serve chunks the others cannot read. Use the s3 backend, "
        "or one folder every instance sees (and cold_dir_shared = true if their markers "
        f"cannot show it: {MARKERS}<instance id> in the folder)"
    )


class FolderGuard:
    def __init__(self, store: ObjectStore, admin: TopologyAdmin, group: str, ours: str) -> None:
        self.store = store
        self.admin = admin
        self.group = group
        self.ours = ours

    async def refuse_strangers(self) -> None:
        """Mark our folder, then raise FolderNotShared if a member has no marker in it (or
        LogUnavailable if the group cannot be described now: the start is tried again)."""
        await self.store.put(MARKERS + self.ours, self.ours.encode())
        try:
            others = await self.strangers()
        except TopologyError as error:
            raise LogUnavailable(f"describing the owners' group: {error}") from error
        if others:
            raise FolderNotShared(refusal(others))

    async def strangers(self) -> list[str]:
        members = await self.admin.group_instance_ids(self.group)
        return strangers(members, await self.store.keys(MARKERS), self.ours)
