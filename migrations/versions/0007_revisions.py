"""Revisions: one counter orders every committed change of the API objects, as etcd's revision does, so that
a list has a resourceVersion and a watch resumes from one; deleted objects leave a tombstone for watchers.

A trigger clears an object's revision on every write (each write bumps `resource_version`) and copies a
deleted object into `object_tombstones`; the unit of work stamps what is unstamped with the next revision as
the last step before it commits, holding the counter's row lock for that step only, so revisions follow
commit order.

Revision ID: 0007_revisions
Revises: 0006_node_heartbeats
Create Date: 2026-12-03
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0007_revisions"
down_revision: str | None = "0006_node_heartbeats"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

UTC_DATETIME = sa.DateTime(timezone=True)
JSON_DOCUMENT = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")

_PG_TRIGGERS = (
    """
    CREATE FUNCTION objects_unstamp() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'INSERT' OR NEW.resource_version IS DISTINCT FROM OLD.resource_version THEN
            NEW.revision := NULL;
        END IF;
        RETURN NEW;
    END $$
    """,
    """
    CREATE TRIGGER objects_unstamp BEFORE INSERT OR UPDATE ON objects
    FOR EACH ROW EXECUTE FUNCTION objects_unstamp()
    """,
    """
    CREATE FUNCTION objects_tombstone() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        INSERT INTO object_tombstones (uid, kind, api_version, namespace, name, resource_version, metadata,
            spec, status, created_at, deleted_at)
        VALUES (OLD.uid, OLD.kind, OLD.api_version, OLD.namespace, OLD.name, OLD.resource_version,
            OLD.metadata, OLD.spec, OLD.status, OLD.created_at, now());
        RETURN OLD;
    END $$
    """,
    """
    CREATE TRIGGER objects_tombstone AFTER DELETE ON objects
    FOR EACH ROW EXECUTE FUNCTION objects_tombstone()
    """,
)

_SQLITE_TRIGGERS = (
    """
    CREATE TRIGGER objects_unstamp_update AFTER UPDATE OF resource_version ON objects
    FOR EACH ROW WHEN NEW.resource_version IS NOT OLD.resource_version AND NEW.revision IS NOT NULL
    BEGIN
        UPDATE objects SET revision = NULL WHERE uid = NEW.uid;
    END
    """,
    """
    CREATE TRIGGER objects_tombstone AFTER DELETE ON objects
    FOR EACH ROW
    BEGIN
        INSERT INTO object_tombstones (uid, kind, api_version, namespace, name, resource_version, metadata,
            spec, status, created_at, deleted_at)
        VALUES (OLD.uid, OLD.kind, OLD.api_version, OLD.namespace, OLD.name, OLD.resource_version,
            OLD.metadata, OLD.spec, OLD.status, OLD.created_at, strftime('%Y-%m-%d %H:%M:%f', 'now'));
    END
    """,
)


def upgrade() -> None:
    op.add_column("objects", sa.Column("revision", sa.BigInteger(), nullable=True))
    op.add_column("objects", sa.Column("created_revision", sa.BigInteger(), nullable=True))
    op.execute("UPDATE objects SET revision = 1, created_revision = 1")
    op.create_index("ix_objects_revision", "objects", ["revision"])
    op.create_index(
        "ix_objects_unstamped",
        "objects",
        ["uid"],
        postgresql_where=sa.text("revision IS NULL"),
        sqlite_where=sa.text("revision IS NULL"),
    )
    op.create_table(
        "revisions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("current", sa.BigInteger(), nullable=False),
        sa.Column("compacted", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_revisions")),
    )
    op.execute("INSERT INTO revisions (id, current, compacted) VALUES (1, 1, 0)")
    op.create_table(
        "object_tombstones",
        sa.Column("seq", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True),
        sa.Column("revision", sa.BigInteger(), nullable=True),
        sa.Column("uid", sa.String(36), nullable=False),
        sa.Column("kind", sa.String(63), nullable=False),
        sa.Column("api_version", sa.String(128), nullable=False),
        sa.Column("namespace", sa.String(253), nullable=False),
        sa.Column("name", sa.String(253), nullable=False),
        sa.Column("resource_version", sa.BigInteger(), nullable=False),
        sa.Column("metadata", JSON_DOCUMENT, nullable=False),
        sa.Column("spec", JSON_DOCUMENT, nullable=False),
        sa.Column("status", JSON_DOCUMENT, nullable=False),
        sa.Column("created_at", UTC_DATETIME, nullable=False),
        sa.Column("deleted_at", UTC_DATETIME, nullable=False),
        sa.PrimaryKeyConstraint("seq", name=op.f("pk_object_tombstones")),
    )
    op.create_index("ix_object_tombstones_revision", "object_tombstones", ["revision"])
    bind = op.get_bind()
    for statement in _PG_TRIGGERS if bind.dialect.name == "postgresql" else _SQLITE_TRIGGERS:
        op.execute(statement)


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        op.execute("DROP TRIGGER objects_tombstone ON objects")
        op.execute("DROP TRIGGER objects_unstamp ON objects")
        op.execute("DROP FUNCTION objects_tombstone()")
        op.execute("DROP FUNCTION objects_unstamp()")
    else:
        op.execute("DROP TRIGGER objects_tombstone")
        op.execute("DROP TRIGGER objects_unstamp_update")
    op.drop_table("object_tombstones")
    op.drop_table("revisions")
    op.drop_index("ix_objects_unstamped", table_name="objects")
    op.drop_index("ix_objects_revision", table_name="objects")
    op.drop_column("objects", "created_revision")
    op.drop_column("objects", "revision")
