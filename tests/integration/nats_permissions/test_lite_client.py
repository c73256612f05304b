"""The CLI's blocking NATS client on the deployed config: it connects as the `client` user, gets replies on its
own inbox, and turns errors, missing responders and refusals into the RPC errors the CLI prints."""

from __future__ import annotations

import asyncio

import nats
import pytest

from libs.messaging.errors import RpcError, RpcTimeout, RpcUnavailable
from libs.messaging.lite import LiteNats
from libs.messaging.rpc import ERROR_HEADER
from tests.integration.nats_permissions.conftest import SecuredNats

GET = "podway.rpc.admission.get"


async def test_requests_as_the_client_user(secured_nats: SecuredNats):
    server = await nats.connect(
        secured_nats.server.url, user="admission", password=secured_nats.passwords["admission"]
    )

    async def answer(msg):
        if msg.data == b"fail":
            await server.publish(msg.reply, b"bad kind", headers={ERROR_HEADER: "ValueError"})
        elif msg.data != b"silent":
            await msg.respond(b"echo:" + msg.data)

    await server.subscribe(GET, queue="admission", cb=answer)
    await server.flush()

    def calls() -> list[object]:
        seen: list[object] = []
        with LiteNats(secured_nats.url("client")) as lite:
            assert lite.inbox == "_INBOX.client"
            seen.append(lite.request(GET, b"hello", timeout_s=5))
            for payload, subject in ((b"fail", GET), (b"silent", GET), (b"x", "podway.rpc.admission.apply")):
                try:
                    lite.request(subject, payload, timeout_s=0.3)
                except RpcError as exc:
                    seen.append(exc)
        return seen

    try:
        echoed, failed, silent, unserved = await asyncio.to_thread(calls)
    finally:
        await server.close()
    assert echoed == b"echo:hello"
    assert isinstance(failed, RpcError)
    assert (failed.error_type, failed.message) == ("ValueError", "bad kind")
    assert isinstance(silent, RpcTimeout)
    assert isinstance(unserved, RpcUnavailable)
    assert unserved.error_type == "NoResponders"


def test_a_wrong_password_or_no_server_is_bus_unavailable(secured_nats: SecuredNats):
    wrong = secured_nats.url("client").replace("%40", "%41", 1)
    with pytest.raises(RpcUnavailable, match="refused the connection"):
        LiteNats(wrong).connect()
    with pytest.raises(RpcUnavailable, match="cannot reach NATS"):
        LiteNats("nats://127.0.0.1:1").connect()
