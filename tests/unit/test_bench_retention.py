"""`podway bench retention` measures what the default policy keeps: plumbing gone within the hour, the audit
log after 30 days."""

from __future__ import annotations

from libs.client import bench_cli


def test_the_plumbing_goes_first_and_the_audit_log_after_its_horizon() -> None:
    result = bench_cli.run_one("retention", ["--gangs", "20", "--pods", "2"])

    states = result["metrics"]["per_10k_gangs"]
    assert result["params"]["gangs"] == 20
    assert states["before"]["events_rows"] == states["before"]["outbox_rows"] == 10_000 * (2 + 7)
    assert states["before"]["inbox_rows"] == 10_000 * 2
    assert (states["after_plumbing"]["outbox_rows"], states["after_plumbing"]["inbox_rows"]) == (0, 0)
    assert states["after_plumbing"]["events_rows"] == states["before"]["events_rows"]
    assert states["after_audit"]["events_rows"] == 0
    assert (
        states["after_audit"]["file_bytes"]
        < states["after_plumbing"]["file_bytes"]
        < states["before"]["file_bytes"]
    )
