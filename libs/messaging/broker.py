"""The faststream `NatsBroker` every service is wired with."""

from __future__ import annotations

import logging
import re
import ssl
import weakref
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit, urlunsplit

from faststream.nats import NatsBroker
from faststream.nats.security import NatsSecurity, NatsUserPassword
from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.protocol.parser import PERMISSIONS_ERR

from libs.events.catalogue import DLQ_STREAM, EVENTS_STREAM
from libs.messaging.consumer import EventConsumer
from libs.messaging.permissions import INBOX_PREFIX
from libs.messaging.rpc import start_rpc
from libs.messaging.streams import ensure_streams, require_streams, stream_configs
from libs.messaging.tls import TLS_CA_ENV, TLS_CERT_ENV, TLS_KEY_ENV, tls_context
from libs.runtime.urls import split_urls

__all__ = [
    "TLS_CA_ENV",
    "TLS_CERT_ENV",
    "TLS_KEY_ENV",
    "make_broker",
    "provision_streams",
    "start_broker",
    "tls_context",
]

log = logging.getLogger(__name__)

# A stuck drain must never hold a service's shutdown for nats-py's default 30 s.
DRAIN_TIMEOUT_S = 5
# A restarted nats-server (or another server of the cluster) is found again however long the bus was away: a
# connection that gave up would leave a service beating on, deaf. Unlimited attempts, each server of the list
# (and those the cluster announces) retried every half second once all are gone.
RECONNECT_WAIT_S = 0.5
# While reconnecting, publishes wait in the client up to this many bytes and go out once connected; past it a
# publish raises at once. A JetStream publish whose PubAck does not come back in time is an error to its
# caller either way: the outbox relay logs it and publishes the row again (same Nats-Msg-Id, stored once).
PENDING_BYTES = 2 * 1024 * 1024
_SUBJECT_TOKEN = re.compile(r"[A-Za-z0-9_-]+")


@dataclass(frozen=True)
class NatsEndpoint:
    """A NATS URL (or a comma-separated list of a cluster's URLs) split into the addresses and the user that
    connects to them."""

    url: str
    user: str | None = None
    password: str | None = None

    @classmethod
    def parse(cls, url: str) -> NatsEndpoint:
        """`nats://user:password@host:4222` (user and password percent-encoded) -> address and credentials.
        A URL with a user and no password (a token) or none at all is kept as it is. In a list, every URL
        that carries a user and password must carry the same ones (one connection, one NATS user)."""
        addresses, credentials = [], set()
        for one in split_urls(url):
            parts = urlsplit(one)
            if parts.username is None or parts.password is None:
                addresses.append(one)
                continue
            credentials.add((unquote(parts.username), unquote(parts.password)))
            addresses.append(urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2])))
        if len(credentials) > 1:
            raise ValueError("the NATS URLs of one connection carry different users or passwords")
        user, password = credentials.pop() if credentials else (None, None)
        return cls(",".join(addresses), user, password)

    @property
    def servers(self) -> list[str]:
        """Each server's URL, for nats-py's `servers=`."""
        return split_urls(self.url)

    @property
    def inbox_prefix(self) -> str:
        """`_INBOX.<user>`: the server lets each user subscribe to its own replies only (see permissions.py).
        Still under `_INBOX.>`, so a server that grants `_INBOX.>` to everyone works too."""
        if self.user is None or not _SUBJECT_TOKEN.fullmatch(self.user):
            return INBOX_PREFIX
        return f"{INBOX_PREFIX}.{self.user}"


Broker = NatsBroker
"""A service's connection to the bus, named so that services need not import faststream."""

_ENDPOINTS: weakref.WeakKeyDictionary[NatsBroker, NatsEndpoint] = weakref.WeakKeyDictionary()


