"""Node heartbeats: each node agent counts the beats of the nodes it serves; the scheduler watches the counts.

Revision ID: 0006_node_heartbeats
Revises: 0005_events_by_type_unindexed
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006_node_heartbeats"
down_revision: str | None = "0005_events_by_type_unindexed"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

UTC_DATETIME = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "node_heartbeats",
        sa.Column("node_name", sa.String(253), nullable=False),
        sa.Column("agent", sa.String(253), nullable=False),
        sa.Column("beats", sa.BigInteger(), nullable=False),
        sa.Column("heard_at", UTC_DATETIME, nullable=False),
        sa.PrimaryKeyConstraint("node_name", name=op.f("pk_node_heartbeats")),
    )


def downgrade() -> None:
    op.drop_table("node_heartbeats")
