"""The stores lists read from are reported by size when scraped, summed over the live ones of each name, and
a store that is gone is no longer counted."""

from __future__ import annotations

import gc

import orjson

from libs.runtime.metrics import LIST_STORES, PROCESS_REGISTRY
from services.api_server.listed import ListedObjects


def reported(store: str) -> float | None:
    return PROCESS_REGISTRY.get_sample_value("podway_list_store_objects", {"store": store})


def test_each_store_is_reported_by_how_many_objects_it_holds_while_it_lives() -> None:
    one, other = ListedObjects(), ListedObjects()
    LIST_STORES.track("test-listed", one)
    LIST_STORES.track("test-listed", other)
    for name in "abc":
        one.shown("Pod", orjson.dumps({"metadata": {"name": name}}), 1)
    other.shown("Pod", orjson.dumps({"metadata": {"name": "d"}}), 1)

    assert reported("test-listed") == 4

    del one
    gc.collect()
    assert reported("test-listed") == 1
