"""Stored objects as a list reads them, kept by uid and resource version, so that listing thousands of
unchanged objects again reads only which versions are stored.

A list reads every object's documents from the database, decodes them and folds in the rows of its
conditions: most of admission's time on a list of pods. None of that changes while the object's resource
version does not (a condition written or a pod bound moves it on), so it is kept here, per admission process,
for the objects read or created last. What a read derives from other objects (a node bound, why a pod waits,
a PodGroup's summary) is not kept: it is derived on every read, from the kept manifest's copy."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any

from libs.db.ports import UnitOfWork
from libs.db.records import ObjectVersion, StoredObject
from services.admission.store import known_from_stored

KEPT = 20_000
"""Objects kept at most by default (the least recently read go first): 2.6 kB each for a small pod as
Python holds it, more for larger ones (`PODWAY_ADMISSION_KEPT_OBJECTS`). A list larger than this reads
every document, as without keeping any."""

Manifest = dict[str, Any]
FoldConditions = Callable[[UnitOfWork, list[StoredObject]], Awaitable[list[Manifest]]]
"""The objects' manifests with the rows of their conditions folded in (queries.with_conditions)."""


class StoredManifests:
    """Manifests with their conditions folded in, by uid, each with the resource version it was read at."""

    def __init__(self, *, kept: int = KEPT) -> None:
        self._kept = kept
        self._entries: OrderedDict[str, tuple[int, Manifest]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    async def read(
        self, uow: UnitOfWork, versions: list[ObjectVersion], fold: FoldConditions
    ) -> list[tuple[Manifest, int | None]]:
        """Each listed object's manifest (a copy the caller may change) and its revision, in the order given;
        the ones kept at another resource version, or not kept, are read now (one deleted since it was listed
        is left out)."""
        found: dict[str, tuple[Manifest, int | None]] = {}
        missing: list[str] = []
        for version in versions:
            kept = self._entries.get(version.uid)
            if kept is not None and kept[0] == version.resource_version:
                self._entries.move_to_end(version.uid)
                found[version.uid] = (_copy(kept[1]), version.revision)
            else:
                missing.append(version.uid)
        if missing:
            stored = await uow.objects.get_by_uids(missing)
            for obj, manifest in zip(stored, await fold(uow, stored), strict=True):
                found[obj.uid] = (_copy(manifest), obj.revision)
                self._keep(obj.uid, obj.resource_version, manifest)
        return [found[v.uid] for v in versions if v.uid in found]

    def keep_created(self, created: list[StoredObject]) -> None:
        """Objects just created and committed, as a list will read them: a new object has no condition yet."""
        for obj in created:
            self._keep(obj.uid, obj.resource_version, known_from_stored(obj).manifest)

    def _keep(self, uid: str, resource_version: int, manifest: Manifest) -> None:
        self._entries[uid] = (resource_version, manifest)
        self._entries.move_to_end(uid)
        while len(self._entries) > self._kept:
            self._entries.popitem(last=False)


def _copy(manifest: Manifest) -> Manifest:
    """A copy whose top level, spec and status a reader may change (what reads derive is written there)."""
    copied = dict(manifest)
    for part in ("spec", "status"):
        if isinstance(copied.get(part), dict):
            copied[part] = dict(copied[part])
    return copied
