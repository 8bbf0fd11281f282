"""Whether every instance of the deployment sees this instance's `fs` cold folder.

The `fs` object store is a folder of one machine. An instance that cannot see the chunks and
snapshot blobs another instance wrote there answers 500 for them (the manifest lists them,
Kafka has freed their records): the deployment must run as one instance, or its instances
on one machine sharing the folder, or on a folder every host mounts (`cold_dir_shared`).

Each instance writes two markers into its folder before it joins the owners' group
(`ownership.py`): `instances/<instance id>` and `instances/url/<its advertised URL, quoted>`.
An instance whose marker is in our folder shares it; one without does not:

- at start (before joining), a member of the owners' group (known by its static instance id;
  a `serve --workers` worker is a member of its own) without a marker makes this instance
  refuse to start;
- later (every supervisor round), an owner of a write slot (the URL its owner record
  names, as the catalog applied it) without a marker makes the `object_store` check fail,
  with the instances named: the instance goes on serving (the chunks it wrote are still
  readable from it, none is lost) while an operator fixes the deployment.

The later check asks Kafka nothing: describing a group is a coordinator request of
librdkafka's admin client, which aborts the process when the coordinator's connection drops
under it (a known bug of librdkafka 2.16), so it is made once, at start, by a child process
(`topology/group_members.py`), and never while serving.

`cold_dir_shared = true` skips the markers and trusts the operator's word.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from urllib.parse import quote, unquote

from adapter.log.errors import LogUnavailable
from adapter.objects.base import ObjectStore
from topology.admin import TopologyAdmin
from topology.errors import TopologyError

MARKERS = "instances/"
URL_MARKERS = MARKERS + "url/"


class FolderNotShared(TopologyError):
    """Another instance of the deployment writes to a folder this one cannot see."""


def strangers(members: Iterable[str], marked: Iterable[str], ours: str) -> list[str]:
    """The members other than us that left no marker in our folder (`marked`: the names of
    the markers, less their prefix)."""
    return sorted(set(members) - set(marked) - {ours})


def _names(keys: Iterable[str], prefix: str) -> list[str]:
    return [key.removeprefix(prefix) for key in keys]


def refusal(others: list[str]) -> str:
    return (
        f"the fs cold folder is not shared with instance(s) {', '.join(others)} of this "
        "deployment: each would serve chunks the others cannot read. Use the s3 backend, "
        "or one folder every instance sees (and cold_dir_shared = true if their markers "
        f"cannot show it: {MARKERS}<instance id> in the folder)"
    )


class FolderGuard:
    def __init__(
        self,
        store: ObjectStore,
        admin: TopologyAdmin,
        group: str,
        ours: str,
        url: str,
        owners: Callable[[], Iterable[str]],
    ) -> None:
        self.store = store
        self.admin = admin
        self.group = group
        self.ours = ours
        self.url = url
        self.owners = owners  # the advertised URLs of the write slots' owners

    async def refuse_strangers(self) -> None:
        """Mark our folder, then raise FolderNotShared if a member has no marker in it (or
        LogUnavailable if the group cannot be described now: the start is tried again)."""
        await self.store.put(MARKERS + self.ours, self.ours.encode())
        await self.store.put(URL_MARKERS + quote(self.url, safe=""), self.url.encode())
        try:
            members = await self.admin.group_instance_ids(self.group)
        except TopologyError as error:
            raise LogUnavailable(f"describing the owners' group: {error}") from error
        others = strangers(members, _names(await self.store.keys(MARKERS), MARKERS), self.ours)
        if others:
            raise FolderNotShared(refusal(others))

    async def strangers(self) -> list[str]:
        """The slot owners (by URL) that left no marker in our folder."""
        owners = [quote(url, safe="") for url in self.owners()]
        marked = _names(await self.store.keys(URL_MARKERS), URL_MARKERS)
        ours = quote(self.url, safe="")
        return [unquote(name) for name in strangers(owners, marked, ours)]
