"""Revisions taken at write time on PostgreSQL: a sequence instead of a counter row locked until commit.

Migration 0007 had the unit of work stamp every object a transaction wrote with the next revision under the
counter's row lock, held through the commit. Object-writing commits queued on that lock and every written
row was written twice (the stamp defeats PostgreSQL's HOT updates: `revision` is indexed), which doubled
the database's CPU per bound pod and quadrupled admitted-to-bound latency under load. Now a trigger gives an
object its transaction's revision as the row is written: the first object write of a transaction takes
`nextval('object_revision')` (after making sure the transaction has its id) and the transaction's later
writes reuse it. Revisions no longer follow commit order, so a reader settles them first: it reads the
sequence, then waits until every transaction that was writing then has ended (libs/db/repositories/
revisions.py). SQLite, whose writers are one at a time anyway, keeps the stamp.

Revision ID: 0008_revisions_at_write
Revises: 0007_revisions
Create Date: 2026-12-03
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0008_revisions_at_write"
down_revision: str | None = "0007_revisions"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_UPGRADE = (
    "CREATE SEQUENCE object_revision",
    "SELECT setval('object_revision', (SELECT current FROM revisions WHERE id = 1))",
    """
    CREATE FUNCTION transaction_revision() RETURNS bigint LANGUAGE plpgsql AS $$
    DECLARE
        taken text := current_setting('podway.revision', true);
    BEGIN
        IF taken IS NULL OR taken = '' THEN
            -- The transaction has its id before it has a revision: a reader that sees the revision
            -- taken can wait for every transaction still writing (see revisions.py).
            PERFORM pg_current_xact_id();
            taken := nextval('object_revision')::text;
            PERFORM set_config('podway.revision', taken, true);
        END IF;
        RETURN taken::bigint;
    END $$
    """,
    "DROP TRIGGER objects_unstamp ON objects",
    "DROP FUNCTION objects_unstamp()",
    """
    CREATE FUNCTION objects_revision() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'INSERT' THEN
            NEW.revision := transaction_revision();
            NEW.created_revision := NEW.revision;
        ELSIF NEW.resource_version IS DISTINCT FROM OLD.resource_version THEN
            NEW.revision := transaction_revision();
            NEW.created_revision := OLD.created_revision;
        END IF;
        RETURN NEW;
    END $$
    """,
    """
    CREATE TRIGGER objects_revision BEFORE INSERT OR UPDATE ON objects
    FOR EACH ROW EXECUTE FUNCTION objects_revision()
    """,
    """
    CREATE OR REPLACE FUNCTION objects_tombstone() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        INSERT INTO object_tombstones (revision, uid, kind, api_version, namespace, name, resource_version,
            metadata, spec, status, created_at, deleted_at)
        VALUES (transaction_revision(), OLD.uid, OLD.kind, OLD.api_version, OLD.namespace, OLD.name,
            OLD.resource_version, OLD.metadata, OLD.spec, OLD.status, OLD.created_at, now());
        RETURN OLD;
    END $$
    """,
)

_DOWNGRADE = (
    "UPDATE revisions SET current = (SELECT last_value FROM object_revision) WHERE id = 1",
    "DROP TRIGGER objects_revision ON objects",
    "DROP FUNCTION objects_revision()",
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
    CREATE OR REPLACE FUNCTION objects_tombstone() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        INSERT INTO object_tombstones (uid, kind, api_version, namespace, name, resource_version, metadata,
            spec, status, created_at, deleted_at)
        VALUES (OLD.uid, OLD.kind, OLD.api_version, OLD.namespace, OLD.name, OLD.resource_version,
            OLD.metadata, OLD.spec, OLD.status, OLD.created_at, now());
        RETURN OLD;
    END $$
    """,
    "DROP FUNCTION transaction_revision()",
    "DROP SEQUENCE object_revision",
)


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for statement in _UPGRADE:
            op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for statement in _DOWNGRADE:
            op.execute(statement)
