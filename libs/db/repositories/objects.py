"""API objects with optimistic concurrency: every write bumps `resource_version`, spec changes bump
`generation`."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Collection, Iterable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    Row,
    Select,
    String,
    Update,
    any_,
    bindparam,
    case,
    cast,
    delete,
    func,
    insert,
    literal_column,
    null,
    select,
    text,
    tuple_,
    union_all,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSON, JSONB
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from libs.api.annotations import WORKLOAD_REF_NAME
from libs.db.direct import DirectSession
from libs.db.errors import ConflictError, NotFoundError
from libs.db.ports import Clock
from libs.db.records import Condition, JsonObject, ObjectDraft, ObjectRead, ObjectVersion, StoredObject
from libs.db.repositories._sql import (
    dialect_of,
    insert_ignoring_duplicates,
    on_postgres,
    rowcount,
    unnest_rows,
)
from libs.db.repositories.bindings import SqlAlchemyBindingRepository
from libs.db.repositories.conditions import SqlAlchemyConditionRepository
from libs.db.repositories.revisions import objects_written
from libs.db.schema import AWAITING_WORKLOAD_PG, objects, pod_bindings
from libs.db.schema import conditions as table_conditions
from libs.db.types import UtcDateTime, json_text, json_value

MUST_NOT_EXIST = 0
"""`expected_resource_version=MUST_NOT_EXIST` makes `upsert` a create."""


class SqlAlchemyObjectRepository:
    """The `objects` table."""

    def __init__(self, session: AsyncSession, clock: Clock, direct: DirectSession | None = None) -> None:
        self._session = session
        self._clock = clock
        self._direct = direct
        """Where the reads of a write's view go on PostgreSQL, when given (see libs.db.direct)."""

    async def _read_pg(self, statement: Any, parameters: dict[str, Any]) -> Iterable[Any]:
        if self._direct is not None:
            return await self._direct.fetch(statement, parameters)
        return await self._session.execute(statement, parameters)

    async def get(self, kind: str, namespace: str, name: str) -> StoredObject | None:
        """The object, or None."""
        row = (await self._session.execute(_BY_KEY, _key(kind, namespace, name))).first()
        return _to_object(row) if row else None

    async def get_many(self, keys: Iterable[tuple[str, str, str]]) -> list[StoredObject]:
        """The objects with these (kind, namespace, name) keys that exist, in one query."""
        wanted = list(dict.fromkeys(keys))
        if not wanted:
            return []
        if on_postgres(self._session):
            kinds, namespaces, names = zip(*wanted, strict=True)
            parameters = {"given_kind": kinds, "given_namespace": namespaces, "given_name": names}
            return [_to_object(row) for row in await self._read_pg(_BY_KEYS_PG, parameters)]
        return await self._get_many_in_chunks(wanted)

    async def get_many_with_facts(
        self, keys: Iterable[tuple[str, str, str]], *, every_of: str | None = None
    ) -> list[ObjectRead]:
        """`get_many`, each object found by key with the node it is bound to (a pod) and its conditions; on
        PostgreSQL in one round trip. Objects found only as `every_of` come without them."""
        wanted = list(dict.fromkeys(keys))
        if not on_postgres(self._session):
            return await self._with_facts_read_apart(wanted, every_of)
        kinds, namespaces, names = zip(*wanted, strict=True) if wanted else ((), (), ())
        parameters: dict[str, Any] = {"given_kind": kinds, "given_namespace": namespaces, "given_name": names}
        statement = _WITH_FACTS_PG if every_of is None else _WITH_FACTS_OR_KIND_PG
        if every_of is not None:
            parameters["every_kind"] = every_of
        found: dict[str, ObjectRead] = {}
        for row in await self._read_pg(statement, parameters):
            fields = row._asdict()
            bound_to, condition_rows, by_key = (
                fields.pop("bound_to"),
                fields.pop("condition_rows"),
                fields.pop("by_key"),
            )
            stored = StoredObject(**fields)
            if stored.uid not in found or by_key:
                conditions = _conditions_of(stored.uid, condition_rows) if by_key else None
                found[stored.uid] = ObjectRead(stored, bound_to, conditions)
        return list(found.values())

    async def _with_facts_read_apart(
        self, wanted: list[tuple[str, str, str]], every_of: str | None
    ) -> list[ObjectRead]:
        """`get_many_with_facts` as three reads, each as its own repository makes it (SQLite)."""
        by_key = await self._get_many_in_chunks(wanted)
        uids = [obj.uid for obj in by_key]
        bound = {
            b.pod_uid: b.node_name for b in await SqlAlchemyBindingRepository(self._session).get_many(uids)
        }
        conditions = await SqlAlchemyConditionRepository(self._session, self._clock).list_for_many(uids)
        found = {obj.uid: ObjectRead(obj, bound.get(obj.uid), conditions.get(obj.uid, [])) for obj in by_key}
        for obj in await self.find(every_of) if every_of is not None else []:
            found.setdefault(obj.uid, ObjectRead(obj))
        return list(found.values())

    async def _get_many_in_chunks(self, wanted: list[tuple[str, str, str]]) -> list[StoredObject]:
        found: list[StoredObject] = []
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            query = select(objects).where(
                tuple_(objects.c.kind, objects.c.namespace, objects.c.name).in_(chunk)
            )
            found += [_to_object(row) for row in await self._session.execute(query)]
        return found

    async def create_many(self, drafts: Sequence[ObjectDraft]) -> list[StoredObject]:
        """Create objects that must not exist yet, in one statement; ConflictError if any exists (the
        transaction is then unusable: roll back). No savepoint: it would cost two round trips on every call
        to spare callers who all roll back anyway."""
        if not drafts:
            return []
        now = self._clock()
        rows = [_new_row(draft, now) for draft in drafts]
        objects_written(self._session)
        revisions: dict[str, int] = {}
        try:
            if on_postgres(self._session):
                written = await self._session.execute(_CREATE_PG, _created_rows(rows, now))
                revisions = {uid: revision for uid, revision in written}
            else:
                await self._session.execute(insert(objects), rows)
        except IntegrityError as exc:
            raise ConflictError(f"{len(drafts)} objects: at least one already exists") from exc
        created = [StoredObject(**row) for row in rows]
        if not revisions:  # SQLite: stamped at commit
            return created
        return [
            dataclasses.replace(obj, revision=revisions[obj.uid], created_revision=revisions[obj.uid])
            for obj in created
        ]

    async def get_by_uid(self, uid: str) -> StoredObject | None:
        """The object with this uid, or None."""
        row = (await self._session.execute(select(objects).where(objects.c.uid == uid))).first()
        return _to_object(row) if row else None

    async def find(
        self,
        kind: str,
        namespace: str | None = None,
        labels: dict[str, str] | None = None,
        *,
        marked_for_deletion: bool = False,
        after: tuple[str, str] | None = None,
        limit: int | None = None,
        podgroups: Collection[str] | None = None,
    ) -> list[StoredObject]:
        """Objects of a kind, optionally in one namespace, matching every label, only those marked for
        deletion, and only pods of the PodGroups `podgroups` names (`spec.schedulingGroup.podGroupName`);
        ordered by namespace/name, from after the (namespace, name) `after`, at most `limit`."""
        query = select(objects).where(objects.c.kind == kind)
        if podgroups is not None:
            query = query.where(
                objects.c.spec[("schedulingGroup", "podGroupName")].as_string().in_(podgroups)
            )
        query = _page(query, namespace, after, limit)
        if marked_for_deletion:
            query = query.where(objects.c.deletion_requested_at.is_not(None))
        for key, value in (labels or {}).items():
            query = query.where(objects.c.metadata[("labels", key)].as_string() == value)
        rows = await self._session.execute(query.order_by(objects.c.namespace, objects.c.name))
        return [_to_object(row) for row in rows]

    async def find_versions(
        self,
        kind: str,
        namespace: str | None = None,
        *,
        after: tuple[str, str] | None = None,
        limit: int | None = None,
    ) -> list[ObjectVersion]:
        """What `find` would return, as each object's uid, key and revision only (without reading or decoding
        the documents)."""
        columns = (objects.c.uid, objects.c.namespace, objects.c.name, objects.c.resource_version)
        query = _page(
            select(*columns, objects.c.revision).where(objects.c.kind == kind), namespace, after, limit
        )
        rows = await self._session.execute(query.order_by(objects.c.namespace, objects.c.name))
        return [ObjectVersion(*row) for row in rows]  # the columns in ObjectVersion's order

    async def get_by_uids(self, uids: Sequence[str]) -> list[StoredObject]:
        """The objects with these uids that exist, in no particular order."""
        wanted = list(dict.fromkeys(uids))
        if not wanted:
            return []
        if on_postgres(self._session):
            return [_to_object(row) for row in await self._session.execute(_BY_UIDS_PG, {"uids": wanted})]
        found: list[StoredObject] = []
        for start in range(0, len(wanted), 500):
            query = select(objects).where(objects.c.uid.in_(wanted[start : start + 500]))
            found += [_to_object(row) for row in await self._session.execute(query)]
        return found

    async def namespaces(self) -> list[str]:
        """The namespaces that hold an object, sorted."""
        query = select(objects.c.namespace).where(objects.c.namespace != "").distinct()
        return sorted(str(row[0]) for row in await self._session.execute(query))

    async def emptying_namespaces(self) -> set[str]:
        """The namespaces every object of which is marked for deletion."""
        live = func.max(case((objects.c.deletion_requested_at.is_(None), 1), else_=0))
        query = select(objects.c.namespace).where(objects.c.namespace != "").group_by(objects.c.namespace)
        return {str(row[0]) for row in await self._session.execute(query.having(live == 0))}

    async def find_marked(self, kinds: Sequence[str]) -> list[StoredObject]:
        """Objects of these kinds marked for deletion, in one query: by kind in the order given, then by
        namespace/name."""
        query = select(objects).where(objects.c.kind.in_(kinds), objects.c.deletion_requested_at.is_not(None))
        rows = await self._session.execute(query.order_by(objects.c.namespace, objects.c.name))
        rank = {kind: position for position, kind in enumerate(kinds)}
        return sorted((_to_object(row) for row in rows), key=lambda obj: rank[obj.kind])

    async def controllers_of(
        self, keys: Iterable[tuple[str, str, str]], controller_kind: str
    ) -> set[tuple[str, str]]:
        """(namespace, name) of the controllers of kind `controller_kind` (`ownerReferences` with
        `controller: true`) of the objects with these keys; on PostgreSQL without reading the objects back."""
        wanted = list(dict.fromkeys(keys))
        if not wanted:
            return set()
        if not on_postgres(self._session):
            return {
                (obj.namespace, str(ref.get("name")))
                for obj in await self.get_many(wanted)
                for ref in obj.metadata.get("ownerReferences") or []
                if ref.get("kind") == controller_kind and ref.get("controller")
            }
        kinds, namespaces, names = zip(*wanted, strict=True)
        parameters = {
            "given_kind": kinds,
            "given_namespace": namespaces,
            "given_name": names,
            "controller_kind": controller_kind,
        }
        return {(row[0], row[1]) for row in await self._session.execute(_CONTROLLERS_PG, parameters)}

    async def find_awaiting_workloads(self, workloads: Iterable[tuple[str, str]]) -> list[StoredObject]:
        """Pods admitted before the v1.35 Workload their `workloadRef` names (annotation
        `podway.io/workload-ref-name`), for these (namespace, Workload name) pairs, ordered by namespace and
        name; one statement of index probes on PostgreSQL."""
        wanted = sorted(set(workloads))
        if not wanted:
            return []
        if on_postgres(self._session):
            namespaces, names = zip(*wanted, strict=True)
            parameters = {"given_namespace": namespaces, "given_workload": names}
            return [_to_object(row) for row in await self._read_pg(_AWAITING_PG, parameters)]
        awaited = objects.c.metadata[("annotations", WORKLOAD_REF_NAME)].as_string()
        found: list[StoredObject] = []
        for namespace, name in wanted:
            query = select(objects).where(
                objects.c.kind == "Pod", objects.c.namespace == namespace, awaited == name
            )
            found += [_to_object(row) for row in await self._session.execute(query.order_by(objects.c.name))]
        return found

    async def upsert(
        self, draft: ObjectDraft, *, expected_resource_version: int | None = None
    ) -> StoredObject:
        """Create or replace an object.

        `expected_resource_version`: None writes unconditionally (apply), `MUST_NOT_EXIST` (0) only creates, any
        other value only updates the object if it still has that version. Raises ConflictError otherwise.
        """
        if expected_resource_version not in (None, MUST_NOT_EXIST) and on_postgres(self._session):
            return await self._replace_at(draft, expected_resource_version)
        current = await self._get_for_update(draft.kind, draft.namespace, draft.name)
        if current is None:
            if expected_resource_version not in (None, MUST_NOT_EXIST):
                raise ConflictError(
                    f"{_ref(draft)} does not exist (expected version {expected_resource_version})"
                )
            return await self._create(draft)
        if expected_resource_version is not None and expected_resource_version != current.resource_version:
            raise ConflictError(
                f"{_ref(draft)} is at version {current.resource_version}, not {expected_resource_version}"
            )
        return await self._replace(current, draft)

    async def update_status(
        self,
        kind: str,
        namespace: str,
        name: str,
        status: JsonObject,
        *,
        expected_resource_version: int | None = None,
    ) -> StoredObject:
        """Replace the status only (generation unchanged)."""
        current = await self._require(kind, namespace, name, expected_resource_version)
        return await self._write(current, {"status": status})

    async def update_statuses(self, changes: Sequence[tuple[StoredObject, JsonObject]]) -> list[StoredObject]:
        """Replace the status of objects read earlier, each compare-and-set on the version it was read at, in
        one statement; ConflictError (write nothing: roll back) when any of them changed since."""
        if not changes:
            return []
        now = self._clock()
        dialect = dialect_of(self._session)
        objects_written(self._session)
        rows = [(current.uid, current.resource_version, status) for current, status in changes]
        parameters = {**_given_rows(dialect, rows), "updated_at": now}
        written = set((await self._session.execute(_STATUS_UPDATES[dialect], parameters)).scalars())
        if len(written) != len(rows):
            missed = sorted(f"{c.kind} {c.namespace}/{c.name}" for c, _ in changes if c.uid not in written)
            raise ConflictError(f"changed concurrently: {', '.join(missed)}")
        return [
            dataclasses.replace(
                current, status=status, resource_version=current.resource_version + 1, updated_at=now
            )
            for current, status in changes
        ]

    async def request_deletion(
        self,
        kind: str,
        namespace: str,
        name: str,
        *,
        expected_uid: str | None = None,
        expected_resource_version: int | None = None,
        grace_seconds: int | None = None,
    ) -> StoredObject:
        """Mark an object for deletion; the owning controller deletes it once it has cleaned up. With
        preconditions, only the incarnation (uid) and version they name is marked (ConflictError).
        `grace_seconds`: a pod's time to stop, kept as its `metadata.deletionGracePeriodSeconds`."""
        current = await self._require(kind, namespace, name, None)
        _check_preconditions(current, expected_uid, expected_resource_version)
        if current.deletion_requested_at is not None:
            return current
        changes: dict[str, Any] = {"deletion_requested_at": self._clock()}
        if grace_seconds is not None:
            changes["metadata"] = {**current.metadata, "deletionGracePeriodSeconds": grace_seconds}
        return await self._write(current, changes)

    async def delete(
        self,
        kind: str,
        namespace: str,
        name: str,
        *,
        expected_resource_version: int | None = None,
        expected_uid: str | None = None,
    ) -> bool:
        """Delete an object (and its conditions); False when it did not exist. With preconditions, only the
        incarnation (uid) and version they name is deleted: another one is a ConflictError."""
        statement = delete(objects).where(
            objects.c.kind == kind, objects.c.namespace == namespace, objects.c.name == name
        )
        if expected_resource_version is not None:
            statement = statement.where(objects.c.resource_version == expected_resource_version)
        if expected_uid is not None:
            statement = statement.where(objects.c.uid == expected_uid)
        objects_written(self._session)
        deleted = rowcount(await self._session.execute(statement))
        if deleted == 0 and (expected_resource_version is not None or expected_uid is not None):
            current = await self.get(kind, namespace, name)
            if current is not None:
                _check_preconditions(current, expected_uid, expected_resource_version)
        return deleted > 0

    async def delete_by_uids(self, uids: Sequence[str]) -> int:
        """Delete objects (and their conditions) by uid, in one statement; how many existed."""
        if not uids:
            return 0
        objects_written(self._session)
        return rowcount(await self._session.execute(delete(objects).where(objects.c.uid.in_(list(uids)))))

    async def _get_for_update(self, kind: str, namespace: str, name: str) -> StoredObject | None:
        row = (await self._session.execute(_BY_KEY_FOR_UPDATE, _key(kind, namespace, name))).first()
        return _to_object(row) if row else None

    async def _require(
        self, kind: str, namespace: str, name: str, expected_resource_version: int | None
    ) -> StoredObject:
        current = await self._get_for_update(kind, namespace, name)
        if current is None:
            raise NotFoundError(f"{kind} {namespace}/{name} not found")
        if expected_resource_version is not None and expected_resource_version != current.resource_version:
            raise ConflictError(
                f"{kind} {namespace}/{name} is at version {current.resource_version}, not {expected_resource_version}"
            )
        return current

    async def _create(self, draft: ObjectDraft) -> StoredObject:
        values = _new_row(draft, self._clock())
        objects_written(self._session)
        result = await self._session.execute(insert_ignoring_duplicates(self._session, objects, values))
        if rowcount(result) != 1:
            raise ConflictError(f"{_ref(draft)} already exists")
        return StoredObject(**values)

    async def _replace(self, current: StoredObject, draft: ObjectDraft) -> StoredObject:
        changes: dict[str, Any] = {
            "api_version": draft.api_version,
            "spec": draft.spec,
            "metadata": draft.metadata,
            "status": draft.status,
        }
        if draft.spec != current.spec:
            changes["generation"] = current.generation + 1
        return await self._write(current, changes)

    async def replace_many_at(self, replacements: Sequence[tuple[ObjectDraft, int]]) -> list[StoredObject]:
        """Replace objects, each only while it is at the version given with it (distinct keys); on PostgreSQL
        in one statement. ConflictError (write nothing: roll back) when any of them is not. Returns them as
        stored (on PostgreSQL the documents are the drafts' own: the statement returns only the columns the
        store sets)."""
        if not replacements:
            return []
        if not on_postgres(self._session):
            return [await self.upsert(draft, expected_resource_version=e) for draft, e in replacements]
        objects_written(self._session)
        parameters = {**replacement_rows(replacements), "updated_at": self._clock()}
        written = {
            (row.kind, row.namespace, row.name): row
            for row in await self._session.execute(_REPLACEMENTS_PG, parameters)
        }
        if len(written) != len(replacements):
            missed = sorted(_ref(d) for d, _ in replacements if (d.kind, d.namespace, d.name) not in written)
            raise ConflictError(f"not at the version read (changed or gone since): {', '.join(missed)}")
        return [
            replaced_object(draft, written[(draft.kind, draft.namespace, draft.name)])
            for draft, _ in replacements
        ]

    async def _replace_at(self, draft: ObjectDraft, expected_resource_version: int) -> StoredObject:
        """`_replace` in one statement on PostgreSQL, for a caller that names the version it read: the row is
        written only while it is at that version (its generation moves on when the spec changes, as JSONB
        compares documents by value), without reading it first."""
        objects_written(self._session)
        changed_spec = objects.c.spec != cast(draft.spec, objects.c.spec.type)
        statement = (
            update(objects)
            .where(
                objects.c.kind == draft.kind,
                objects.c.namespace == draft.namespace,
                objects.c.name == draft.name,
                objects.c.resource_version == expected_resource_version,
            )
            .values(
                api_version=draft.api_version,
                spec=draft.spec,
                metadata=draft.metadata,
                status=draft.status,
                generation=objects.c.generation + case((changed_spec, 1), else_=0),
                resource_version=objects.c.resource_version + 1,
                updated_at=self._clock(),
            )
            .returning(*objects.c)
        )
        row = (await self._session.execute(statement)).first()
        if row is None:
            raise ConflictError(
                f"{_ref(draft)} is not at version {expected_resource_version} (changed or gone since)"
            )
        return _to_object(row)

    async def _write(self, current: StoredObject, changes: dict[str, Any]) -> StoredObject:
        """Compare-and-set on resource_version, so a concurrent writer that slipped in is detected."""
        changes = {**changes, "resource_version": current.resource_version + 1, "updated_at": self._clock()}
        objects_written(self._session)
        result = await self._session.execute(
            update(objects)
            .where(objects.c.uid == current.uid, objects.c.resource_version == current.resource_version)
            .values(changes)
        )
        if rowcount(result) != 1:
            raise ConflictError(f"{current.kind} {current.namespace}/{current.name} changed concurrently")
        return dataclasses.replace(current, **changes)


