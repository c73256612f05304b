"""The scheduler state machine's placements proposed for claims: each waits for the DRA allocator's answer,
and is released (the gang backs off and retries) when its claims are refused or take too long."""

from __future__ import annotations

import dataclasses
import heapq
from collections.abc import Mapping
from typing import Any

from .book import TERMINAL, GroupRecord
from .claim_holds import ClaimHolds
from .inputs import ClaimsHeld
from .model import CycleDecision, ResourceTotals, Unschedulable
from .outputs import AllocationFailed, Output
from .queue import backoff_seconds

CLAIMS_NOT_ALLOCATED = (
    "ResourceClaims {claims} were not allocated within {seconds:g} s; the placement was released"
)


class ClaimProposals(ClaimHolds):
    """Placements waiting for their claims, their deadlines, and what the allocator answered."""

    def _await_claims(self, group: GroupRecord, decision: CycleDecision, since: float) -> None:
        group.awaiting_claims = decision
        group.claims_wait += 1
        deadline = since + self.settings.claims_timeout_s
        heapq.heappush(self._claims_deadlines, (deadline, group.key, group.claims_wait))

    def _expire_claims_waits(self, now: float) -> list[Output]:
        expired: list[Output] = []
        while self._claims_deadlines and self._claims_deadlines[0][0] <= now:
            _, key, wait = heapq.heappop(self._claims_deadlines)
            group = self.book.groups.get(key)
            if group is None or group.awaiting_claims is None or group.claims_wait != wait:
                continue
            message = CLAIMS_NOT_ALLOCATED.format(
                claims=", ".join(self._claim_names(group)), seconds=self.settings.claims_timeout_s
            )
            expired.append(self._release_claims_wait(group, message, None))
        return expired

    def _next_claims_deadline(self) -> float | None:
        while self._claims_deadlines:
            _, key, wait = self._claims_deadlines[0]
            group = self.book.groups.get(key)
            if group is not None and group.awaiting_claims is not None and group.claims_wait == wait:
                return self._claims_deadlines[0][0]
            heapq.heappop(self._claims_deadlines)
        return None

    def _claims_held(self, event: ClaimsHeld) -> None:
        """Hold what the allocator committed, per owner (a repeated answer replaces what an owner held); a
        pod that has ended already holds nothing."""
        group = self._group_by_uid(event.podgroup_uid)
        by_owner: dict[str, list[Mapping[str, Any]]] = {}
        for pod_uid, record in event.allocations:
            if pod_uid is None:
                if group is not None:
                    by_owner.setdefault(group.key, []).append(record)
                continue
            pod = self.book.pods.get(pod_uid)
            if pod is not None and pod.phase not in TERMINAL:
                by_owner.setdefault(pod_uid, []).append(record)
        for owner, records in by_owner.items():
            self._hold_recorded(owner, records)

    def _claims_failed(self, group_uid: str, reason: str, cause: str | None) -> None:
        group = self._group_by_uid(group_uid)
        if group is not None and group.awaiting_claims is not None:
            message = f"claims could not be allocated: {reason}"
            self._outputs.append(self._release_claims_wait(group, message, cause))

    def _release_claims_wait(self, group: GroupRecord, message: str, cause: str | None) -> AllocationFailed:
        """Forget a placement waiting for its claims: the gang backs off and retries."""
        decision = group.awaiting_claims
        assert decision is not None
        group.awaiting_claims = None
        self._forget(group, decision, cause)
        return self._refused(group, decision, message, cause)

    def _refused(
        self, group: GroupRecord, decision: CycleDecision, message: str, cause: str | None = None
    ) -> AllocationFailed:
        refused = dataclasses.replace(
            decision,
            placements=(),
            assignments=(),
            domain=None,
            unschedulable=Unschedulable(
                message=message,
                reason_counts={},
                requested=ResourceTotals(),
                required_count=len(decision.placements),
                topology_key=decision.domain.key if decision.domain else None,
            ),
        )
        self.queue.done(refused, now=self._now)
        group.unschedulable_attempts += 1
        return AllocationFailed(
            group=self._ref(group),
            reason=message,
            min_count=group.min_count or 1,
            backoff_s=backoff_seconds(group.unschedulable_attempts),
            cause=cause,
            condition_false=not group.scheduled,
        )

    def _forget(self, group: GroupRecord, decision: CycleDecision, cause: str | None) -> None:
        for placement in decision.placements:
            if self.snapshot.is_assumed(placement.pod_uid):
                self._unbind(placement.pod_uid, cause)
            self.book.unplace(placement.pod_uid)
        if "" in (decision.claims or {}):
            self._release_group_claims(group.key)

    def _claim_names(self, group: GroupRecord) -> tuple[str, ...]:
        names = {str(claim.get("name")) for claim in group.obj.spec.get("resourceClaims") or []}
        for pod in self.book.members(group.key):
            names.update(str(claim.get("name")) for claim in pod.obj.spec.get("resourceClaims") or [])
        return tuple(sorted(names))
