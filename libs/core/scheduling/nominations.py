"""The scheduler state machine and preemption: when a gang that does not fit asks the preemptor, and the
room the preemptor nominates for it, held by stand-ins so that no other group takes it."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from .book import GroupRecord
from .inputs import Nominated
from .machine_state import MachineState, NominatedRoom
from .snapshot import PlacementConflict

NOMINATED_PREFIX = "nominated/"
"""Uid prefix of the stand-in pods that hold a nominated PodGroup's room in the snapshot."""


class Nominations(MachineState):
    """Nominated room held and let go, and the preemption requests of failed cycles."""

    def _nominate(self, event: Nominated) -> None:
        key = self.book.group_uids.get(event.podgroup_uid)
        if key is None:
            return
        self._nominations[key] = NominatedRoom(tuple(event.nodes), event.expires_at)
        self._wake_everyone(event.cause)

    def _clear_nomination(self, group_uid: str) -> None:
        key = self.book.group_uids.get(group_uid)
        if key is not None and self._nominations.pop(key, None) is not None:
            self._release(key)
            self._wake_everyone(None)

    def _reserve(self, now: float) -> None:
        for key in list(self._nominations):
            self._release(key)
            nomination = self._nominations[key]
            group = self.book.groups.get(key)
            if nomination.expires_at <= now or group is None or not group.pending:
                del self._nominations[key]
                self.stats.wakeups += self.queue.wake(now)
                continue
            if len(self._hold(group, nomination)) == len(group.pending):
                # Its room is free (the victims have ended): retry it now, whatever its back-off.
                self.queue.activate(key, now)

    def _hold(self, group: GroupRecord, nomination: NominatedRoom) -> list[str]:
        """Stand-ins of the group's waiting pods take the nominated room, so no other group takes it."""
        held: list[str] = []
        for uid in sorted(group.pending):
            stand_in = dataclasses.replace(self.book.pods[uid].request, uid=NOMINATED_PREFIX + uid)
            for node in nomination.nodes:
                try:
                    self.snapshot.bind(stand_in, node)
                except (PlacementConflict, KeyError):
                    continue
                held.append(stand_in.uid)
                break
        self._reserved[group.key] = held
        return held

    def _release(self, key: str) -> None:
        for uid in self._reserved.pop(key, ()):
            self.snapshot.unbind(uid)

    def _preemption_wanted(
        self, group: GroupRecord, priority: int, reclaims_room: Callable[[], bool] = lambda: False
    ) -> int | None:
        """Ask the preemptor after a failed cycle when lower-priority pods hold capacity, and again after
        each later failed cycle once the answer could differ (pods were bound or ended, a nomination or a
        node changed): kube-scheduler runs PostFilter on every failed cycle; the queue's back-off bounds
        how often. Not while a nomination holds room for the group. Also when `reclaims_room`: its queue
        admitted it within nominal quota, and queues that borrow hold the room (placement-aware reclaim)."""
        if group.preemption_asked == self._preemption_generation or group.key in self._nominations:
            return None
        lowest = self.book.lowest_running_priority()
        if (lowest is None or lowest >= priority) and not reclaims_room():
            return None
        group.preemption_asked = self._preemption_generation
        return priority
