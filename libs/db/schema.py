"""The tables (one schema for PostgreSQL and SQLite). The Alembic history creates the same; never create_all()
outside tests."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    UniqueConstraint,
    Uuid,
    text,
)

from libs.db.types import JsonDocument, UtcDateTime

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

metadata = MetaData(naming_convention=NAMING_CONVENTION)

objects = Table(
    "objects",
    metadata,
    Column("uid", String(36), primary_key=True),
    Column("kind", String(63), nullable=False),
    Column("api_version", String(128), nullable=False),
    Column("namespace", String(253), nullable=False, default=""),
    Column("name", String(253), nullable=False),
    Column("generation", BigInteger, nullable=False),
    Column("resource_version", BigInteger, nullable=False),
    Column("spec", JsonDocument, nullable=False),
    Column("metadata", JsonDocument, nullable=False),
    Column("status", JsonDocument, nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
    Column("updated_at", UtcDateTime, nullable=False),
    Column("deletion_requested_at", UtcDateTime, nullable=True),
    # The revision of the commit that last wrote the row (NULL until the unit of work stamps it): see
    # migration 0007 and libs/db/repositories/revisions.py.
    Column("revision", BigInteger, nullable=True),
    Column("created_revision", BigInteger, nullable=True),
    UniqueConstraint("kind", "namespace", "name"),
    Index("ix_objects_revision", "revision"),
    Index(
        "ix_objects_unstamped",
        "uid",
        postgresql_where=text("revision IS NULL"),
        sqlite_where=text("revision IS NULL"),
    ),
    # Few rows: what admission finishes deleting as pods go.
    Index(
        "ix_objects_marked",
        "kind",
        postgresql_where=text("deletion_requested_at IS NOT NULL"),
        sqlite_where=text("deletion_requested_at IS NOT NULL"),
    ),
)

#: Pods admitted before the v1.35 Workload their `workloadRef` names (the annotation records it).
AWAITING_WORKLOAD_PG = "((metadata -> 'annotations'::text) ->> 'podway.io/workload-ref-name'::text)"
Index(
    "ix_objects_awaiting_workload",
    objects.c.namespace,
    text(AWAITING_WORKLOAD_PG),
    postgresql_where=text(f"kind = 'Pod' AND {AWAITING_WORKLOAD_PG} IS NOT NULL"),
).ddl_if(dialect="postgresql")

revisions = Table(
    "revisions",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("current", BigInteger, nullable=False),
    Column("compacted", BigInteger, nullable=False),
)
"""One row: the revision of the last commit that changed an object, and the oldest a watch may resume from."""

object_tombstones = Table(
    "object_tombstones",
    metadata,
    Column("seq", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    Column("revision", BigInteger, nullable=True),
    Column("uid", String(36), nullable=False),
    Column("kind", String(63), nullable=False),
    Column("api_version", String(128), nullable=False),
    Column("namespace", String(253), nullable=False),
    Column("name", String(253), nullable=False),
    Column("resource_version", BigInteger, nullable=False),
    Column("metadata", JsonDocument, nullable=False),
    Column("spec", JsonDocument, nullable=False),
    Column("status", JsonDocument, nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
    Column("deleted_at", UtcDateTime, nullable=False),
    Index("ix_object_tombstones_revision", "revision"),
)
"""Deleted objects as they were, written by a trigger, so that a watch can tell its watchers."""

conditions = Table(
    "conditions",
    metadata,
    Column("object_uid", String(36), ForeignKey("objects.uid", ondelete="CASCADE"), nullable=False),
    Column("type", String(128), nullable=False),
    Column("status", String(16), nullable=False),
    Column("reason", String(128), nullable=False, default=""),
    Column("message", Text, nullable=False, default=""),
    Column("observed_generation", BigInteger, nullable=True),
    Column("last_transition_time", UtcDateTime, nullable=False),
    Column("owner", String(63), nullable=False),
    PrimaryKeyConstraint("object_uid", "type"),
)

leases = Table(
    "leases",
    metadata,
    Column("name", String(128), primary_key=True),
    Column("holder", String(253), nullable=False),
    Column("epoch", BigInteger, nullable=False),
    Column("expires_at", UtcDateTime, nullable=False),
    Column("acquired_at", UtcDateTime, nullable=False),
)

# `lease_name` + `epoch` are checked against `leases` by a trigger (see migrations/versions/0001_initial.py):
# the database itself refuses a binding written under a stale epoch. A binding is a current hold: it goes with
# its pod, and the node agent releases it when the pod ends.
pod_bindings = Table(
    "pod_bindings",
    metadata,
    Column("pod_uid", String(36), ForeignKey("objects.uid", ondelete="CASCADE"), primary_key=True),
    Column("node_name", String(253), nullable=False),
    Column("podgroup_uid", String(36), nullable=True),
    Column("lease_name", String(128), nullable=False),
    Column("epoch", BigInteger, nullable=False),
    Column("bound_at", UtcDateTime, nullable=False),
    Index(None, "node_name"),
    Index(None, "podgroup_uid"),
)

# The preemptor's nominations: room it made for a PodGroup, held for it until `expires_at`. Written under the
# preemptor's lease (its unit of work checks the epoch at commit); read by a scheduler that loads its world.
nominations = Table(
    "nominations",
    metadata,
    Column("podgroup_uid", String(36), primary_key=True),
    Column("nodes", JsonDocument, nullable=False),
    Column("expires_at", UtcDateTime, nullable=False),
    Column("nominated_at", UtcDateTime, nullable=False),
)

# Node agents' heartbeats: a count per node the agent serves, bumped at every beat. The scheduler watches the
# counts (never the times, written by the agents' clocks) to tell a node that went quiet.
node_heartbeats = Table(
    "node_heartbeats",
    metadata,
    Column("node_name", String(253), primary_key=True),
    Column("agent", String(253), nullable=False),
    Column("beats", BigInteger, nullable=False),
    Column("heard_at", UtcDateTime, nullable=False),
)

# Devices held by allocated ResourceClaims (`claim` is `namespace/name`), written by the DRA allocator under
# its lease: an exclusive device has at most one holder (the partial unique index), and the shares of a
# shareable device never consume more of a capacity than it has (the check, in milli-units).
device_allocations = Table(
    "device_allocations",
    metadata,
    Column("claim", String(507), nullable=False),
    Column("device", String(512), nullable=False),
    Column("request", String(253), nullable=False),
    Column("exclusive", Boolean, nullable=False),
    PrimaryKeyConstraint("claim", "device", "request"),
    Index(
        "uq_device_allocations_exclusive_device",
        "device",
        unique=True,
        postgresql_where=text("exclusive"),
        sqlite_where=text("exclusive"),
    ),
)

device_capacity = Table(
    "device_capacity",
    metadata,
    Column("device", String(512), nullable=False),
    Column("name", String(317), nullable=False),
    Column("total", BigInteger, nullable=False),
    Column("consumed", BigInteger, nullable=False),
    PrimaryKeyConstraint("device", "name"),
    CheckConstraint("consumed >= 0 AND consumed <= total", name="within_total"),
)

outbox = Table(
    "outbox",
    metadata,
    Column("seq", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    Column("event_id", Uuid, nullable=False, unique=True),
    Column("subject", String(255), nullable=False),
    Column("data", LargeBinary, nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
    Column("published_at", UtcDateTime, nullable=True),
    Index(
        "ix_outbox_unpublished",
        "seq",
        postgresql_where=text("published_at IS NULL"),
        sqlite_where=text("published_at IS NULL"),
    ),
    # AUTOINCREMENT: SQLite never reuses a seq, even after the newest rows are deleted.
    sqlite_autoincrement=True,
)

events = Table(
    "events",
    metadata,
    Column("event_id", Uuid, primary_key=True),
    Column("seq", BigInteger, nullable=False, unique=True),
    Column("type", String(128), nullable=False),
    Column("schema_version", Integer, nullable=False),
    Column("occurred_at", UtcDateTime, nullable=False),
    Column("producer", String(63), nullable=False),
    Column("correlation_id", String(128), nullable=False),
    Column("causation_id", String(64), nullable=True),
    Column("subject_kind", String(63), nullable=True),
    Column("subject_namespace", String(253), nullable=True),
    Column("subject_name", String(253), nullable=True),
    Column("subject_uid", String(36), nullable=True),
    Column("payload", JsonDocument, nullable=False),
    Index(None, "correlation_id", "seq"),
    Index(None, "occurred_at"),
)

inbox = Table(
    "inbox",
    metadata,
    Column("consumer", String(128), nullable=False),
    Column("event_id", Uuid, nullable=False),
    Column("processed_at", UtcDateTime, nullable=False),
    PrimaryKeyConstraint("consumer", "event_id"),
    Index(None, "processed_at"),
)
