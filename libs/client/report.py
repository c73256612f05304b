"""`podway report`: read a run's audit log from its database and write the self-contained HTML page."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from libs.client.report_html import render_report
from libs.client.report_model import RunReport, build_report

PAGE_SIZE = 5000


async def read_events(database_url: str) -> list[dict[str, Any]]:
    """Every event of the audit log, in `seq` order, as `podway events -o json` prints them."""
    from libs.db.engine import create_engine, create_session_factory
    from libs.db.uow import unit_of_work_factory

    engine = create_engine(database_url)
    events: list[dict[str, Any]] = []
    try:
        factory = unit_of_work_factory(create_session_factory(engine))
        after = 0
        while True:
            async with factory() as uow:
                page = await uow.events.since(after, limit=PAGE_SIZE)
            events += [{"seq": e.seq, **e.envelope.model_dump(mode="json")} for e in page]
            if len(page) < PAGE_SIZE:
                return events
            after = page[-1].seq
    finally:
        await engine.dispose()


async def write_report(database_url: str, out: Path) -> RunReport:
    report = build_report(await read_events(database_url))
    page = render_report(report)

    def write() -> None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(page, encoding="utf-8")

    await asyncio.to_thread(write)
    return report
