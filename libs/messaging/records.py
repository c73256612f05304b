"""Records in a JetStream key-value bucket, each changed by compare-and-set: the shared state of a fleet of
processes (e.g. the router's budget ledgers) with no lock and no server of its own."""

from __future__ import annotations

from collections.abc import Callable

from nats.js import JetStreamContext
from nats.js.errors import KeyDeletedError, KeyNotFoundError, KeyWrongLastSequenceError
from nats.js.kv import KeyValue

MAX_ATTEMPTS = 32


class RecordContended(RuntimeError):
    """Other processes changed the record every time this one tried."""


class KvRecords:
    """`await records.open()`, then `await records.change(key, fn)`: fn maps the current value (None when the
    key is new) to the next one, and is applied again to the newer value whenever another writer got in first."""

    def __init__(self, js: JetStreamContext, bucket: str) -> None:
        self._js = js
        self._bucket = bucket
        self._kv: KeyValue | None = None

    async def open(self) -> None:
        self._kv = await self._js.key_value(self._bucket)

    async def change(self, key: str, change: Callable[[bytes | None], bytes]) -> bytes:
        kv = self._kv
        assert kv is not None, "open() first"
        for _ in range(MAX_ATTEMPTS):
            current, revision = await _read(kv, key)
            value = change(current)
            try:
                if revision is None:
                    await kv.create(key, value)
                else:
                    await kv.update(key, value, last=revision)
            except KeyWrongLastSequenceError:
                continue
            return value
        raise RecordContended(f"{self._bucket}/{key}: changed by others {MAX_ATTEMPTS} times in a row")

    async def read(self, key: str) -> bytes | None:
        kv = self._kv
        assert kv is not None, "open() first"
        return (await _read(kv, key))[0]


async def _read(kv: KeyValue, key: str) -> tuple[bytes | None, int | None]:
    try:
        entry = await kv.get(key)
    except KeyDeletedError:
        return None, None
    except KeyNotFoundError:
        return None, None
    return entry.value, entry.revision