def _new_row(draft: ObjectDraft, now: datetime) -> dict[str, Any]:
    return {
        "uid": draft.uid or str(uuid.uuid4()),
        "kind": draft.kind,
        "api_version": draft.api_version,
        "namespace": draft.namespace,
        "name": draft.name,
        "generation": 1,
        "resource_version": 1,
        "spec": draft.spec,
        "metadata": draft.metadata,
        "status": draft.status,
        "created_at": now,
        "updated_at": now,
        "deletion_requested_at": None,
    }


CREATE_ROWS_PG = """
    INSERT INTO objects (
        uid, kind, api_version, namespace, name, generation, resource_version, spec, metadata, status,
        created_at, updated_at, deletion_requested_at
    )
    SELECT given.uid, given.kind, given.api_version, given.namespace, given.name, 1, 1,
        CAST(given.spec AS jsonb), CAST(given.metadata AS jsonb), CAST(given.status AS jsonb), :now, :now, NULL
    FROM unnest(
        CAST(:uid AS varchar[]), CAST(:kind AS varchar[]), CAST(:api_version AS varchar[]),
        CAST(:namespace AS varchar[]), CAST(:name AS varchar[]), CAST(:spec AS varchar[]),
        CAST(:metadata AS varchar[]), CAST(:status AS varchar[])
    ) AS given(uid, kind, api_version, namespace, name, spec, metadata, status)
    RETURNING uid, revision
    """
