"""Bindings are current holds: a pod's binding goes with the pod; objects marked for deletion and pods waiting
for a v1.35 Workload are found by index.

- `pod_bindings.pod_uid` references `objects.uid` with ON DELETE CASCADE. Bindings of pods that no longer
  exist or have finished are removed first: they hold nothing (and the first kind would refuse the key).
- `ix_objects_marked`: objects marked for deletion, by kind (partial: few rows).
- `ix_objects_awaiting_workload` (PostgreSQL): pods admitted before the v1.35 Workload their workloadRef
  names, by namespace and Workload name (partial, on the `podway.io/workload-ref-name` annotation).

Revision ID: 0002_bindings_follow_pods
Revises: 0001_initial
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002_bindings_follow_pods"
down_revision: str | None = "0001_initial"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BINDING_FK = "fk_pod_bindings_pod_uid_objects"
MARKED_INDEX = "ix_objects_marked"
AWAITING_INDEX = "ix_objects_awaiting_workload"
# The expression of libs.db.schema.AWAITING_WORKLOAD_PG, which the repository queries with.
AWAITING_WORKLOAD_PG = "((metadata -> 'annotations') ->> 'podway.io/workload-ref-name')"

# Rebuilding the table on SQLite drops its triggers: the fence of 0001_initial is created again.
SQLITE_FENCE_TRIGGER = """
CREATE TRIGGER pod_bindings_fence_{op} BEFORE {OP} ON pod_bindings
FOR EACH ROW WHEN NOT EXISTS (SELECT 1 FROM leases WHERE name = NEW.lease_name AND epoch = NEW.epoch)
BEGIN
    SELECT RAISE(ABORT, 'podway: stale epoch');
END
"""


def upgrade() -> None:
    _release_bindings_that_hold_nothing()
    if _on_postgres():
        op.create_foreign_key(BINDING_FK, "pod_bindings", "objects", ["pod_uid"], ["uid"], ondelete="CASCADE")
        op.execute(
            f"CREATE INDEX {AWAITING_INDEX} ON objects (namespace, {AWAITING_WORKLOAD_PG}) "
            f"WHERE kind = 'Pod' AND {AWAITING_WORKLOAD_PG} IS NOT NULL"
        )
    else:
        with op.batch_alter_table("pod_bindings", recreate="always") as batch:
            batch.create_foreign_key(BINDING_FK, "objects", ["pod_uid"], ["uid"], ondelete="CASCADE")
        _create_sqlite_fence()
    op.create_index(
        MARKED_INDEX,
        "objects",
        ["kind"],
        postgresql_where=sa.text("deletion_requested_at IS NOT NULL"),
        sqlite_where=sa.text("deletion_requested_at IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index(MARKED_INDEX, table_name="objects")
    if _on_postgres():
        op.execute(f"DROP INDEX IF EXISTS {AWAITING_INDEX}")
        op.drop_constraint(BINDING_FK, "pod_bindings", type_="foreignkey")
        return
    with op.batch_alter_table("pod_bindings", recreate="always") as batch:
        batch.drop_constraint(BINDING_FK, type_="foreignkey")
    _create_sqlite_fence()


def _on_postgres() -> bool:
    return bool(op.get_bind().dialect.name == "postgresql")


def _release_bindings_that_hold_nothing() -> None:
    phase = "status ->> 'phase'" if _on_postgres() else "json_extract(status, '$.phase')"
    op.execute(
        "DELETE FROM pod_bindings WHERE NOT EXISTS (SELECT 1 FROM objects WHERE objects.uid = pod_bindings.pod_uid)"
    )
    op.execute(
        "DELETE FROM pod_bindings WHERE pod_uid IN (SELECT uid FROM objects WHERE kind = 'Pod' "
        f"AND {phase} IN ('Succeeded', 'Failed'))"
    )


def _create_sqlite_fence() -> None:
    for operation in ("insert", "update"):
        op.execute(f"DROP TRIGGER IF EXISTS pod_bindings_fence_{operation}")
        op.execute(SQLITE_FENCE_TRIGGER.format(op=operation, OP=operation.upper()))
