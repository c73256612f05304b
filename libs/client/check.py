"""`podway check`: read what a run left in the database and report every broken promise (libs/core/invariants)."""

from __future__ import annotations

import asyncio
import json

from libs.core.invariants import Violation, check
from libs.db.run_records import load_records


async def violations(database_url: str, expected_requests: frozenset[str] = frozenset()) -> list[Violation]:
    return check(await load_records(database_url, expected_requests))


def report(found: list[Violation], records_checked: dict[str, int], output: str) -> str:
    """The check's answer: a JSON object, or one line per violation and a summary."""
    if output == "json":
        return json.dumps(
            {
                "violations": len(found),
                "checked": records_checked,
                "found": [
                    {"invariant": v.invariant, "subject": v.subject, "detail": v.detail} for v in found
                ],
            }
        )
    lines = [f"{v.invariant}\t{v.subject}\t{v.detail}" for v in found]
    counts = ", ".join(f"{count} {what}" for what, count in records_checked.items())
    lines.append(f"{len(found)} violations ({counts} checked)")
    return "\n".join(lines)


def run(database_url: str, output: str = "text", expected_requests: frozenset[str] = frozenset()) -> int:
    """Check a database; exit code 0 when every promise held, 1 otherwise."""
    records = asyncio.run(load_records(database_url, expected_requests))
    found = check(records)
    checked = {
        "objects": len(records.objects),
        "bindings": len(records.bindings),
        "device_allocations": len(records.device_allocations),
        "events": len(records.events),
    }
    print(report(found, checked, output))
    return 1 if found else 0
