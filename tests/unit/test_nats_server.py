import socket

from libs.runtime.nats_server import EmbeddedNatsServer


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