"""Objects created from arrays of their columns (`_created_rows`), returning each one's revision."""
_CREATE_PG = text(CREATE_ROWS_PG).bindparams(bindparam("now", type_=UtcDateTime()))
"""`create_many` on PostgreSQL: one statement and one execution for any number of objects (a row per
object would be executed, and planned, once each), at generation 1 and version 1 as `_new_row` has them;
it returns the revision each got as it was written."""


def _created_rows(rows: Sequence[dict[str, Any]], now: datetime) -> dict[str, Any]:
    """The parameters of `_CREATE_PG`: a column of values per array, documents as the text Podway stores."""
    parameters: dict[str, Any] = {"now": now}
    for name in ("uid", "kind", "api_version", "namespace", "name"):
        parameters[name] = [row[name] for row in rows]
    for name in ("spec", "metadata", "status"):
        parameters[name] = [json_text(row[name]) for row in rows]
    return parameters


_BY_KEY = select(objects).where(
    objects.c.kind == bindparam("key_kind"),
    objects.c.namespace == bindparam("key_namespace"),
    objects.c.name == bindparam("key_name"),
)
"""One object by its key: built once, not on every read (building the statement and its cache key was nearly
half of `get`'s time in admission's profile)."""
_BY_KEY_FOR_UPDATE = _BY_KEY.with_for_update()


