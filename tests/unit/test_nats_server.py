import socket

import pytest

from libs.runtime import nats_server
from libs.runtime.nats_server import EmbeddedNatsServer, NatsServerError


def test_embedded_nats_server_answers_on_loopback_and_stops(tmp_path):
    server = EmbeddedNatsServer(data_dir=tmp_path).start()
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=1) as sock:
            assert sock.recv(4) == b"INFO"
        assert server.url == f"nats://127.0.0.1:{server.port}"
    finally:
        server.stop()
    assert server.process is not None
    assert server.process.poll() is not None


def test_a_port_taken_between_choosing_it_and_binding_it_is_chosen_again(tmp_path, monkeypatch):
    squatter = socket.socket()
    squatter.bind(("127.0.0.1", 0))
    squatter.listen()
    taken = squatter.getsockname()[1]
    offered = iter([taken])
    real_free_port = nats_server.free_port
    monkeypatch.setattr(nats_server, "free_port", lambda: next(offered, None) or real_free_port())
    try:
        server = EmbeddedNatsServer(data_dir=tmp_path).start()
        try:
            assert server.port != taken
            with socket.create_connection(("127.0.0.1", server.port), timeout=1) as sock:
                assert sock.recv(4) == b"INFO"
        finally:
            server.stop()
    finally:
        squatter.close()


def test_a_port_given_by_the_caller_is_not_changed_when_it_is_taken(tmp_path):
    squatter = socket.socket()
    squatter.bind(("127.0.0.1", 0))
    squatter.listen()
    try:
        with pytest.raises(NatsServerError, match="exited"):
            EmbeddedNatsServer(data_dir=tmp_path, port=squatter.getsockname()[1]).start()
    finally:
        squatter.close()


def test_free_ports_are_below_the_range_the_kernel_gives_outgoing_connections():
    ports = {nats_server.free_port() for _ in range(20)}
    assert all(port in nats_server.PRIVATE_PORTS for port in ports)
    assert len(ports) > 1
