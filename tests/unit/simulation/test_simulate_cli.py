"""`podway simulate` on a platform team's own trace: metrics.json and the plots."""

from __future__ import annotations

import json
from pathlib import Path

from libs.client.cli import main

NODES = "sn,cpu_milli,memory_mib,gpu,model\n" + "".join(f"n{i},32000,131072,4,T4\n" for i in range(8))
PODS = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
    + "".join(
        f"p{i},{2000 + 1000 * (i % 3)},8192,{1 + i % 2},{1000 if i % 2 else (250, 500, 1000)[i % 3]},,BE,Running,{i * 7},{i * 7 + 300},{i * 7}\n"
        for i in range(40)
    )
)


def files(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "nodes.csv").write_text(NODES)
    (tmp_path / "pods.csv").write_text(PODS)
    return tmp_path / "pods.csv", tmp_path / "nodes.csv"


def test_inflation_writes_the_metrics_of_every_policy_and_the_allocation_plot(tmp_path: Path, capsys):
    pods, nodes = files(tmp_path)
    out = tmp_path / "out"
    argv = ["simulate", "--trace", str(pods), "--nodes", str(nodes), "--protocol", "inflation"]
    assert main([*argv, "--policy", "all", "--seeds", "42..43", "--out-dir", str(out), "-q"]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert (metrics["protocol"], metrics["trace"], metrics["seeds"]) == ("inflation", str(pods), [42, 43])
    assert list(metrics["policies"]) == ["random", "first-fit", "best-fit", "podway", "fgd", "fgd-cpu-ratio"]
    for figures in metrics["policies"].values():
        assert 0 < figures["gpu_alloc_pct_at_100"] <= figures["gpu_alloc_pct_at_130"] <= 100
        assert figures["unallocated_gpus_at_130"] == round(
            32 * (1 - figures["gpu_alloc_pct_at_130"] / 100), 1
        )
    assert (out / "gpu_allocation.png").read_bytes()[:4] == b"\x89PNG"
    assert "fgd" in capsys.readouterr().out


def test_replay_writes_queueing_figures_and_the_delay_cdf(tmp_path: Path):
    pods, nodes = files(tmp_path)
    out = tmp_path / "replay"
    argv = ["simulate", "--trace", str(pods), "--nodes", str(nodes), "--protocol", "replay", "--seeds", "42"]
    assert main([*argv, "--policy", "podway", "--speedup", "20", "--out-dir", str(out), "-q"]) == 0
    figures = json.loads((out / "metrics.json").read_text())["policies"]["podway"]
    assert figures["pods"] == 40
    assert figures["pods_never_placed"] == 0
    assert 0 <= figures["queueing_delay_s_p50"] <= figures["queueing_delay_s_p99"]
    assert (out / "queueing_delay_cdf.png").read_bytes()[:4] == b"\x89PNG"


def test_an_unknown_policy_is_refused(tmp_path: Path, capsys):
    pods, nodes = files(tmp_path)
    assert main(["simulate", "--trace", str(pods), "--nodes", str(nodes), "--policy", "tetris"]) == 2
    assert "--policy: Unsupported value: tetris" in capsys.readouterr().err


BUSY_PODS = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
    + "".join(f"q{i},4000,16384,2,1000,,LS,Running,{i * 3},{i * 3 + 400},{i * 3}\n" for i in range(60))
)


def test_tenants_replays_the_jobs_split_over_teams_by_quota_beside_the_same_jobs_without(
    tmp_path: Path, capsys
):
    _, nodes = files(tmp_path)
    (tmp_path / "busy.csv").write_text(BUSY_PODS)  # 120 GPUs asked for within 3 minutes, 32 in the fleet
    out = tmp_path / "tenants"
    argv = ["simulate", "--trace", str(tmp_path / "busy.csv"), "--nodes", str(nodes), "--protocol", "replay"]
    argv += ["--tenants", "--seeds", "42,43", "--speedup", "1", "--out-dir", str(out), "-q"]

    assert main(argv) == 0

    metrics = json.loads((out / "metrics.json").read_text())
    assert [(t["name"], t["weight"]) for t in metrics["tenants"]] == [
        ("team-a", 1),
        ("team-b", 1),
        ("team-c", 2),
        ("team-d", 4),
    ]
    assert sum(t["nominal_gpus"] for t in metrics["tenants"]) == 32
    for figures in metrics["per_seed"].values():
        assert figures["saturated_s"] > 0
        assert 0.25 <= figures["jain_saturated"] <= 1.0
        assert figures["pods_never_placed"] == figures["pods_never_placed_without_tenants"] == 0
        assert figures["unallocated_gpus_saturated"] >= 0
        reclaim = figures["reclaim_s"]
        assert reclaim["p50"] is None or 0 <= reclaim["p50"] <= reclaim["p99"] <= reclaim["max"]
    shares = metrics["shares_over_time"]["shares"]
    assert set(shares) == {"team-a", "team-b", "team-c", "team-d"}
    assert max(max(values) for values in shares.values()) > 0
    assert all(0 <= sum(at) <= 1.0001 for at in zip(*shares.values(), strict=True))
    assert (out / "tenant_shares.png").read_bytes()[:4] == b"\x89PNG"
    assert "Jain" in capsys.readouterr().out

    again = tmp_path / "again"
    assert main([*argv[:-3], "--out-dir", str(again), "-q"]) == 0
    repeated = json.loads((again / "metrics.json").read_text())
    for seed, figures in metrics["per_seed"].items():
        assert {k: v for k, v in repeated["per_seed"][seed].items() if k != "seconds"} == {
            k: v for k, v in figures.items() if k != "seconds"
        }


def test_tenants_needs_a_timed_trace_replayed(tmp_path: Path, capsys):
    pods, nodes = files(tmp_path)
    argv = ["simulate", "--trace", str(pods), "--nodes", str(nodes), "--tenants", "--out-dir", str(tmp_path)]
    assert main(argv) == 2
    assert "--tenants replays a trace with creation and deletion times" in capsys.readouterr().err
