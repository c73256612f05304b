"""Device allocations: the database itself refuses a second holder of an exclusive device and shares
beyond a shareable device's capacity, on both databases."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from libs.db.errors import ConflictError
from libs.db.records import DeviceHold, DeviceShare
from libs.db.uow import SqlAlchemyUnitOfWork

UowFactory = Callable[[], SqlAlchemyUnitOfWork]
GPU = "gpu.example.com/node-a/gpu-0"
SHARED = "gpu.example.com/node-a/gpu-7"


async def test_an_exclusive_device_has_one_holder(uow_factory: UowFactory) -> None:
    async with uow_factory() as uow:
        await uow.device_allocations.hold([("ml/a", DeviceHold(GPU, "gpus", exclusive=True))], [])
        await uow.commit()

    async with uow_factory() as uow:
        with pytest.raises(ConflictError):
            await uow.device_allocations.hold([("ml/b", DeviceHold(GPU, "gpus", exclusive=True))], [])

    async with uow_factory() as uow:
        assert await uow.device_allocations.holders(GPU) == ["ml/a"]
        await uow.device_allocations.release(["ml/a"], [])
        await uow.device_allocations.hold([("ml/b", DeviceHold(GPU, "gpus", exclusive=True))], [])
        await uow.commit()
    async with uow_factory() as uow:
        assert await uow.device_allocations.holders(GPU) == ["ml/b"]


async def test_shares_never_exceed_a_capacity(uow_factory: UowFactory) -> None:
    def share(amount: int) -> DeviceShare:
        return DeviceShare(SHARED, "gpu.example.com/cores", 1000, amount)

    for claim in ("ml/a", "ml/b"):
        async with uow_factory() as uow:
            await uow.device_allocations.hold(
                [(claim, DeviceHold(SHARED, "gpus", exclusive=False))], [share(400)]
            )
            await uow.commit()

    async with uow_factory() as uow:
        with pytest.raises(ConflictError):
            await uow.device_allocations.hold(
                [("ml/c", DeviceHold(SHARED, "gpus", exclusive=False))], [share(300)]
            )

    async with uow_factory() as uow:
        assert await uow.device_allocations.consumed(SHARED, "gpu.example.com/cores") == 800
        await uow.device_allocations.release(["ml/a"], [share(400)])
        await uow.device_allocations.hold(
            [("ml/c", DeviceHold(SHARED, "gpus", exclusive=False))], [share(300)]
        )
        await uow.commit()
    async with uow_factory() as uow:
        assert await uow.device_allocations.consumed(SHARED, "gpu.example.com/cores") == 700
        assert await uow.device_allocations.holders(SHARED) == ["ml/b", "ml/c"]
