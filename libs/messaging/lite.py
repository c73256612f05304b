"""A small blocking NATS client for the CLI's read verbs: request/reply and plain subscriptions over one
socket, standard library only.

`podway get` must answer in well under a second, and importing nats-py (it pulls aiohttp) or faststream costs
more than that on a busy host. Reads need only a few lines of the NATS protocol: CONNECT, SUB, PUB, and
MSG / HMSG back (headers carry the RPC error type and the no-responders status). Services, and anything that
publishes events or uses JetStream, use the full clients (`broker`, `rpc`).
"""

from __future__ import annotations

import json
import socket
import ssl
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

from libs.messaging.errors import RpcError, RpcTimeout, RpcUnavailable
from libs.messaging.tls import tls_context
from libs.runtime.urls import split_urls

ERROR_HEADER = "Podway-Rpc-Error"  # as libs.messaging.rpc sends it
INBOX_PREFIX = "_INBOX"  # as libs.messaging.permissions grants it
_CRLF = b"\r\n"


@dataclass(frozen=True, slots=True)
class LiteMessage:
    subject: str
    data: bytes
    headers: dict[str, str] = field(default_factory=dict)
    status: str | None = None
    """The status of a header block (`503` when nobody serves a request's subject)."""


class LiteNats:
    """`with LiteNats(url) as nats: nats.request(subject, payload)` or `for msg in nats.subscribe(subject)`."""

    def __init__(self, url: str, *, name: str = "podway-cli", connect_timeout_s: float = 5.0) -> None:
        """`url` may list a cluster's servers, comma-separated: `connect` takes the first that answers."""
        self.servers = [urlsplit(one if "://" in one else f"nats://{one}") for one in split_urls(url)]
        parts = next((p for p in self.servers if p.username is not None), self.servers[0])
        self.tls = parts.scheme == "tls"
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 4222
        self.user = unquote(parts.username) if parts.username is not None else None
        self.password = unquote(parts.password) if parts.password is not None else None
        user_token = (
            self.user if self.user and self.user.replace("_", "").replace("-", "").isalnum() else None
        )
        self.inbox = (
            f"{INBOX_PREFIX}.{user_token}" if self.password is not None and user_token else INBOX_PREFIX
        )
        self.name = name
        self.connect_timeout_s = connect_timeout_s
        self._sock: socket.socket | None = None
        self._buffer = bytearray()
        self._next_sid = 0

    def __enter__(self) -> LiteNats:
        self.connect()
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def connect(self) -> None:
        """Connect to the first server of the list that answers (raises the last server's refusal)."""
        for index, server in enumerate(self.servers):
            self.tls = server.scheme == "tls"
            self.host, self.port = server.hostname or "127.0.0.1", server.port or 4222
            try:
                self._connect_one()
                return
            except RpcUnavailable:
                self.close()
                if index == len(self.servers) - 1:
                    raise

    def _connect_one(self) -> None:
        try:
            self._sock = socket.create_connection((self.host, self.port), timeout=self.connect_timeout_s)
        except OSError as exc:
            raise RpcUnavailable(
                "BusUnavailable", f"cannot reach NATS at {self.host}:{self.port} ({exc})"
            ) from exc
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        info = self._line(time.monotonic() + self.connect_timeout_s)
        if not info.startswith(b"INFO"):
            raise RpcUnavailable("BusUnavailable", f"not a NATS server at {self.host}:{self.port}")
        context = tls_context()
        if json.loads(info[5:]).get("tls_required") or self.tls or context is not None:
            self._start_tls(context or ssl.create_default_context())
        options: dict[str, object] = {
            "verbose": False,
            "pedantic": False,
            "lang": "python-lite",
            "version": "1",
            "protocol": 1,
            "headers": True,
            "no_responders": True,
            "name": self.name,
        }
        if self.user is not None and self.password is not None:
            options |= {"user": self.user, "pass": self.password}
        elif self.user is not None:
            options["auth_token"] = self.user
        self._send(b"CONNECT " + json.dumps(options).encode() + _CRLF + b"PING" + _CRLF)
        deadline = time.monotonic() + self.connect_timeout_s
        while True:
            line = self._line(deadline)
            if line == b"PONG":
                return
            if line.startswith(b"-ERR"):
                raise RpcUnavailable(
                    "BusUnavailable", f"nats-server refused the connection: {line[5:].decode()}"
                )

    def _start_tls(self, context: ssl.SSLContext) -> None:
        """Upgrade the connection after the server's INFO, as nats-server expects (PODWAY_NATS_TLS_CA / _CERT /
        _KEY as for the services)."""
        assert self._sock is not None
        try:
            self._sock = context.wrap_socket(self._sock, server_hostname=self.host)
        except (OSError, ssl.SSLError) as exc:
            raise RpcUnavailable(
                "BusUnavailable", f"TLS with NATS at {self.host}:{self.port} failed ({exc})"
            ) from exc

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def request(self, subject: str, payload: bytes, *, timeout_s: float = 30.0) -> bytes:
        """The reply's body; raises RpcError (the server's error header), RpcTimeout or RpcUnavailable."""
        inbox = f"{self.inbox}.{uuid.uuid4().hex}"
        sid = self._subscribe(inbox)
        self._send(f"UNSUB {sid} 1\r\nPUB {subject} {inbox} {len(payload)}\r\n".encode() + payload + _CRLF)
        reply = self._next_message(time.monotonic() + timeout_s)
        if reply is None:
            raise RpcTimeout("Timeout", f"no reply on {subject} within {timeout_s}s")
        if reply.status == "503":
            raise RpcUnavailable("NoResponders", f"nobody serves {subject}")
        if error_type := reply.headers.get(ERROR_HEADER):
            raise RpcError(error_type, reply.data.decode(errors="replace"))
        return reply.data

    def subscribe(self, subject: str, *, idle_timeout_s: float | None = None) -> Iterator[LiteMessage]:
        """Messages on `subject` from now on; ends after `idle_timeout_s` without one (None: never)."""
        self._subscribe(subject)
        self._send(b"PING" + _CRLF)  # the server has the subscription once it answers (skipped below)
        while True:
            deadline = None if idle_timeout_s is None else time.monotonic() + idle_timeout_s
            message = self._next_message(deadline)
            if message is None:
                return
            yield message

    def wakeups(self, subject: str, *, idle_s: float, settle_s: float) -> Iterator[None]:
        """Yields once per burst of messages on `subject` (a burst ends `settle_s` after its first message), or
        after `idle_s` without any."""
        self._subscribe(subject)
        while True:
            if self._next_message(time.monotonic() + idle_s) is not None:
                settled = time.monotonic() + settle_s
                while self._next_message(settled) is not None:
                    pass
            yield None

    def _subscribe(self, subject: str) -> int:
        self._next_sid += 1
        self._send(f"SUB {subject} {self._next_sid}\r\n".encode())
        return self._next_sid

    def _next_message(self, deadline: float | None) -> LiteMessage | None:
        while True:
            try:
                line = self._line(deadline)
            except TimeoutError:
                return None
            if line.startswith(b"MSG "):
                parts = line.split()
                return LiteMessage(parts[1].decode(), self._read(int(parts[-1]), deadline))
            if line.startswith(b"HMSG "):
                parts = line.split()
                head_len, total = int(parts[-2]), int(parts[-1])
                block = self._read(total, deadline)
                status, headers = _headers(block[:head_len])
                return LiteMessage(parts[1].decode(), block[head_len:], headers, status)
            if line == b"PING":
                self._send(b"PONG" + _CRLF)
            elif line.startswith(b"-ERR"):
                raise RpcUnavailable("BusUnavailable", f"nats-server: {line[5:].decode()}")

    def _send(self, data: bytes) -> None:
        if self._sock is None:
            raise RpcUnavailable("BusUnavailable", "not connected")
        try:
            self._sock.sendall(data)
        except OSError as exc:
            raise RpcUnavailable("BusUnavailable", f"the NATS connection went down ({exc})") from exc

    def _fill(self, deadline: float | None) -> None:
        assert self._sock is not None
        remaining = None if deadline is None else deadline - time.monotonic()
        if remaining is not None and remaining <= 0:
            raise TimeoutError
        self._sock.settimeout(remaining)
        try:
            chunk = self._sock.recv(65536)
        except TimeoutError:
            raise
        except OSError as exc:
            raise RpcUnavailable("BusUnavailable", f"the NATS connection went down ({exc})") from exc
        if not chunk:
            raise RpcUnavailable("BusUnavailable", "the NATS server closed the connection")
        self._buffer += chunk

    def _line(self, deadline: float | None) -> bytes:
        while (end := self._buffer.find(_CRLF)) < 0:
            self._fill(deadline)
        line = bytes(self._buffer[:end])
        del self._buffer[: end + 2]
        return line

    def _read(self, size: int, deadline: float | None) -> bytes:
        while len(self._buffer) < size + 2:
            self._fill(deadline)
        data = bytes(self._buffer[:size])
        del self._buffer[: size + 2]
        return data


def _headers(block: bytes) -> tuple[str | None, dict[str, str]]:
    """`NATS/1.0 503\\r\\nKey: value\\r\\n\\r\\n` -> ("503", {"Key": "value"})."""
    first, *lines = block.decode(errors="replace").split("\r\n")
    status = first[len("NATS/1.0") :].strip().split(" ")[0] or None
    headers = {}
    for line in lines:
        key, sep, value = line.partition(":")
        if sep:
            headers[key.strip()] = value.strip()
    return status, headers
