"""The DRA allocator service: commits the devices the scheduler proposes for ResourceClaims, and releases
claims nothing reserves any more. One active replica on the shared fenced lease.

Wiring only: a leased service around the core's `ClaimLedger`. Consumed events become its inputs
(handlers.py), its outputs are written in one fenced transaction per pass (store.py).
"""

from __future__ import annotations

import logging

from libs.core.dra.ledger import ClaimLedger, ClaimsCommitted, LedgerOutput
from libs.db.ports import UnitOfWork
from libs.db.records import Fence
from libs.events.envelope import Envelope, EventPayload
from libs.leasing.leased_service import LeasedService
from services.dra_allocator.handlers import SUBJECTS, apply_event
from services.dra_allocator.store import load_ledger, write_outputs

log = logging.getLogger(__name__)


class DraAllocatorService(LeasedService[ClaimLedger, LedgerOutput]):
    """`start()` / `stop()`; `clock` times the lease and every written timestamp."""

    name = "dra_allocator"
    subjects = SUBJECTS

    async def load(self, uow: UnitOfWork, now: float) -> ClaimLedger:
        ledger = await load_ledger(uow)
        log.info(
            "dra allocator world",
            extra={"devices": len(ledger.inventory.devices), "claims": len(ledger.held)},
        )
        return ledger

    def apply(self, world: ClaimLedger, envelope: Envelope, payload: EventPayload, now: float) -> None:
        apply_event(world, envelope, payload)

    def run_pass(self, world: ClaimLedger, now: float) -> list[LedgerOutput]:
        return world.run_pass()

    def next_wakeup(self, world: ClaimLedger) -> float | None:
        return None

    async def write(self, uow: UnitOfWork, outputs: list[LedgerOutput], fence: Fence) -> None:
        await write_outputs(uow, outputs, now=self.clock())

    def lost(self, world: ClaimLedger, outputs: list[LedgerOutput]) -> None:
        world.propose_lost(outputs)

    def written(self, outputs: list[LedgerOutput], took_s: float) -> None:
        committed = sum(len(output.claims) for output in outputs if isinstance(output, ClaimsCommitted))
        if committed:
            log.debug("claims committed", extra={"claims": committed, "took_s": round(took_s, 4)})