def _key(kind: str, namespace: str, name: str) -> dict[str, str]:
    return {"key_kind": kind, "key_namespace": namespace, "key_name": name}


def _page(
    query: Select[Any], namespace: str | None, after: tuple[str, str] | None, limit: int | None
) -> Select[Any]:
    """`query` in one namespace (all without one), from after the (namespace, name) `after`, at most `limit`
    (the caller orders by namespace and name)."""
    if namespace is not None:
        query = query.where(objects.c.namespace == namespace)
    if after is not None:
        query = query.where(tuple_(objects.c.namespace, objects.c.name) > tuple_(*after))
    return query.limit(limit) if limit is not None else query


_BY_UIDS_PG = select(objects).where(objects.c.uid == any_(bindparam("uids", type_=ARRAY(String))))
"""`get_by_uids` on PostgreSQL: one statement text for any number of objects, prepared once per connection."""


def _to_object(row: Row[Any]) -> StoredObject:
    return StoredObject(**row._asdict())


OBJECT_MODIFIED = (
    "the object has been modified; please apply your changes to the latest version and try again"
)


def _check_preconditions(current: StoredObject, uid: str | None, resource_version: int | None) -> None:
    """The API server's preconditions of a delete: the incarnation, then the version (its wording)."""
    if uid is not None and uid != current.uid:
        raise ConflictError(
            f"Precondition failed: UID in precondition: {uid}, UID in object meta: {current.uid}"
        )
    if resource_version is not None and resource_version != current.resource_version:
        raise ConflictError(OBJECT_MODIFIED)


