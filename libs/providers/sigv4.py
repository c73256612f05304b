"""AWS Signature Version 4 for the JSON POSTs the router sends to Bedrock Runtime.

The same signature botocore's `SigV4Auth` computes (tests/unit/providers checks them against each other), at a
small share of its CPU: botocore builds the canonical request from a generic request object on every call and
derives the signing key with four HMACs; here the request's shape is fixed and the key is derived once a day
per credentials, region and service.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import quote

ALGORITHM = "AWS4-HMAC-SHA256"


@dataclass(frozen=True, slots=True)
class AwsCredentials:
    """One set of credentials, as botocore's frozen credentials carry them."""

    access_key: str
    secret_key: str
    token: str | None = None


class SigV4Signer:
    """Signs POSTs of a JSON body for one region and signing name (`bedrock` for Bedrock Runtime)."""

    def __init__(self, region: str, service: str) -> None:
        self.region = region
        self.service = service
        self._key: tuple[str, str, bytes] | None = None  # (secret key, date, signing key)
        self._canonical_paths: dict[str, str] = {}
        self._stamp: tuple[int, str] = (-1, "")  # (second, its x-amz-date)

    def headers(
        self, host: str, path: str, body: bytes, credentials: AwsCredentials, *, now: datetime | None = None
    ) -> dict[str, str]:
        """The headers to send with `POST path` (the path as it goes on the wire, already percent-encoded):
        the signed ones and `Authorization`."""
        amz_date = now.strftime("%Y%m%dT%H%M%SZ") if now is not None else self._amz_date()
        date = amz_date[:8]
        headers = {"content-type": "application/json", "host": host, "x-amz-date": amz_date}
        if credentials.token:
            headers["x-amz-security-token"] = credentials.token
        signed = ";".join(sorted(headers))
        canonical = "\n".join(
            (
                "POST",
                self._canonical_path(path),
                "",
                *(f"{name}:{headers[name]}" for name in sorted(headers)),
                "",
                signed,
                hashlib.sha256(body).hexdigest(),
            )
        )
        scope = f"{date}/{self.region}/{self.service}/aws4_request"
        to_sign = f"{ALGORITHM}\n{amz_date}\n{scope}\n{hashlib.sha256(canonical.encode()).hexdigest()}"
        signature = hmac.new(self._signing_key(credentials.secret_key, date), to_sign.encode(), "sha256")
        headers["authorization"] = (
            f"{ALGORITHM} Credential={credentials.access_key}/{scope}, "
            f"SignedHeaders={signed}, Signature={signature.hexdigest()}"
        )
        return headers

    def _amz_date(self) -> str:
        second = int(time.time())
        if self._stamp[0] != second:
            self._stamp = (second, time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(second)))
        return self._stamp[1]

    def _canonical_path(self, path: str) -> str:
        canonical = self._canonical_paths.get(path)
        if canonical is None:
            if len(self._canonical_paths) > 1024:  # paths name models: a handful, unless something is amiss
                self._canonical_paths.clear()
            # SigV4 encodes the path once more for every service but S3, as botocore does.
            canonical = self._canonical_paths[path] = quote(path, safe="/~")
        return canonical

    def _signing_key(self, secret_key: str, date: str) -> bytes:
        cached = self._key
        if cached is not None and cached[0] == secret_key and cached[1] == date:
            return cached[2]
        key = ("AWS4" + secret_key).encode()
        for part in (date, self.region, self.service, "aws4_request"):
            key = hmac.new(key, part.encode(), "sha256").digest()
        self._key = (secret_key, date, key)
        return key
