"""The router benchmarks keep their output contract: a short trace replay answers every request."""

from __future__ import annotations

import argparse

import pytest

from bench import router_trace, router_vs_litellm


@pytest.mark.skipif(
    not (router_trace.traces_dir() / router_trace.TRACE).exists(),
    reason="the GenAI trace is read in place from ../shared/traces (or PODWAY_TRACES_DIR), which is absent here",
)
def test_a_short_trace_replay_reports_its_metrics_and_fails_nothing():
    parser = argparse.ArgumentParser()
    router_trace.add_arguments(parser)
    args = parser.parse_args(["--window-hours", "0.25", "--compression", "300"])
    result = router_trace.run(args)
    assert result["name"] == "router-trace"
    assert result["params"]["compression"] == 300
    metrics = result["metrics"]
    assert set(metrics) >= {"requests", "served_pt", "spilled_to_od", "failed_over", "failed"}
    assert metrics["requests"] > 0
    assert metrics["failed"] == 0
    served_od = sum(v for k, v in metrics.items() if k.startswith("served_by_") and k.endswith("_od"))
    assert metrics["served_pt"] + served_od == metrics["requests"]


def test_the_litellm_comparison_refuses_to_run_without_litellm(monkeypatch, tmp_path, capsys):
    def no_index(*_args, **_kwargs):
        raise router_vs_litellm.LiteLLMUnavailable(
            "could not install LiteLLM (is the package index reachable?)"
        )

    monkeypatch.setattr(router_vs_litellm, "ensure_litellm_env", no_index)
    parser = argparse.ArgumentParser()
    router_vs_litellm.add_arguments(parser)
    with pytest.raises(SystemExit) as caught:
        router_vs_litellm.run(parser.parse_args(["--venv-dir", str(tmp_path)]))
    assert caught.value.code == 2
    assert "package index" in capsys.readouterr().err


def test_the_litellm_comparison_subtracts_each_requests_own_provider_call():
    tally = router_vs_litellm._Tally()
    tally.e2e = {"bedrock": [10.0, 12.0], "vertex": [5.0, 7.0]}
    tally.provider = {"bedrock": [9.0, 9.5], "vertex": [4.5, 6.0]}
    tally.baseline = {"bedrock": [1.0, 2.0, 3.0], "vertex": [0.5]}
    summary = tally.summary()
    assert summary["by_cloud"] == {"bedrock": [1.0, 2.5], "vertex": [0.5, 1.0]}
    assert summary["added_ms"] == [1.0, 2.5, 0.5, 1.0]
    # The second reading: end to end minus the median raw HTTP call to the same cloud.
    assert summary["over_raw_ms"] == [8.0, 10.0, 4.5, 6.5]