def _ref(draft: ObjectDraft) -> str:
    return f"{draft.kind} {draft.namespace}/{draft.name}"


_KEYS = unnest_rows(("kind", String), ("namespace", String), ("name", String))
_BY_KEYS_PG = select(objects).join(
    _KEYS,
    (objects.c.kind == _KEYS.c.kind)
    & (objects.c.namespace == _KEYS.c.namespace)
    & (objects.c.name == _KEYS.c.name),
)


def _with_facts_pg() -> tuple[Select[Any], Any]:
    """`get_many_with_facts` on PostgreSQL: the objects by key with their binding and their conditions (as a
    JSON array of rows), and, for `every_of`, every object of a kind without them."""
    condition_rows = (
        select(
            func.json_agg(
                func.json_build_array(
                    table_conditions.c.type,
                    table_conditions.c.status,
                    table_conditions.c.owner,
                    table_conditions.c.reason,
                    table_conditions.c.message,
                    table_conditions.c.observed_generation,
                    table_conditions.c.last_transition_time,
                )
            )
        )
        .where(table_conditions.c.object_uid == objects.c.uid)
        .scalar_subquery()
    )
    by_key = (
        select(
            objects,
            pod_bindings.c.node_name.label("bound_to"),
            condition_rows.label("condition_rows"),
            literal_column("true").label("by_key"),
        )
        .join(
            _KEYS,
            (objects.c.kind == _KEYS.c.kind)
            & (objects.c.namespace == _KEYS.c.namespace)
            & (objects.c.name == _KEYS.c.name),
        )
        .outerjoin(pod_bindings, pod_bindings.c.pod_uid == objects.c.uid)
    )
    of_kind = select(
        objects,
        cast(null(), String).label("bound_to"),
        cast(null(), JSON).label("condition_rows"),
        literal_column("false").label("by_key"),
    ).where(objects.c.kind == bindparam("every_kind"))
    return by_key, union_all(by_key, of_kind)


