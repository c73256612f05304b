"""`conflict_unless`: a statement that writes objects at the versions read fails as a whole when one is not.

A statement that creates objects, replaces others at the versions read and appends their events at once
(libs/db/repositories/at_once.py) commits on its own; a replacement whose object moved on must then fail it
before it commits, which SQL alone cannot do. The function raises SQLSTATE PW409 unless its condition holds.

Revision ID: 0009_conflict_unless
Revises: 0008_revisions_at_write
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0009_conflict_unless"
down_revision: str | None = "0008_revisions_at_write"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_UPGRADE = """
CREATE FUNCTION conflict_unless(holds boolean, what text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    IF NOT holds THEN
        RAISE EXCEPTION 'conflict: % not at the version read', what USING ERRCODE = 'PW409';
    END IF;
    RETURN true;
END $$
"""


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_UPGRADE)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP FUNCTION conflict_unless(boolean, text)")
