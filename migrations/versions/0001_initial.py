"""Initial schema: objects, conditions, leases, pod bindings (fenced), outbox, events, inbox.

Revision ID: 0001_initial
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001_initial"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON_DOCUMENT = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
UTC_DATETIME = sa.DateTime(timezone=True)

# Fencing: a pod binding is accepted only under the lease's current epoch. On PostgreSQL the trigger locks the
# lease row (FOR UPDATE) so a takeover waits for the binding transaction, or the binding sees the new epoch.
# On SQLite writers are serialised by the database lock, so a plain check suffices. The message prefix is
# what libs.db.repositories._sql.is_stale_epoch matches.
PG_FENCE_FUNCTION = """
CREATE FUNCTION podway_check_fence() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    current_epoch bigint;
BEGIN
    SELECT epoch INTO current_epoch FROM leases WHERE name = NEW.lease_name FOR UPDATE;
    IF current_epoch IS DISTINCT FROM NEW.epoch THEN
        RAISE EXCEPTION 'podway: stale epoch % for lease %, current %', NEW.epoch, NEW.lease_name, current_epoch
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NEW;
END;
$$
"""
PG_FENCE_TRIGGER = """
CREATE TRIGGER pod_bindings_fence BEFORE INSERT OR UPDATE ON pod_bindings
FOR EACH ROW EXECUTE FUNCTION podway_check_fence()
"""
SQLITE_FENCE_TRIGGER = """
CREATE TRIGGER pod_bindings_fence_{op} BEFORE {OP} ON pod_bindings
FOR EACH ROW WHEN NOT EXISTS (SELECT 1 FROM leases WHERE name = NEW.lease_name AND epoch = NEW.epoch)
BEGIN
    SELECT RAISE(ABORT, 'podway: stale epoch');
