"""The errors of request/reply, without NATS: a caller can catch them without importing a client."""

from __future__ import annotations


class RpcError(Exception):
    """The server answered with an error instead of a reply."""

    def __init__(self, error_type: str, message: str) -> None:
        super().__init__(f"{error_type}: {message}")
        self.error_type = error_type
        self.message = message


class RpcTimeout(RpcError):
    """No reply before the deadline."""


class RpcUnavailable(RpcError):
    """No server listens on the subject, or the bus is down: retry later."""
