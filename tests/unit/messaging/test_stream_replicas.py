"""How many servers hold each stream: asked by `--replicas` or PODWAY_STREAM_REPLICAS, else left to the server."""

import pytest

from libs.client.cli import build_parser
from libs.messaging.streams import stream_configs


def test_every_stream_and_the_ledger_bucket_get_the_replica_count_asked_for():
    assert [c.num_replicas for c in stream_configs(replicas=3)] == [3, 3, 3, 3, 3]


def test_the_environment_gives_the_count_when_no_flag_does(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("PODWAY_STREAM_REPLICAS", "3")

    assert {c.num_replicas for c in stream_configs()} == {3}


def test_unasked_the_count_is_left_unset_so_an_existing_stream_keeps_its_own(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("PODWAY_STREAM_REPLICAS", raising=False)

    assert {c.num_replicas for c in stream_configs()} == {None}


@pytest.mark.parametrize("verb", ["migrate", "up"])
def test_the_replicas_flag_takes_one_to_five_servers(verb: str, capsys: pytest.CaptureFixture[str]):
    assert build_parser(verb).parse_args([verb, "--replicas", "3"]).replicas == 3
    with pytest.raises(SystemExit):
        build_parser(verb).parse_args([verb, "--replicas", "7"])
    assert "invalid value '7': must be between 1 and 5" in capsys.readouterr().err
