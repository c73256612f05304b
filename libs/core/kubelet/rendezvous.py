"""Where a pod lives on its host and how a gang finds itself: loopback addresses, ranks, and the variables
PyTorch-style launchers read (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

HOST_IP = "127.0.0.1"
DEFAULT_MASTER_PORT = 29500
SLOTS_PER_OCTET = 254


def pod_ip(slot: int) -> str:
    """The loopback address of a pod slot: 127.0.1.1, 127.0.1.2, ... (127.0.0.x is the host's)."""
    return f"127.0.{1 + slot // SLOTS_PER_OCTET}.{1 + slot % SLOTS_PER_OCTET}"


def free_pod_ip(taken: Iterable[str]) -> str:
    """The lowest pod address not taken."""
    used = set(taken)
    slot = 0
    while pod_ip(slot) in used:
        slot += 1
    return pod_ip(slot)


@dataclass(frozen=True, slots=True)
class GangMember:
    rank: int
    hostname: str
    ip: str


def gang_members(pods: Iterable[tuple[str, int | None, str]]) -> list[GangMember]:
    """Ranks for a gang's pods given as (name, completion index or None, ip): by completion index, then by
    name, so every member computes the same ranks."""
    ordered = sorted(pods, key=lambda pod: (pod[1] if pod[1] is not None else 1 << 30, pod[0]))
    return [GangMember(rank, name, ip) for rank, (name, _, ip) in enumerate(ordered)]


def members_file(members: Iterable[GangMember]) -> str:
    """One line per member: `rank hostname ip`."""
    return "".join(f"{m.rank} {m.hostname} {m.ip}\n" for m in members)


def rendezvous_env(members: list[GangMember], me: str, members_path: str) -> dict[str, str]:
    """The gang's variables for member `me`; rank 0's address is the master's."""
    rank = next(m.rank for m in members if m.hostname == me)
    return {
        "MASTER_ADDR": members[0].ip,
        "MASTER_PORT": str(DEFAULT_MASTER_PORT),
        "RANK": str(rank),
        "WORLD_SIZE": str(len(members)),
        "PODWAY_GANG_MEMBERS": members_path,
    }


def visible_devices(devices: Mapping[str, list[str]]) -> str:
    """`0,3` for devices named `gpu-0` and `gpu-3` (any class, any pool prefix), in index order."""
    indexes = sorted(
        {
            int(tail)
            for names in devices.values()
            for name in names
            if (tail := name.rsplit("-", 1)[-1]).isdigit()
        }
    )
    return ",".join(map(str, indexes))
