"""Stored objects as a list reads them, kept by uid and revision, so that listing thousands of unchanged
objects again reads only which versions are stored.

A list reads every object's documents from the database, decodes them and folds in the rows of its
conditions: about two thirds of admission's time on a list of pods. None of that changes while the object's
revision does not (a condition written moves its object's revision on), so it is kept here, per admission
process, for the objects lists read last. What a read derives from other objects (a node bound, why a pod
waits, a PodGroup's summary) is not kept: it is derived on every read, from the kept manifest's copy."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any

from libs.db.ports import UnitOfWork
from libs.db.records import ObjectVersion, StoredObject

KEPT = 50_000
"""Objects kept at most (the least recently read go first); about 1 kB each for a pod."""

Manifest = dict[str, Any]
FoldConditions = Callable[[UnitOfWork, list[StoredObject]], Awaitable[list[Manifest]]]
"""The objects' manifests with the rows of their conditions folded in (queries.with_conditions)."""


class StoredManifests:
    """Manifests with their conditions folded in, by uid, each with the revision it was read at."""

    def __init__(self, *, kept: int = KEPT) -> None:
        self._kept = kept
        self._entries: OrderedDict[str, tuple[int, Manifest]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    async def read(
        self, uow: UnitOfWork, versions: list[ObjectVersion], fold: FoldConditions
    ) -> list[tuple[Manifest, int | None]]:
        """Each listed object's manifest (a copy the caller may change) and the revision it was read at, in
        the order given; the ones kept at another revision, or not kept, are read now (one deleted since it
        was listed is left out)."""
        found: dict[str, tuple[Manifest, int | None]] = {}
        missing: list[str] = []
        for version in versions:
            kept = self._entries.get(version.uid)
            if kept is not None and version.revision is not None and kept[0] == version.revision:
                self._entries.move_to_end(version.uid)
                found[version.uid] = (_copy(kept[1]), kept[0])
            else:
                missing.append(version.uid)
        if missing:
            stored = await uow.objects.get_by_uids(missing)
            for obj, manifest in zip(stored, await fold(uow, stored), strict=True):
                found[obj.uid] = (_copy(manifest), obj.revision)
                if obj.revision is not None:
                    self._keep(obj.uid, obj.revision, manifest)
        return [found[v.uid] for v in versions if v.uid in found]

    def _keep(self, uid: str, revision: int, manifest: Manifest) -> None:
        self._entries[uid] = (revision, manifest)
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
