"""Connecting as a NATS user: credentials travel in the URL and reach the connection, not the address."""

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