_WITH_FACTS_PG, _WITH_FACTS_OR_KIND_PG = _with_facts_pg()


def _conditions_of(uid: str, rows: Any) -> list[Condition]:
    """The conditions `_with_facts_pg` read for one object, ordered by type."""
    if isinstance(rows, str | bytes):
        rows = json_value(rows)
    return sorted(
        (
            Condition(
                object_uid=uid,
                type=type_,
                status=status,
                owner=owner,
                reason=reason,
                message=message,
                observed_generation=observed_generation,
                last_transition_time=datetime.fromisoformat(transition) if transition else None,
            )
            for type_, status, owner, reason, message, observed_generation, transition in rows or []
        ),
        key=lambda condition: condition.type,
    )


_CONTROLLERS_PG = text(
    """
    SELECT DISTINCT objects.namespace, owner ->> 'name'
    FROM objects
    JOIN unnest(CAST(:given_kind AS varchar[]), CAST(:given_namespace AS varchar[]),
                CAST(:given_name AS varchar[])) AS given(kind, namespace, name)
        ON objects.kind = given.kind AND objects.namespace = given.namespace AND objects.name = given.name
    CROSS JOIN LATERAL jsonb_array_elements(
        COALESCE(objects.metadata -> 'ownerReferences', '[]'::jsonb)) AS owner
    WHERE owner ->> 'kind' = :controller_kind AND owner -> 'controller' = 'true'::jsonb
    """
)
"""`controllers_of` on PostgreSQL: only the owners' names leave the database."""