def make_broker(url: str, name: str, *, message_log_level: int = logging.DEBUG) -> NatsBroker:
    """A broker for service `name` (shown in NATS monitoring); per-message logs at DEBUG, not INFO. `url` may
    list a cluster's servers, comma-separated: the broker connects to one and reconnects across all.

    Credentials in `url` connect as that NATS user (see `NatsEndpoint`); the URL's address is all the broker
    keeps, so they never reach its AsyncAPI description. TLS is on for a `tls://` URL or when
    PODWAY_NATS_TLS_CA names a CA (see `tls_context`)."""
    endpoint = NatsEndpoint.parse(url)
    context = tls_context()
    use_ssl = True if context is not None or any(u.startswith("tls://") for u in endpoint.servers) else None
    security: NatsSecurity | None = None
    if endpoint.user is not None and endpoint.password is not None:
        security = NatsUserPassword(endpoint.user, endpoint.password, ssl_context=context, use_ssl=use_ssl)
    elif use_ssl:
        security = NatsSecurity(ssl_context=context or ssl.create_default_context(), use_ssl=True)
    broker = NatsBroker(
        endpoint.servers,
        name=name,
        security=security,
        inbox_prefix=endpoint.inbox_prefix,
        error_cb=_report_refusals(name, endpoint.user),
        allow_reconnect=True,
        max_reconnect_attempts=-1,
        reconnect_time_wait=RECONNECT_WAIT_S,  # type: ignore[arg-type]  # nats-py takes seconds as a float
        dont_randomize=False,  # each process picks a random server of the list: connections spread out
        pending_size=PENDING_BYTES,
        drain_timeout=DRAIN_TIMEOUT_S,
        graceful_timeout=DRAIN_TIMEOUT_S,
        log_level=message_log_level,
    )
    _ENDPOINTS[broker] = endpoint
    return broker


def bus_state(broker: NatsBroker) -> str:
    """`connected`, `reconnecting` (the server went away; the client keeps trying) or `closed` (gone for
    good, or never connected)."""
    client: Client | None = getattr(broker, "_connection", None)
    if client is None or client.is_closed:
        return "closed"
    if client.is_connected:
        return "connected"
    return "reconnecting"


def _report_refusals(name: str, user: str | None) -> Callable[[Exception], Awaitable[None]]:
    """nats-server answers a publish or subscription outside the user's permissions with an error on the
    connection, not on the call: say which connection and user it was, so the config can be fixed."""

    async def on_error(error: Exception) -> None:
        if PERMISSIONS_ERR in str(error).lower():
            log.error(
                "nats-server refused %s (NATS user %s): %s",
                name,
                user or "-",
                error,
                extra={"nats_client": name, "nats_user": user},
            )

    return on_error


class UserJetStream(JetStreamContext):
    """A JetStream context that knows which NATS user its connection authenticated as (None: no user)."""

    def __init__(self, client: Client, user: str | None) -> None:
        super().__init__(client)
        self.user = user


def connection(broker: NatsBroker) -> Client:
    """The connected nats-py client under a started (or connected) broker."""
    return broker.connection


def jetstream(broker: NatsBroker) -> UserJetStream:
    """A JetStream context on the broker's connection."""
    endpoint = _ENDPOINTS.get(broker)
    return UserJetStream(broker.connection, endpoint.user if endpoint is not None else None)


async def start_broker(broker: NatsBroker, consumers: Sequence[EventConsumer] = ()) -> None:
    """Connect, check the streams exist (events, and the consumers' streams and dead letters), provision the
    durable consumers (creating or updating them), then start the subscribers. The one start-up sequence of
    every service."""
    await broker.connect()
    js = jetstream(broker)
    dead_letters = [DLQ_STREAM] if consumers else []
    await require_streams(js, [EVENTS_STREAM, *(consumer.stream for consumer in consumers), *dead_letters])
    for consumer in consumers:
        await consumer.ensure(js)
    await broker.start()
    await start_rpc(broker)
    for consumer in consumers:
        await consumer.start()


async def provision_streams(url: str, *, replicas: int | None = None) -> None:
    """Create or update the streams on the server (or cluster) at `url`: the admin step before any service
    starts. `replicas`: how many servers hold each stream (default `stream_replicas()`)."""
    broker = make_broker(url, "podway-streams")
    await broker.connect()
    try:
        await ensure_streams(jetstream(broker), stream_configs(replicas=replicas))
    finally:
        await broker.stop()
