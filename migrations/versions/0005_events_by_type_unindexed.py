"""The audit log keeps no index by event type: no query of the product reads events by type alone (a type
with correlation ids goes through the correlation index), and every event appended paid for its entry.

Revision ID: 0005_events_by_type_unindexed
Revises: 0004_device_allocations
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0005_events_by_type_unindexed"
down_revision: str | None = "0004_device_allocations"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.drop_index("ix_events_type_seq", table_name="events")


def downgrade() -> None:
    op.create_index("ix_events_type_seq", "events", ["type", "seq"])
