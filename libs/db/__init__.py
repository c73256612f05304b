"""Persistence: SQLAlchemy tables, repositories, the unit of work, outbox and inbox.

Import the ports (`libs.db.ports`, `libs.db.records`, `libs.db.errors`, `libs.db.retention`) from code that must
not depend on SQLAlchemy; the adapters live in `libs.db.uow`, `libs.db.engine` and `libs.db.migrate`, and
`libs.db.testing` gives service unit tests a migrated in-memory database.
"""