_AWAITED = unnest_rows(("namespace", String), ("workload", String))
_AWAITED_BY: ColumnElement[Any] = literal_column(AWAITING_WORKLOAD_PG)
# Written with the literals of the partial index's predicate, so that even a generic plan may use it.
_AWAITING_PG = (
    select(objects)
    .join(_AWAITED, (objects.c.namespace == _AWAITED.c.namespace) & (_AWAITED.c.workload == _AWAITED_BY))
    .where(literal_column("objects.kind = 'Pod'"), _AWAITED_BY.is_not(None))
    .order_by(objects.c.namespace, objects.c.name)
)


def _status_updates(dialect: str) -> Update:
    """`UPDATE objects ... FROM <the given rows>` whose text does not depend on how many rows are given: it is
    compiled once and prepared once per connection, where a VALUES list would be compiled and prepared anew on
    every call; the time is a parameter too, so that no call builds a statement of its own. See `_given_rows`
    for how the rows are passed."""
    if dialect == "postgresql":
        given = unnest_rows(("uid", String), ("expected", BigInteger), ("status", String))
        uid: ColumnElement[Any] = given.c.uid
        expected: ColumnElement[Any] = given.c.expected
        status: ColumnElement[Any] = cast(given.c.status, JSONB)
    else:
        each = func.json_each(bindparam("rows", type_=String)).table_valued("value").alias("given")
        uid = func.json_extract(each.c.value, "$[0]")
        expected = func.json_extract(each.c.value, "$[1]")
        status = func.json_extract(each.c.value, "$[2]")
    return (
        update(objects)
        .where(objects.c.uid == uid, objects.c.resource_version == expected)
        .values(
            status=status,
            resource_version=objects.c.resource_version + 1,
            updated_at=bindparam("updated_at", type_=objects.c.updated_at.type),
        )
        .returning(objects.c.uid)
    )


