"""Pod bindings: current holds of a node, not history. The primary key refuses a second binding of a pod; a
trigger refuses a binding written under a stale lease epoch (the check runs in the database, in the inserting
transaction); a binding goes with its pod (foreign key, ON DELETE CASCADE) and is released when the pod ends."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import BigInteger, Row, String, any_, bindparam, delete, func, literal, select, update
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncSession

from libs.db.errors import AlreadyBoundError, StaleEpochError
from libs.db.records import Fence, PodBinding
from libs.db.repositories._sql import (
    dialect_of,
    insert_ignoring_duplicates,
    is_stale_epoch,
    rowcount,
    unnest_rows,
)
from libs.db.repositories.leases import assert_epoch
from libs.db.repositories.revisions import objects_written
from libs.db.schema import objects, pod_bindings
from libs.db.types import UtcDateTime, json_text


class SqlAlchemyBindingRepository:
    """The `pod_bindings` table."""

    def __init__(self, session: AsyncSession) -> None:
        self._session = session

    async def bind(self, binding: PodBinding, *, fence: Fence) -> None:
        """Bind a pod under the scheduler's lease.

        Raises AlreadyBoundError (the transaction stays usable) or StaleEpochError (the database refused the
        write; roll back: this replica is no longer the leader).
        """
        values = _row(binding, fence)
        try:
            result = await self._session.execute(
                insert_ignoring_duplicates(self._session, pod_bindings, values)
            )
        except DBAPIError as exc:
            if is_stale_epoch(exc):
                raise StaleEpochError(f"binding of pod {binding.pod_uid}: {fence} is stale") from exc
            raise
        if rowcount(result) != 1:
            raise AlreadyBoundError(f"pod {binding.pod_uid} is already bound")

    async def bind_many(self, bindings: Sequence[PodBinding], *, fence: Fence) -> list[str]:
        """Bind many pods in a few statements, whatever their number, all or none: AlreadyBoundError or
        StaleEpochError as `bind` (the fence trigger runs for every row; roll back on either).

        A pod that no longer exists (deleted while it was being scheduled) is skipped, not an error: returns the
        uids skipped. The pods bound are locked until commit, so none is deleted in between, and their
        resource version moves on (their node is part of them)."""
        if not bindings:
            return []
        uids = [binding.pod_uid for binding in bindings]
        objects_written(self._session)
        present = set(
            (
                await self._session.execute(
                    _BOUND_PODS[dialect_of(self._session)], _uids(self._session, uids)
                )
            ).scalars()
        )
        rows = [_row(binding, fence) for binding in bindings if binding.pod_uid in present]
        if rows:
            try:
                inserted = len((await self._insert_returning(rows)).all())
            except DBAPIError as exc:
                if is_stale_epoch(exc):
                    raise StaleEpochError(f"binding {len(rows)} pods: {fence} is stale") from exc
                raise
            if inserted != len(rows):
                raise AlreadyBoundError(f"{len(rows) - inserted} of {len(rows)} pods are already bound")
        return [uid for uid in uids if uid not in present]

    async def _insert_returning(self, rows: list[dict[str, Any]]) -> Any:
        """INSERT ... ON CONFLICT DO NOTHING RETURNING pod_uid of the rows (one fence); on PostgreSQL one
        statement text for any number of rows, prepared once per connection."""
        if dialect_of(self._session) != "postgresql":
            statement = insert_ignoring_duplicates(self._session, pod_bindings, {}).returning(
                pod_bindings.c.pod_uid
            )
            return await self._session.execute(statement, rows)
        parameters = {
            "given_pod_uid": [row["pod_uid"] for row in rows],
            "given_node_name": [row["node_name"] for row in rows],
            "given_podgroup_uid": [row["podgroup_uid"] for row in rows],
            "given_bound_at": [row["bound_at"] for row in rows],
            "lease_name": rows[0]["lease_name"],
            "epoch": rows[0]["epoch"],
        }
        return await self._session.execute(_INSERT_PG, parameters)

    async def release_many(self, pod_uids: Iterable[str]) -> int:
        """Remove the bindings of pods that ended (they hold nothing any more); returns how many there were.
        Not fenced: the node agent that ran the pod releases it, whoever leads the scheduler."""
        if dialect_of(self._session) == "postgresql":
            # One statement text for any number of pods: prepared once per connection.
            uids = list(dict.fromkeys(pod_uids))
            return rowcount(await self._session.execute(_RELEASE_PG, {"uids": uids})) if uids else 0
        released = 0
        for chunk in _chunks(pod_uids):
            statement = delete(pod_bindings).where(pod_bindings.c.pod_uid.in_(chunk))
            released += rowcount(await self._session.execute(statement))
        return released

    async def get_many(self, pod_uids: Iterable[str]) -> list[PodBinding]:
        """The bindings of these pods that exist, ordered by pod uid."""
        if dialect_of(self._session) == "postgresql":
            uids = list(dict.fromkeys(pod_uids))
            if not uids:
                return []
            rows = await self._session.execute(_BINDINGS_PG, {"uids": uids})
            return sorted((_to_binding(row) for row in rows), key=lambda binding: binding.pod_uid)
        found: list[PodBinding] = []
        for chunk in _chunks(pod_uids):
            query = select(pod_bindings).where(pod_bindings.c.pod_uid.in_(chunk))
            found += [_to_binding(row) for row in await self._session.execute(query)]
        return sorted(found, key=lambda binding: binding.pod_uid)

    async def get(self, pod_uid: str) -> PodBinding | None:
        """The binding of a pod, or None."""
        row = (
            await self._session.execute(select(pod_bindings).where(pod_bindings.c.pod_uid == pod_uid))
        ).first()
        return _to_binding(row) if row else None

    async def list_for_podgroup(self, podgroup_uid: str) -> list[PodBinding]:
        """Bindings of a gang's pods."""
        query = select(pod_bindings).where(pod_bindings.c.podgroup_uid == podgroup_uid)
        return [
            _to_binding(row) for row in await self._session.execute(query.order_by(pod_bindings.c.pod_uid))
        ]

    async def list_for_node(self, node_name: str) -> list[PodBinding]:
        """Bindings on one node."""
        query = select(pod_bindings).where(pod_bindings.c.node_name == node_name)
        return [
            _to_binding(row) for row in await self._session.execute(query.order_by(pod_bindings.c.pod_uid))
        ]

    async def list_for_nodes(self, node_names: Iterable[str]) -> list[PodBinding]:
        """Bindings on any of these nodes (a node agent's), ordered by node then pod."""
        names = sorted(set(node_names))
        found: list[PodBinding] = []
        for start in range(0, len(names), 500):
            query = select(pod_bindings).where(pod_bindings.c.node_name.in_(names[start : start + 500]))
            rows = await self._session.execute(
                query.order_by(pod_bindings.c.node_name, pod_bindings.c.pod_uid)
            )
            found += [_to_binding(row) for row in rows]
        return found

    async def unbind(self, pod_uid: str, *, fence: Fence) -> bool:
        """Remove a binding under the lease; False when the pod was not bound."""
        await assert_epoch(self._session, fence.lease, fence.epoch)
        result = await self._session.execute(delete(pod_bindings).where(pod_bindings.c.pod_uid == pod_uid))
        return rowcount(result) > 0


