"""Persistence: SQLAlchemy tables, repositories, the unit of work, outbox and inbox.

Import the ports (`libs.db.ports`, `libs.db.records`, `libs.db.errors`) from services and adapters that must not
depend on SQLAlchemy; the concrete adapters live in `libs.db.uow`, `libs.db.engine` and `libs.db.migrate`.
"""
