"""Device allocations: which claim holds each device, and how much of a shareable device's capacity its
shares consume. The database refuses a second holder of an exclusive device and a share beyond capacity.

Revision ID: 0004_device_allocations
Revises: 0003_nominations
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004_device_allocations"
down_revision: str | None = "0003_nominations"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "device_allocations",
        sa.Column("claim", sa.String(507), nullable=False),
        sa.Column("device", sa.String(512), nullable=False),
        sa.Column("request", sa.String(253), nullable=False),
        sa.Column("exclusive", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("claim", "device", "request", name=op.f("pk_device_allocations")),
    )
    op.create_index(
        "uq_device_allocations_exclusive_device",
        "device_allocations",
        ["device"],
        unique=True,
        postgresql_where=sa.text("exclusive"),
        sqlite_where=sa.text("exclusive"),
    )
    op.create_table(
        "device_capacity",
        sa.Column("device", sa.String(512), nullable=False),
        sa.Column("name", sa.String(317), nullable=False),
        sa.Column("total", sa.BigInteger(), nullable=False),
        sa.Column("consumed", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("device", "name", name=op.f("pk_device_capacity")),
        sa.CheckConstraint("consumed >= 0 AND consumed <= total", name=op.f("ck_device_capacity_within_total")),
    )


def downgrade() -> None:
    op.drop_table("device_capacity")
    op.drop_index("uq_device_allocations_exclusive_device", table_name="device_allocations")
    op.drop_table("device_allocations")
