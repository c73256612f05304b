"""The promises Podway keeps, checked over what it wrote: the stored objects, the bindings, the device
allocations and the audit log. `podway check` and the chaos tests run this after any run; an empty list means
every promise held.

Pure: the caller reads the rows (in the audit log's commit order) and passes them in."""

from __future__ import annotations

from collections import defaultdict

from libs.core.scheduling.objects import ApiObject

from .answers import gangs_ask_again, preemptions_answered, proposals_answered
from .causation import answers_name_their_cause, applies_are_answered, one_outcome_per_request, told_why
from .devices import (
    claim_holders,
    claims_in_use,
    device_held_once,
    held_whole,
    node_devices_not_overcommitted,
    published_devices,
)
from .holds import (
    composites_not_below_min_group_count,
    gangs_not_below_min_count,
    holds_end_with_their_pods,
    nodes_not_overcommitted,
    pods_bound_once,
    state_has_its_event,
)
from .node_health import holds_on_live_nodes, lost_nodes
from .quotas import gangs_hold_their_quota, queues_within_their_limits, quota_holdings
from .records import BindingRow, DeviceAllocationRow, RecordedEvent, Records, Violation

__all__ = ["BindingRow", "DeviceAllocationRow", "RecordedEvent", "Records", "Violation", "check"]


def check(records: Records) -> list[Violation]:
    """Every violated invariant, in a stable order."""
    by_kind: dict[str, list[ApiObject]] = defaultdict(list)
    for obj in records.objects:
        by_kind[obj.kind].append(obj)
    pods, claims, slices = by_kind["Pod"], by_kind["ResourceClaim"], by_kind["ResourceSlice"]
    holds = {binding.pod_uid: binding.node_name for binding in records.bindings}
    present = frozenset(obj.uid for obj in records.objects)
    devices = published_devices(slices)
    holders = claim_holders(claims, records.device_allocations)
    in_use = claims_in_use(claims, pods, by_kind["PodGroup"], holds)
    nodes = frozenset(node.name for node in by_kind["Node"])
    ledger, holdings, labels = quota_holdings(records.objects, holds)
    return [
        *holds_end_with_their_pods(pods, holds),
        *nodes_not_overcommitted(by_kind["Node"], pods, holds),
        *gangs_not_below_min_count(by_kind["PodGroup"], pods, holds, records.events),
        *composites_not_below_min_group_count(by_kind["CompositePodGroup"], by_kind["PodGroup"], pods, holds),
        *pods_bound_once(records.events),
        *state_has_its_event(pods, holds, records.events),
        *device_held_once(holders, devices, in_use),
        *node_devices_not_overcommitted(
            by_kind["Node"], pods, holds, by_kind["DeviceClass"], slices, held_whole(holders, in_use)
        ),
        *holds_on_live_nodes(nodes, lost_nodes(records.events), pods, holds, holders, devices),
        *answers_name_their_cause(records.events),
        *applies_are_answered(records.events, told_why(pods)),
        *proposals_answered(records.events, present),
        *preemptions_answered(records.events, present),
        *gangs_ask_again(records.events, pods, present),
        *one_outcome_per_request(records.events, records.expected_requests),
        *queues_within_their_limits(ledger, holdings, labels),
        *gangs_hold_their_quota(ledger, holdings, labels),
    ]
