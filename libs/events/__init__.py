"""The wire contract: envelope, event catalogue, one frozen payload model per event type."""

from libs.events import admission, inference, scheduling  # noqa: F401  (registers the payload models)
