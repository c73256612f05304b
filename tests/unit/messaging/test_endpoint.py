"""Connecting as a NATS user: credentials travel in the URL and reach the connection, not the address."""

import pytest

from libs.messaging.broker import NatsEndpoint


def test_credentials_are_taken_out_of_the_url_and_percent_decoded():
    endpoint = NatsEndpoint.parse("nats://node_agent:p%40ss%3Aw%2Frd%25@nats:4222")

    assert endpoint == NatsEndpoint("nats://nats:4222", "node_agent", "p@ss:w/rd%")
    assert endpoint.inbox_prefix == "_INBOX.node_agent"


def test_without_a_user_the_url_and_inboxes_are_nats_defaults():
    endpoint = NatsEndpoint.parse("nats://127.0.0.1:4222")

    assert endpoint == NatsEndpoint("nats://127.0.0.1:4222")
    assert endpoint.inbox_prefix == "_INBOX"


def test_a_token_url_is_left_to_nats_py():
    assert NatsEndpoint.parse("nats://s3cr3t@nats:4222") == NatsEndpoint("nats://s3cr3t@nats:4222")


def test_a_user_name_that_is_no_subject_token_keeps_the_default_inbox():
    assert NatsEndpoint.parse("nats://ops.team:pw@nats:4222").inbox_prefix == "_INBOX"


def test_a_cluster_list_keeps_every_address_and_one_user():
    endpoint = NatsEndpoint.parse("nats://admission:pw@a:4222, nats://admission:pw@b:4222,nats://c:4222")

    assert endpoint.servers == ["nats://a:4222", "nats://b:4222", "nats://c:4222"]
    assert (endpoint.user, endpoint.password) == ("admission", "pw")
    assert endpoint.url == "nats://a:4222,nats://b:4222,nats://c:4222"


def test_a_cluster_list_with_two_users_is_refused():
    with pytest.raises(ValueError, match="different users"):
        NatsEndpoint.parse("nats://admission:pw@a:4222,nats://scheduler:pw@b:4222")