END
"""


def upgrade() -> None:
    _create_objects()
    _create_conditions()
    _create_leases_and_bindings()
    _create_outbox_and_events()
    _create_inbox()
    _create_fence_triggers()


def downgrade() -> None:
    _drop_fence_triggers()
    for table in ("inbox", "events", "outbox", "pod_bindings", "leases", "conditions", "objects"):
        op.drop_table(table)


def _create_objects() -> None:
    op.create_table(
        "objects",
        sa.Column("uid", sa.String(36), nullable=False),
        sa.Column("kind", sa.String(63), nullable=False),
        sa.Column("api_version", sa.String(128), nullable=False),
        sa.Column("namespace", sa.String(253), nullable=False),
        sa.Column("name", sa.String(253), nullable=False),
        sa.Column("generation", sa.BigInteger(), nullable=False),
        sa.Column("resource_version", sa.BigInteger(), nullable=False),
        sa.Column("spec", JSON_DOCUMENT, nullable=False),
        sa.Column("metadata", JSON_DOCUMENT, nullable=False),
        sa.Column("status", JSON_DOCUMENT, nullable=False),
        sa.Column("created_at", UTC_DATETIME, nullable=False),
        sa.Column("updated_at", UTC_DATETIME, nullable=False),
        sa.Column("deletion_requested_at", UTC_DATETIME, nullable=True),
        sa.PrimaryKeyConstraint("uid", name="pk_objects"),
        sa.UniqueConstraint("kind", "namespace", "name", name="uq_objects_kind_namespace_name"),
    )


def _create_conditions() -> None:
    op.create_table(
        "conditions",
        sa.Column("object_uid", sa.String(36), nullable=False),
        sa.Column("type", sa.String(128), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("reason", sa.String(128), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("observed_generation", sa.BigInteger(), nullable=True),
        sa.Column("last_transition_time", UTC_DATETIME, nullable=False),
        sa.Column("owner", sa.String(63), nullable=False),
        sa.ForeignKeyConstraint(
            ["object_uid"], ["objects.uid"], name="fk_conditions_object_uid_objects", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("object_uid", "type", name="pk_conditions"),
    )


def _create_leases_and_bindings() -> None:
    op.create_table(
        "leases",
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("holder", sa.String(253), nullable=False),
        sa.Column("epoch", sa.BigInteger(), nullable=False),
        sa.Column("expires_at", UTC_DATETIME, nullable=False),
        sa.Column("acquired_at", UTC_DATETIME, nullable=False),
        sa.PrimaryKeyConstraint("name", name="pk_leases"),
    )
    op.create_table(
        "pod_bindings",
        sa.Column("pod_uid", sa.String(36), nullable=False),
        sa.Column("node_name", sa.String(253), nullable=False),
        sa.Column("podgroup_uid", sa.String(36), nullable=True),
        sa.Column("lease_name", sa.String(128), nullable=False),
        sa.Column("epoch", sa.BigInteger(), nullable=False),
        sa.Column("bound_at", UTC_DATETIME, nullable=False),
        sa.PrimaryKeyConstraint("pod_uid", name="pk_pod_bindings"),
    )
    op.create_index("ix_pod_bindings_node_name", "pod_bindings", ["node_name"])
    op.create_index("ix_pod_bindings_podgroup_uid", "pod_bindings", ["podgroup_uid"])


def _create_outbox_and_events() -> None:
    op.create_table(
        "outbox",
        sa.Column("seq", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False),
        sa.Column("event_id", sa.Uuid(), nullable=False),
        sa.Column("subject", sa.String(255), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", UTC_DATETIME, nullable=False),
        sa.Column("published_at", UTC_DATETIME, nullable=True),
        sa.PrimaryKeyConstraint("seq", name="pk_outbox"),
        sa.UniqueConstraint("event_id", name="uq_outbox_event_id"),
        sqlite_autoincrement=True,
    )
    op.create_index(
        "ix_outbox_unpublished",
        "outbox",
        ["seq"],
        postgresql_where=sa.text("published_at IS NULL"),
        sqlite_where=sa.text("published_at IS NULL"),
    )
    op.create_table(
        "events",
        sa.Column("event_id", sa.Uuid(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("type", sa.String(128), nullable=False),
        sa.Column("schema_version", sa.Integer(), nullable=False),
        sa.Column("occurred_at", UTC_DATETIME, nullable=False),
        sa.Column("producer", sa.String(63), nullable=False),
        sa.Column("correlation_id", sa.String(128), nullable=False),
        sa.Column("causation_id", sa.String(64), nullable=True),
        sa.Column("subject_kind", sa.String(63), nullable=True),
        sa.Column("subject_namespace", sa.String(253), nullable=True),
        sa.Column("subject_name", sa.String(253), nullable=True),
        sa.Column("subject_uid", sa.String(36), nullable=True),
        sa.Column("payload", JSON_DOCUMENT, nullable=False),
        sa.PrimaryKeyConstraint("event_id", name="pk_events"),
        sa.UniqueConstraint("seq", name="uq_events_seq"),
    )
    op.create_index("ix_events_correlation_id_seq", "events", ["correlation_id", "seq"])
    op.create_index("ix_events_type_seq", "events", ["type", "seq"])
    op.create_index("ix_events_occurred_at", "events", ["occurred_at"])


def _create_inbox() -> None:
    op.create_table(
        "inbox",
        sa.Column("consumer", sa.String(128), nullable=False),
        sa.Column("event_id", sa.Uuid(), nullable=False),
        sa.Column("processed_at", UTC_DATETIME, nullable=False),
        sa.PrimaryKeyConstraint("consumer", "event_id", name="pk_inbox"),
    )
    op.create_index("ix_inbox_processed_at", "inbox", ["processed_at"])


def _create_fence_triggers() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(PG_FENCE_FUNCTION)
        op.execute(PG_FENCE_TRIGGER)
        return
    for operation in ("insert", "update"):
        op.execute(SQLITE_FENCE_TRIGGER.format(op=operation, OP=operation.upper()))


def _drop_fence_triggers() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS pod_bindings_fence ON pod_bindings")
        op.execute("DROP FUNCTION IF EXISTS podway_check_fence()")
        return
    for operation in ("insert", "update"):
        op.execute(f"DROP TRIGGER IF EXISTS pod_bindings_fence_{operation}")
