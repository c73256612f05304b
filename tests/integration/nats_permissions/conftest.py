"""A real nats-server running deploy/nats/nats-server.conf as it is, only its store dir moved into the test's
tmp dir (the port and monitoring port are set on the command line), each user's password from the environment."""

from __future__ import annotations

import logging
import re
import secrets
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from faststream.nats import NatsBroker
from nats.aio.client import Client

from libs.messaging.broker import connection, make_broker, provision_streams
from libs.messaging.permissions import USERS
from libs.runtime.nats_server import EmbeddedNatsServer
from libs.runtime.settings import url_with_credentials

ROOT = Path(__file__).resolve().parents[3]
CONFIG = ROOT / "deploy" / "nats" / "nats-server.conf"
STORE_DIR_LINE = "store_dir: /data/jetstream"
SYS_PASSWORD_VARIABLE = "NATS_SYS_PASSWORD"

_REFUSAL = re.compile(
    r'permissions violation for (publish|subscription) to "([^"]+)"(?: using queue "([^"]+)")?'
)


@dataclass
class SecuredNats:
    """The running server and every user's password."""

    server: EmbeddedNatsServer
    passwords: dict[str, str]

    def url(self, user: str) -> str:
        """The server's URL with `user`'s credentials (percent-encoded: the passwords have `/@:%` in them)."""
        return url_with_credentials(self.server.url, user, self.passwords[user])


def deployed_config(store_dir: Path) -> str:
    text = CONFIG.read_text()
    assert text.count(STORE_DIR_LINE) == 1, "the deployed config names its JetStream store once"
    return text.replace(STORE_DIR_LINE, f"store_dir: {store_dir}")


def password() -> str:
    """A random password with characters a URL must escape. It starts with a letter: nats-server reads a
    variable's value as a config value, so one starting with a digit would be taken for a number or a date."""
    return f"pw{secrets.token_urlsafe(12)}/@:%"


@pytest.fixture
def secured_nats(tmp_path: Path) -> Iterator[SecuredNats]:
    """The deployed config on a fresh server, its streams provisioned by the `migrate` user."""
    config = tmp_path / "nats-server.conf"
    config.write_text(deployed_config(tmp_path / "jetstream"))
    passwords = {user.name: password() for user in USERS}
    env = {user.password_variable: passwords[user.name] for user in USERS}
    env[SYS_PASSWORD_VARIABLE] = password()
    server = EmbeddedNatsServer(data_dir=tmp_path / "nats", config_file=config, env=env).start()
    try:
        secured = SecuredNats(server, passwords)
        _provision(secured)
        yield secured
    finally:
        server.stop()


def _provision(secured: SecuredNats) -> None:
    from tests.conftest import _run_blocking

    _run_blocking(provision_streams(secured.url("migrate")))


@dataclass(frozen=True)
class Refusal:
    """One publish or subscription nats-server refused, as reported on the connection (nats-py lowercases the
    error, subject included: compare with `Refusal.of`)."""

    action: str  # "publish" or "subscription"
    subject: str
    queue: str | None = None

    @classmethod
    def of(cls, action: str, subject: str, queue: str | None = None) -> Refusal:
        return cls(action, subject.lower(), queue.lower() if queue else None)


def refusals(caplog: pytest.LogCaptureFixture, client_name: str | None = None) -> set[Refusal]:
    """What the server refused, read from the log lines `make_broker` writes for each refusal (of one
    connection, or of all)."""
    found = set()
    for record in caplog.records:
        if record.name != "libs.messaging.broker" or not hasattr(record, "nats_client"):
            continue
        if client_name is not None and record.nats_client != client_name:
            continue
        match = _REFUSAL.search(record.getMessage())
        assert match is not None, record.getMessage()
        found.add(Refusal.of(*match.groups()))
    return found


async def settle(client: Client) -> None:
    """Wait until the server has handled everything sent on `client` so far (and its refusals are in).

    One `flush()` is not enough with nats-py 2.16: it writes its PING straight to the socket, ahead of
    publishes still queued for its flusher task, so the PONG can come back before their refusals. That task
    writes them while the first PING is out; the second PING goes after them."""
    await client.flush()
    await client.flush()


@pytest.fixture
def refusal_log(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.ERROR, logger="libs.messaging.broker")
    return caplog


@pytest.fixture
async def connect(secured_nats: SecuredNats) -> AsyncIterator[object]:
    """`await connect(user)`: a connected broker as `user`, named `probe-<user>`; all closed after the test."""
    brokers: list[NatsBroker] = []

    async def open_as(user: str) -> NatsBroker:
        broker = make_broker(secured_nats.url(user), f"probe-{user}")
        await broker.connect()
        brokers.append(broker)
        return broker

    yield open_as
    for broker in brokers:
        await connection(broker).close()