def _given_rows(dialect: str, rows: Sequence[tuple[str, int, JsonObject]]) -> dict[str, Any]:
    """The parameters of `_status_updates`: arrays on PostgreSQL, one JSON array on SQLite. Each status goes as
    the text Podway stores, so that SQLite keeps it byte for byte as every other write does (documents are
    compared as text there)."""
    if dialect == "postgresql":
        return {
            "given_uid": [uid for uid, _, _ in rows],
            "given_expected": [version for _, version, _ in rows],
            "given_status": [json_text(status) for _, _, status in rows],
        }
    return {"rows": json_text([[uid, version, json_text(status)] for uid, version, status in rows])}


_STATUS_UPDATES = {dialect: _status_updates(dialect) for dialect in ("postgresql", "sqlite")}


def _replacements_pg() -> Update:
    """`replace_many_at` on PostgreSQL: the rows given as arrays (see `unnest_rows`), each written only while
    its object is at the version given with it; the generation moves when the JSONB spec differs."""
    given = unnest_rows(
        ("kind", String),
        ("namespace", String),
        ("name", String),
        ("expected", BigInteger),
        ("api_version", String),
        ("spec", String),
        ("metadata", String),
        ("status", String),
    )
    spec: ColumnElement[Any] = cast(given.c.spec, JSONB)
    return (
        update(objects)
        .where(
            objects.c.kind == given.c.kind,
            objects.c.namespace == given.c.namespace,
            objects.c.name == given.c.name,
            objects.c.resource_version == given.c.expected,
        )
        .values(
            api_version=given.c.api_version,
            spec=spec,
            metadata=cast(given.c.metadata, JSONB),
            status=cast(given.c.status, JSONB),
            generation=objects.c.generation + case((objects.c.spec != spec, 1), else_=0),
            resource_version=objects.c.resource_version + 1,
            updated_at=bindparam("updated_at", type_=objects.c.updated_at.type),
        )
        .returning(*(objects.c[column] for column in _SET_BY_STORE))
    )


_SET_BY_STORE = (
    "kind",
    "namespace",
    "name",
    "uid",
    "generation",
    "resource_version",
    "created_at",
    "updated_at",
    "deletion_requested_at",
    "revision",
    "created_revision",
)
_REPLACEMENTS_PG = _replacements_pg()


def replacement_rows(replacements: Sequence[tuple[ObjectDraft, int]]) -> dict[str, Any]:
    """Replacements as arrays of their columns (`given_*`), documents as the text Podway stores."""
    drafts = [draft for draft, _ in replacements]
    return {
        "given_kind": [draft.kind for draft in drafts],
        "given_namespace": [draft.namespace for draft in drafts],
        "given_name": [draft.name for draft in drafts],
        "given_expected": [expected for _, expected in replacements],
        "given_api_version": [draft.api_version for draft in drafts],
        "given_spec": [json_text(draft.spec) for draft in drafts],
        "given_metadata": [json_text(draft.metadata) for draft in drafts],
        "given_status": [json_text(draft.status) for draft in drafts],
    }


def replaced_object(draft: ObjectDraft, row: Row[Any]) -> StoredObject:
    """An object a replacement wrote: the draft's documents with the columns the store set (`row` may hold
    more)."""
    return StoredObject(
        **{column: getattr(row, column) for column in _SET_BY_STORE},
        api_version=draft.api_version,
        spec=draft.spec,
        metadata=draft.metadata,
        status=draft.status,
    )
