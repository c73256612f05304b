"""NATS credentials in the settings: given as fields, carried in the URL every process connects with."""

import json
import logging

import pytest
from pydantic import ValidationError

from libs.runtime.logging import JsonFormatter
from libs.runtime.settings import PodwaySettings, redact_credentials


def test_user_and_password_from_the_environment_go_into_the_nats_url(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("PODWAY_NATS_URL", "nats://nats:4222")
    monkeypatch.setenv("PODWAY_NATS_USER", "admission")
    monkeypatch.setenv("PODWAY_NATS_PASSWORD", "p@ss:w/rd%")

    settings = PodwaySettings()

    assert settings.nats_url == "nats://admission:p%40ss%3Aw%2Frd%25@nats:4222"
    assert PodwaySettings(**settings.model_dump()).nats_url == settings.nats_url


def test_user_and_password_go_into_every_url_of_a_cluster_list():
    settings = PodwaySettings(
        nats_url="nats://n0:4222,nats://n1:4222", nats_user="admission", nats_password="p@ss"
    )

    assert settings.nats_url == "nats://admission:p%40ss@n0:4222,nats://admission:p%40ss@n1:4222"
    assert (
        redact_credentials(settings.nats_url) == "nats://admission:***@n0:4222,nats://admission:***@n1:4222"
    )


def test_credentials_given_twice_must_agree():
    with pytest.raises(ValidationError, match="other credentials"):
        PodwaySettings(nats_url="nats://client:a@nats:4222", nats_user="admission", nats_password="b")
    with pytest.raises(ValidationError, match="go together"):
        PodwaySettings(nats_url="nats://nats:4222", nats_user="admission")


def test_passwords_in_urls_are_masked_in_logs():
    record = logging.makeLogRecord(
        {
            "msg": "ready",
            "nats": "nats://admission:s3cret@nats:4222",
            "db": "postgresql://podway:pw@db/podway",
        }
    )

    entry = json.loads(JsonFormatter("admission").format(record))

    assert (entry["nats"], entry["db"]) == (
        "nats://admission:***@nats:4222",
        "postgresql://podway:***@db/podway",
    )
    assert redact_credentials("nats://127.0.0.1:4222") == "nats://127.0.0.1:4222"
