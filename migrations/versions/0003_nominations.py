"""Nominations: room the preemptor made for a PodGroup, held until it expires.

Revision ID: 0003_nominations
Revises: 0002_bindings_follow_pods
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0003_nominations"
down_revision: str | None = "0002_bindings_follow_pods"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON_DOCUMENT = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
UTC_DATETIME = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "nominations",
        sa.Column("podgroup_uid", sa.String(36), nullable=False),
        sa.Column("nodes", JSON_DOCUMENT, nullable=False),
        sa.Column("expires_at", UTC_DATETIME, nullable=False),
        sa.Column("nominated_at", UTC_DATETIME, nullable=False),
        sa.PrimaryKeyConstraint("podgroup_uid", name=op.f("pk_nominations")),
    )


def downgrade() -> None:
    op.drop_table("nominations")
