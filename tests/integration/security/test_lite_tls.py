"""The CLI's read path over TLS: the blocking client upgrades the connection after the server's INFO with the
same PODWAY_NATS_TLS_CA / _CERT / _KEY as the services, and is refused without them."""

from __future__ import annotations

import pytest

from libs.messaging.errors import RpcUnavailable
from libs.messaging.lite import LiteNats
from libs.runtime.nats_server import EmbeddedNatsServer
from tests.integration.security.test_nats_tls import pki, tls_env, tls_nats  # noqa: F401  (fixtures)


@pytest.mark.usefixtures("tls_env")
def test_the_read_path_reaches_a_tls_bus(tls_nats: EmbeddedNatsServer):  # noqa: F811
    # the server's no-responders status comes back over the TLS connection
    with LiteNats(tls_nats.url) as nats, pytest.raises(RpcUnavailable, match="nobody serves"):
        nats.request("podway.rpc.admission.get", b"{}", timeout_s=5)


def test_without_the_certificates_the_read_path_is_refused(tls_nats: EmbeddedNatsServer):  # noqa: F811
    with pytest.raises(RpcUnavailable):
        LiteNats(tls_nats.url, connect_timeout_s=3).connect()
