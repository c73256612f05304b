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
"""Objects of each kind kept at most by default (`PODWAY_API_LISTED_OBJECTS`): each its encoding and the
object decoded, about 10 kB in all for a small pod (0.9 kB of JSON, managedFields included), and its Table
row. Each kind has its own room, so that listing the nodes does not push out the pods."""

Row = Callable[[dict[str, Any]], list[Any]]


class _Listed:
    __slots__ = ("list", "revision", "row", "row_kind", "shown")

    def __init__(self, revision: int, obj: dict[str, Any], listed: int) -> None:
        self.revision = revision
        self.shown = obj
        self.row: list[Any] | None = None
        self.row_kind = ""
        self.list = listed


class _Kind:
    """One kind's objects, least recently listed first; `lists` counts the lists begun."""

    __slots__ = ("entries", "lists")

    def __init__(self) -> None:
        self.entries: OrderedDict[bytes, _Listed] = OrderedDict()
        self.lists = 0


class ListedObjects:
    """Objects shown by lists, by kind, encoding and revision.

    A list longer than the room kept would push out, page by page, the very objects its next pages (and the
    next list) meet: with least-recently-listed eviction alone, a list of 12,000 pods over room for 10,000
    would decode every one, every time. So an object is kept in place of another only when that other was
    not met by the list under way; when all were, the rest of the list is decoded without being kept, and
    the next list finds the first 10,000."""

    def __init__(self, *, kept: int = KEPT) -> None:
        self._kept = kept
        self._kinds: dict[str, _Kind] = {}
        self._by_identity: dict[int, _Listed] = {}

    def __len__(self) -> int:
        return sum(len(kind.entries) for kind in self._kinds.values())

    def full(self, kind: str) -> bool:
        """Whether it holds as many objects of `kind` as it keeps (always, when it keeps none)."""
        found = self._kinds.get(kind)
        return (len(found.entries) if found else 0) >= self._kept

    def begin(self, kind: str) -> None:
        """A list of `kind` begins (its first page): what it meets from now on is its own."""
        self._kind(kind).lists += 1

    def shown(self, kind: str, encoded: bytes, revision: int) -> dict[str, Any]:
        """The object admission encoded so, at `revision`, as lists show it (see objects.shown)."""
        store = self._kind(kind)
        entry = store.entries.get(encoded)
        if entry is not None and entry.revision == revision:
            store.entries.move_to_end(encoded)
            entry.list = store.lists
            return entry.shown
        obj = shown(orjson.loads(encoded), revision)
        if self._kept:
            self._keep(store, encoded, _Listed(revision, obj, store.lists))
        return obj

    def decode_ahead(self, kind: str, items: list[bytes], revisions: list[int]) -> None:
        """Decode a page before a list asks for it (nothing when nothing is kept: the list would decode it
        again)."""
        if self._kept:
            for encoded, revision in zip(items, revisions, strict=False):
                self.shown(kind, encoded, revision)

    def row(self, kind: str, obj: dict[str, Any], row: Row) -> list[Any]:
        """`row(obj)`, the cells of `obj`'s Table row, worked out once for an object shown from here."""
        entry = self._by_identity.get(id(obj))
        if entry is None or entry.shown is not obj:
            return row(obj)
        if entry.row is None or entry.row_kind != kind:
            entry.row, entry.row_kind = row(obj), kind
        return entry.row

    def _kind(self, kind: str) -> _Kind:
        found = self._kinds.get(kind)
        if found is None:
            found = self._kinds[kind] = _Kind()
        return found

    def _keep(self, store: _Kind, encoded: bytes, entry: _Listed) -> None:
        entries = store.entries
        self._forget(entries.pop(encoded, None))
        if len(entries) >= self._kept:
            oldest = next(iter(entries.values()))
            if oldest.list == store.lists:
                return  # every object kept was met by this list: keep them for the next one
            self._forget(entries.popitem(last=False)[1])
        entries[encoded] = entry
        self._by_identity[id(entry.shown)] = entry

    def _forget(self, entry: _Listed | None) -> None:
        if entry is not None and self._by_identity.get(id(entry.shown)) is entry:
            del self._by_identity[id(entry.shown)]
