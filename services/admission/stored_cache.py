"""Stored objects as a list reads them, kept by uid and resource version, so that listing thousands of
unchanged objects again reads only which versions are stored.

A list reads every object's documents from the database, decodes them and folds in the rows of its
conditions: most of admission's time on a list of pods. None of that changes while the object's resource
version does not (a condition written or a pod bound moves it on), so it is kept here, per admission process,
for the objects read or created last. What a read derives from other objects (a node bound, why a pod waits,
a PodGroup's summary) is derived on every read, from the kept manifest's copy. A pod's encoding is kept too,
with the derived facts it showed (its node, why it waits): a list whose pods' versions and facts have not
changed since the last one sends those encodings again instead of copying, deriving and encoding each.

Pods kept as created are encoded ahead of the first list that reads them, while no apply waits
(`unlisted_pods`, see AdmissionService): the first `kubectl get pods -A` after a thousand pods were created
then costs what the next one does, as kube-apiserver's lists read its watch cache."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from typing import Any

from libs.db.ports import UnitOfWork
from libs.db.records import ObjectVersion, StoredObject
from services.admission.store import known_from_stored

KEPT = 20_000
"""Objects kept at most by default (the least recently read go first): 2.6 kB each for a small pod as
Python holds it, and its encoding once listed (under 1 kB), more for larger ones
(`PODWAY_ADMISSION_KEPT_OBJECTS`). A list larger than this reads every document, as without keeping any."""

Manifest = dict[str, Any]
FoldConditions = Callable[[UnitOfWork, list[StoredObject]], Awaitable[list[Manifest]]]
"""The objects' manifests with the rows of their conditions folded in (queries.with_conditions)."""


class _Entry:
    """One object as kept: its manifest at a resource version, and the last encoding of what a read showed
    of it, with what that reading derived from other objects."""

    __slots__ = ("derived", "encoded", "manifest", "resource_version")

    def __init__(self, resource_version: int, manifest: Manifest) -> None:
        self.resource_version = resource_version
        self.manifest = manifest
        self.derived: Hashable = None
        self.encoded: bytes | None = None


class StoredManifests:
    """Manifests with their conditions folded in, by uid, each with the resource version it was read at."""

    def __init__(self, *, kept: int = KEPT) -> None:
        self._kept = kept
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._unlisted: OrderedDict[str, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def encodings(self) -> int:
        """How many of the objects kept have an encoding kept with them."""
        return sum(entry.encoded is not None for entry in self._entries.values())

    async def read(
        self, uow: UnitOfWork, versions: list[ObjectVersion], fold: FoldConditions
    ) -> list[tuple[Manifest, int | None]]:
        """Each listed object's manifest (a copy the caller may change) and its revision, in the order given;
        the ones kept at another resource version, or not kept, are read now (one deleted since it was listed
        is left out)."""
        return [
            (copy_for_derived(manifest), revision)
            for _, manifest, revision in await self.read_shared(uow, versions, fold)
        ]

    async def read_shared(
        self, uow: UnitOfWork, versions: list[ObjectVersion], fold: FoldConditions
    ) -> list[tuple[str, Manifest, int | None]]:
        """As `read`, with each object's uid, and the manifests as kept: the caller must not change them."""
        found: dict[str, tuple[str, Manifest, int | None]] = {}
        missing: list[str] = []
        for version in versions:
            kept = self._entries.get(version.uid)
            if kept is not None and kept.resource_version == version.resource_version:
                self._entries.move_to_end(version.uid)
                found[version.uid] = (version.uid, kept.manifest, version.revision)
            else:
                missing.append(version.uid)
        if missing:
            stored = await uow.objects.get_by_uids(missing)
            for obj, manifest in zip(stored, await fold(uow, stored), strict=True):
                found[obj.uid] = (obj.uid, manifest, obj.revision)
                self._keep(obj.uid, obj.resource_version, manifest)
        return [found[v.uid] for v in versions if v.uid in found]

    def encoded(self, uid: str, manifest: Manifest, derived: Hashable) -> bytes | None:
        """The encoding kept of this object as read with these derived facts, if the last read had them."""
        entry = self._entries.get(uid)
        if entry is None or entry.manifest is not manifest or entry.derived != derived:
            return None
        return entry.encoded

    def keep_encoded(self, uid: str, manifest: Manifest, derived: Hashable, encoded: bytes) -> None:
        """Keep how this object read, with the derived facts its reading depended on."""
        entry = self._entries.get(uid)
        if entry is not None and entry.manifest is manifest:
            entry.derived, entry.encoded = derived, encoded

    def keep_created(self, created: list[StoredObject]) -> None:
        """Objects just created and committed, as a list will read them: a new object has no condition yet."""
        for obj in created:
            self._keep(obj.uid, obj.resource_version, known_from_stored(obj).manifest)
            if obj.kind == "Pod" and self._kept:
                self._unlisted[obj.uid] = None
        while len(self._unlisted) > self._kept:
            self._unlisted.popitem(last=False)

    def has_unlisted(self) -> bool:
        """Whether pods kept as created wait to be encoded for lists."""
        return bool(self._unlisted)

    def unlisted_pods(self, most: int) -> list[tuple[str, Manifest]]:
        """Up to `most` pods kept as created that no list has encoded yet (uid, the kept manifest), oldest
        first; each is handed out once (one read or changed meanwhile is no longer waiting)."""
        found: list[tuple[str, Manifest]] = []
        while self._unlisted and len(found) < most:
            uid, _ = self._unlisted.popitem(last=False)
            entry = self._entries.get(uid)
            if entry is not None and entry.encoded is None:
                found.append((uid, entry.manifest))
        return found

    def _keep(self, uid: str, resource_version: int, manifest: Manifest) -> None:
        self._entries[uid] = _Entry(resource_version, manifest)
        self._entries.move_to_end(uid)
        while len(self._entries) > self._kept:
            self._entries.popitem(last=False)


def copy_for_derived(manifest: Manifest) -> Manifest:
    """A copy whose top level, spec and status a reader may change (what reads derive is written there)."""
    copied = dict(manifest)
    for part in ("spec", "status"):
        if isinstance(copied.get(part), dict):
            copied[part] = dict(copied[part])
    return copied
