"""The CLI's read path: find the stack and read objects and the audit log over the small blocking NATS client,
with nothing heavier than the standard library (no pydantic, no faststream, no nats-py).

Writes (apply, delete, submit) go through `PodwayClient`, whose models validate what is sent; reads send the
few fields of `GetRequest` / `EventsRequest` as JSON (a unit test checks those models accept them).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from libs.api.lists import DEFAULT_CHUNK_SIZE, read_pages
from libs.messaging.lite import LiteNats
from libs.runtime.stack_info import StackInfo, process_alive
from libs.runtime.urls import url_with_credentials

# The subjects of libs.events.catalogue (importing it loads every event model); a unit test keeps them equal.
ADMISSION_GET = "podway.rpc.admission.get"
ADMISSION_EVENTS = "podway.rpc.admission.events"
EVENTS_SUBJECTS = "podway.events.>"
DEFAULT_NAMESPACE = "default"
NAMESPACED = {
    "CompositePodGroup",
    "PodGroup",
    "Pod",
    "Workload",
    "Job",
    "ResourceClaim",
    "ResourceClaimTemplate",
    "LocalQueue",
}


class StackNotFound(Exception):
    """No NATS URL given and no running stack in the data dir."""


def nats_url_for(nats_url: str | None, data_dir: Path | None) -> str:
    """As PodwaySettings resolves it: the flag, else PODWAY_NATS_URL (with PODWAY_NATS_USER / _PASSWORD put
    in), else the stack running in the data dir (the flag, PODWAY_DATA_DIR or `.podway`)."""
    url = nats_url or os.environ.get("PODWAY_NATS_URL") or None
    user, password = os.environ.get("PODWAY_NATS_USER"), os.environ.get("PODWAY_NATS_PASSWORD")
    if (user is None) != (password is None):
        raise ValueError("PODWAY_NATS_USER and PODWAY_NATS_PASSWORD go together")
    if url:
        return url_with_credentials(url, user, password) if user and password is not None else url
    directory = data_dir or Path(os.environ.get("PODWAY_DATA_DIR") or ".podway")
    info = StackInfo.read(directory / "run")
    if info is None or not process_alive(info.pid):
        raise StackNotFound(f"no running stack in {directory}: run `podway up` or pass --nats-url")
    return info.nats_url


class ReadClient:
    """`with ReadClient(url) as client:` get objects, read stories, follow them."""

    def __init__(self, nats_url: str, *, timeout_s: float = 30.0) -> None:
        self.nats_url = nats_url
        self.timeout_s = timeout_s
        self._nats = LiteNats(nats_url)

    def __enter__(self) -> ReadClient:
        self._nats.connect()
        return self

    def __exit__(self, *_: object) -> None:
        self._nats.close()

    def get(
        self,
        kind: str,
        name: str | None = None,
        namespace: str | None = None,
        *,
        all_namespaces: bool = False,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
    ) -> list[dict[str, Any]]:
        """One object, or a whole list read in pages of `chunk_size` items (0: in one answer)."""
        ns = (namespace or DEFAULT_NAMESPACE) if kind in NAMESPACED else ""
        body = {"kind": kind, "namespace": ns, "name": name, "all_namespaces": all_namespaces}
        return read_pages(self._page, body, chunk_size if name is None else 0)

    def _page(self, body: dict[str, Any]) -> tuple[list[dict[str, Any]], str | None]:
        reply = json.loads(
            self._nats.request(ADMISSION_GET, json.dumps(body).encode(), timeout_s=self.timeout_s)
        )
        return reply["items"], reply.get("continue_token")

    def events(
        self, *, correlation_id: str | None = None, podgroup: str | None = None, after_seq: int = 0
    ) -> tuple[list[dict[str, Any]], int]:
        """A story from the audit log (everything with neither filter) and the last seq it holds."""
        body = {"correlation_id": correlation_id, "podgroup": podgroup, "after_seq": after_seq, "limit": 1000}
        reply = json.loads(
            self._nats.request(ADMISSION_EVENTS, json.dumps(body).encode(), timeout_s=self.timeout_s)
        )
        return reply["events"], int(reply.get("last_seq") or after_seq)

    def follow(
        self, *, correlation_id: str | None = None, podgroup: str | None = None, poll_s: float = 0.5
    ) -> Iterator[dict[str, Any]]:
        """The story so far, then each event as it is committed, in the audit log's order, until interrupted."""
        after = 0
        while True:
            events, after = self.events(correlation_id=correlation_id, podgroup=podgroup, after_seq=after)
            yield from events
            if len(events) < 1000:
                time.sleep(poll_s)

    def changes(self, *, idle_s: float = 2.0, settle_s: float = 0.05) -> Iterator[None]:
        """Yields whenever events were published (at most every `settle_s`), or after `idle_s` without any,
        on a connection of its own: the moments a watcher should read again."""
        with LiteNats(self.nats_url, name="podway-cli-watch") as nats:
            for _ in nats.wakeups(EVENTS_SUBJECTS, idle_s=idle_s, settle_s=settle_s):
                yield None
