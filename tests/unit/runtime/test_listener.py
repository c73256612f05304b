"""The router front's shared socket: opened once by the stack, served by every router process it starts."""

from __future__ import annotations

import socket
import sys

import pytest

from libs.runtime.listener import inherited_listener, open_listener, parse_address, url_of
from libs.runtime.settings import PodwaySettings
from libs.runtime.stack import service_specs
from libs.runtime.supervisor import ServiceSpec, Supervisor


def test_an_address_is_host_and_port():
    assert parse_address("127.0.0.1:8400") == ("127.0.0.1", 8400)
    assert parse_address("[::1]:0") == ("::1", 0)
    for wrong in ("8400", "localhost", "host:port", "127.0.0.1:70000", ":8400"):
        with pytest.raises(ValueError, match="use HOST:PORT"):
            parse_address(wrong)


def test_the_router_runs_one_process_per_instance_on_the_stacks_socket():
    listener = open_listener("127.0.0.1", 0)
    try:
        settings = PodwaySettings(router_processes=3)
        specs = service_specs(settings, {"X": "1"}, ("admission", "llm_router"), listener)
        router = [s for s in specs if s.argv[-1] == "services.llm_router.main"]
        assert [s.name for s in router] == ["llm_router", "llm_router-1", "llm_router-2"]
        assert [s.env["PODWAY_INSTANCE"] for s in router] == ["0", "1", "2"]
        assert {s.env["PODWAY_ROUTER_HTTP_FD"] for s in router} == {str(listener.fileno())}
        assert all(s.pass_fds == (listener.fileno(),) for s in router)
        admission = next(s for s in specs if s.name == "admission")
        assert admission.pass_fds == ()
        assert "PODWAY_ROUTER_HTTP_FD" not in admission.env
    finally:
        listener.close()


def test_a_child_serves_the_socket_it_inherits_and_the_address_outlives_it(tmp_path):
    listener = open_listener("127.0.0.1", 0)
    fd = listener.fileno()
    # The child accepts one connection on the inherited descriptor, answers, and exits.
    serve_once = (
        "import sys; from libs.runtime.listener import inherited_listener; "
        f"s = inherited_listener({fd}); s.setblocking(True); c, _ = s.accept(); c.sendall(b'hi'); c.close()"
    )
    supervisor = Supervisor(
        [ServiceSpec("child", [sys.executable, "-c", serve_once], beats=False, pass_fds=(fd,))], tmp_path
    )
    try:
        host, port = listener.getsockname()[:2]
        assert url_of(listener) == f"http://{host}:{port}"
        supervisor.start_all(now=0.0)
        with socket.create_connection((host, port), timeout=30) as first:
            assert first.recv(2) == b"hi"
        child = supervisor.children["child"].process
        assert child is not None
        assert child.wait(30) == 0
        # No process serves it now, yet a client still connects: the connection waits in the queue.
        with socket.create_connection((host, port), timeout=5):
            pass
    finally:
        supervisor.stop_all()
        listener.close()


def test_a_descriptor_that_is_not_a_listening_socket_is_refused():
    with socket.socket() as plain, pytest.raises(ValueError, match="not a listening socket"):
        inherited_listener(plain.fileno())
