"""The wire contract: envelope, event catalogue, one frozen payload model per event type."""

from libs.events import admission, routing, scheduling  # noqa: F401  (registers the payload models)
