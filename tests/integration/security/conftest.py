"""The deployed NATS config with per-user passwords, shared with the permission tests."""

from tests.integration.nats_permissions.conftest import secured_nats  # noqa: F401  (a fixture)