def _chunks(uids: Iterable[str], size: int = 500) -> list[list[str]]:
    """Distinct uids in lists short enough for one IN list on either database."""
    distinct = list(dict.fromkeys(uids))
    return [distinct[start : start + size] for start in range(0, len(distinct), size)]


def _row(binding: PodBinding, fence: Fence) -> dict[str, Any]:
    return {
        "pod_uid": binding.pod_uid,
        "node_name": binding.node_name,
        "podgroup_uid": binding.podgroup_uid,
        "lease_name": fence.lease,
        "epoch": fence.epoch,
        "bound_at": binding.bound_at,
    }


def _to_binding(row: Row[Any]) -> PodBinding:
    return PodBinding(
        pod_uid=row.pod_uid, node_name=row.node_name, podgroup_uid=row.podgroup_uid, bound_at=row.bound_at
    )


def _bound_pods(dialect: str) -> Any:
    """`UPDATE objects SET resource_version = resource_version + 1 ... RETURNING uid` for the given pod uids:
    which of them exist, locked until commit. The text does not depend on how many uids are given.

    On PostgreSQL the kind comes with each uid rather than as a constant: a constant kind lets the planner,
    with statistics taken before the pods arrived, scan every Pod of a kind it believes rare and hash-join
    them (milliseconds per bind once thousands of pods are stored); joined per row, only the primary key is
    probed."""
    if dialect == "postgresql":
        given: Any = unnest_rows(("uid", String), ("kind", String))
        uid, kind = given.c.uid, given.c.kind
    else:
        given = func.json_each(bindparam("uids", type_=String)).table_valued("value").alias("given")
        uid, kind = given.c.value, literal("Pod")
    return (
        update(objects)
        .where(objects.c.kind == kind, objects.c.uid == uid)
        .values(resource_version=objects.c.resource_version + 1)
        .returning(objects.c.uid)
    )


def _uids(session: AsyncSession, uids: Sequence[str]) -> dict[str, Any]:
    if dialect_of(session) == "postgresql":
        return {"given_uid": list(uids), "given_kind": ["Pod"] * len(uids)}
    return {"uids": json_text(list(uids))}


_RELEASE_PG = delete(pod_bindings).where(
    pod_bindings.c.pod_uid == any_(bindparam("uids", type_=ARRAY(String)))
)
_BINDINGS_PG = select(pod_bindings).where(
    pod_bindings.c.pod_uid == any_(bindparam("uids", type_=ARRAY(String)))
)
"""`get_many` on PostgreSQL: one statement text for any number of pods, prepared once per connection."""
_BOUND_PODS = {dialect: _bound_pods(dialect) for dialect in ("postgresql", "sqlite")}
_GIVEN_BINDINGS = unnest_rows(
    ("pod_uid", String), ("node_name", String), ("podgroup_uid", String), ("bound_at", UtcDateTime())
)
_INSERT_PG = (
    postgresql.insert(pod_bindings)
    .from_select(
        ["pod_uid", "node_name", "podgroup_uid", "lease_name", "epoch", "bound_at"],
        select(
            _GIVEN_BINDINGS.c.pod_uid,
            _GIVEN_BINDINGS.c.node_name,
            _GIVEN_BINDINGS.c.podgroup_uid,
            bindparam("lease_name", type_=String),
            bindparam("epoch", type_=BigInteger),
            _GIVEN_BINDINGS.c.bound_at,
        ),
    )
    .on_conflict_do_nothing()
    .returning(pod_bindings.c.pod_uid)
)
"""`bind_many`'s insert on PostgreSQL: the rows as arrays and the fence as two parameters, so that one text
serves every gang size (a VALUES list would be compiled, prepared and planned anew for each size)."""
