"""Objects as this API server's lists decoded them, by admission's encoding of each, so that listing thousands
of unchanged objects again decodes none of them.

Admission answers a list's pages as lines, one encoded object per line (`encode_framed`), and sends an
unchanged object's encoding again as it kept it (admission's stored_cache.py). Decoding a page of 500 pods
and shaping each (its resourceVersion, its Table row) was most of this API server's time on a list of
10,000; an encoding met before gives back the object shown then and its row, as kube-apiserver's lists read
its watch cache's decoded objects. Nothing here is answered without admission's page: a changed object has
a new encoding, and one gone is not on the page.

Callers must not change what they are given: the same object is shown to every list that meets it."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import orjson

from services.api_server.objects import shown

KEPT = 10_000
"""Objects kept at most by default (the least recently listed go first; `PODWAY_API_LISTED_OBJECTS`): each
its encoding and the object decoded, about 10 kB in all for a small pod (0.9 kB of JSON, managedFields
included), and its Table row. A list of more objects than this decodes every one, as without keeping any."""

Row = Callable[[dict[str, Any]], list[Any]]


class _Listed:
    __slots__ = ("revision", "row", "row_kind", "shown")

    def __init__(self, revision: int, obj: dict[str, Any]) -> None:
        self.revision = revision
        self.shown = obj
        self.row: list[Any] | None = None
        self.row_kind = ""


class ListedObjects:
    """Objects shown by lists, by their encoding and revision."""

    def __init__(self, *, kept: int = KEPT) -> None:
        self._kept = kept
        self._entries: OrderedDict[bytes, _Listed] = OrderedDict()
        self._by_identity: dict[int, _Listed] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def shown(self, encoded: bytes, revision: int) -> dict[str, Any]:
        """The object admission encoded so, at `revision`, as lists show it (see objects.shown)."""
        entry = self._entries.get(encoded)
        if entry is not None and entry.revision == revision:
            self._entries.move_to_end(encoded)
            return entry.shown
        obj = shown(orjson.loads(encoded), revision)
        if self._kept:
            self._keep(encoded, _Listed(revision, obj))
        return obj

    def decode_ahead(self, items: list[bytes], revisions: list[int]) -> None:
        """Decode a page before a list asks for it (nothing when nothing is kept: the list would decode it
        again)."""
        if self._kept:
            for encoded, revision in zip(items, revisions, strict=False):
                self.shown(encoded, revision)

    def row(self, kind: str, obj: dict[str, Any], row: Row) -> list[Any]:
        """`row(obj)`, the cells of `obj`'s Table row, worked out once for an object shown from here."""
        entry = self._by_identity.get(id(obj))
        if entry is None or entry.shown is not obj:
            return row(obj)
        if entry.row is None or entry.row_kind != kind:
            entry.row, entry.row_kind = row(obj), kind
        return entry.row

    def _keep(self, encoded: bytes, entry: _Listed) -> None:
        self._forget(self._entries.pop(encoded, None))
        self._entries[encoded] = entry
        self._by_identity[id(entry.shown)] = entry
        while len(self._entries) > self._kept:
            _, oldest = self._entries.popitem(last=False)
            self._forget(oldest)

    def _forget(self, entry: _Listed | None) -> None:
        if entry is not None and self._by_identity.get(id(entry.shown)) is entry:
            del self._by_identity[id(entry.shown)]
