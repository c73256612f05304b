"""The objects this API server last read or wrote, as a patch's first guess at the object it patches, as
kube-apiserver's GuaranteedUpdate starts from its watch cache's copy. The write names the revision the guess
was at, so a guess that is no longer current is refused by admission's precondition and the patch reads the
object and tries again; a patch naming a resourceVersion other than the guess's never starts from it. Nothing
is answered from here."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from services.api_server.routes import Target

KEPT = 10_000
"""Objects remembered at most (the least recently seen go first)."""

Key = tuple[str, str, str]


class LastSeen:
    """Objects as served (typed, with their resourceVersion) by kind, namespace and name; callers must not
    change what they are given."""

    def __init__(self, *, kept: int = KEPT) -> None:
        self._kept = kept
        self._objects: OrderedDict[Key, dict[str, Any]] = OrderedDict()

    def remember(self, target: Target, served: dict[str, Any]) -> None:
        if target.name is None or target.resource.kind == "Namespace":
            return  # a namespace is partly derived from what it holds: always read
        key = _key(target)
        self._objects[key] = served
        self._objects.move_to_end(key)
        while len(self._objects) > self._kept:
            self._objects.popitem(last=False)

    def guess(self, target: Target) -> dict[str, Any] | None:
        return self._objects.get(_key(target)) if target.name is not None else None

    def forget(self, target: Target) -> None:
        if target.name is not None:
            self._objects.pop(_key(target), None)


def _key(target: Target) -> Key:
    return (target.resource.kind, target.namespace or "", str(target.name))
