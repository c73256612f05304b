"""A listening TCP socket that outlives the processes serving it.

`podway up` opens the router's front socket once and hands it to every router process it starts (they inherit
the descriptor). All of them accept from the one queue the kernel keeps for it, so while one process dies or
restarts the others take its share, and a connection that arrives while none is running waits in the queue
instead of being refused: the address never goes away while the supervisor lives. (`SO_REUSEPORT` would give
each process a queue of its own, and the connections waiting in a dying process's queue are reset.)
"""

from __future__ import annotations

import socket

DEFAULT_BACKLOG = 4096


def parse_address(address: str) -> tuple[str, int]:
    """`HOST:PORT` (or `[v6]:PORT`) -> (host, port); a ValueError names the format."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"invalid address {address!r}: use HOST:PORT, e.g. 127.0.0.1:8400")
    return host.strip("[]"), int(port)


def open_listener(host: str, port: int, *, backlog: int = DEFAULT_BACKLOG) -> socket.socket:
    """A bound, listening, inheritable socket on `host:port` (port 0 picks a free one)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(backlog)
        sock.set_inheritable(True)
    except OSError as exc:
        sock.close()
        raise AddressUnavailable(
            f"cannot listen on {host}:{port} ({exc.strerror}); choose another address with --router-address "
            "HOST:PORT or PODWAY_ROUTER_HTTP_ADDRESS"
        ) from exc
    except BaseException:
        sock.close()
        raise
    return sock


class AddressUnavailable(OSError):
    """The router's address is taken (or not this host's): said in words a user can act on."""


def inherited_listener(fd: int) -> socket.socket:
    """The listening socket a supervisor passed down as descriptor `fd`."""
    sock = socket.socket(fileno=fd)
    if sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN) != 1:
        sock.detach()
        raise ValueError(f"descriptor {fd} is not a listening socket")
    sock.setblocking(False)
    return sock


def url_of(sock: socket.socket) -> str:
    """`http://host:port` of a listening socket."""
    host, port = sock.getsockname()[:2]
    return f"http://{f'[{host}]' if ':' in host else host}:{port}"
