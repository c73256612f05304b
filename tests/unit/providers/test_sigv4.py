"""The router's SigV4 signer signs exactly as botocore's SigV4Auth does."""

from __future__ import annotations

from datetime import UTC, datetime
from urllib.parse import quote

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from libs.providers.sigv4 import AwsCredentials, SigV4Signer

ARN = "arn:aws:bedrock:us-east-1:123456789012:provisioned-model/abc123def456"


def botocore_headers(url: str, body: bytes, credentials: Credentials) -> dict[str, str]:
    request = AWSRequest(method="POST", url=url, data=body, headers={"Content-Type": "application/json"})
    SigV4Auth(credentials, "bedrock", "us-east-1").add_auth(request)
    return {name.lower(): value for name, value in request.headers.items()}


@pytest.mark.parametrize("token", [None, "session-token/with+odd=chars"])
@pytest.mark.parametrize("model", [ARN, "anthropic.claude-3-haiku-20240307-v1:0"])
def test_signature_is_botocores(model: str, token: str | None) -> None:
    host = "bedrock-runtime.us-east-1.amazonaws.com"
    path = f"/model/{quote(model, safe='')}/converse"
    body = (
        b'{"messages":[{"role":"user","content":[{"text":"hi \\u00e9"}]}],"inferenceConfig":{"maxTokens":8}}'
    )
    expected = botocore_headers(
        f"https://{host}{path}", body, Credentials("AKIDEXAMPLE", "secret/key+1", token)
    )
    moment = datetime.strptime(expected["x-amz-date"], "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)

    signer = SigV4Signer("us-east-1", "bedrock")
    ours = signer.headers(host, path, body, AwsCredentials("AKIDEXAMPLE", "secret/key+1", token), now=moment)

    assert ours["authorization"] == expected["authorization"]
    assert ours.get("x-amz-security-token") == expected.get("x-amz-security-token")


def test_signing_key_follows_the_date_and_the_secret() -> None:
    signer = SigV4Signer("us-east-1", "bedrock")
    first = datetime(2026, 12, 1, 23, 59, tzinfo=UTC)
    credentials = AwsCredentials("AKID", "one")
    today = signer.headers("h", "/p", b"{}", credentials, now=first)["authorization"]
    tomorrow = signer.headers("h", "/p", b"{}", credentials, now=first.replace(day=2))["authorization"]
    rotated = signer.headers("h", "/p", b"{}", AwsCredentials("AKID", "two"), now=first)["authorization"]
    assert (
        len({today.split("Signature=")[1], tomorrow.split("Signature=")[1], rotated.split("Signature=")[1]})
        == 3
    )
    assert signer.headers("h", "/p", b"{}", credentials, now=first)["authorization"] == today
