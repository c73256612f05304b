"""PNG plots of a simulation's metrics (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_allocation(metrics: dict[str, Any], path: Path, *, dpi: int = 80) -> Path:
    """GPU allocation (% of the fleet's milli-GPUs) against the GPU request arrived (% of capacity), one line
    per policy, like the paper's figure."""
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(6.0, 3.6))
    for name, figures in metrics["policies"].items():
        curve = figures["curve"]
        axes.plot(curve["arrived_pct"], curve["gpu_alloc_pct"], label=name, linewidth=1.4)
    top = max(max(figures["curve"]["arrived_pct"]) for figures in metrics["policies"].values())
    axes.plot([0, 100], [0, 100], color="grey", linewidth=0.6, linestyle=":")
    axes.set_xlim(60, top)
    axes.set_ylim(60, 100)
    axes.set_xlabel("GPU request arrived (% of cluster GPUs)")
    axes.set_ylabel("GPUs allocated (%)")
    seeds = metrics["seeds"]
    axes.set_title(f"{metrics['trace']}: mean of {len(seeds)} seed(s)", fontsize=10)
    axes.grid(alpha=0.3)
    axes.legend(loc="lower right", fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=dpi)
    plt.close(figure)
    return path


def plot_delay_cdf(metrics: dict[str, Any], path: Path, *, dpi: int = 80) -> Path:
    """Queueing-delay CDF (virtual seconds from arrival to bind) per policy."""
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(6.0, 3.6))
    for name, figures in metrics["policies"].items():
        cdf = figures["delay_cdf"]
        axes.step(cdf["delay_s"], cdf["fraction"], where="post", label=name, linewidth=1.4)
    axes.set_xscale("symlog", linthresh=1.0)
    axes.set_xlabel("queueing delay (virtual s, arrival to bind)")
    axes.set_ylabel("fraction of placed pods")
    axes.set_ylim(0, 1.01)
    axes.set_title(f"{metrics['trace']}: replay", fontsize=10)
    axes.grid(alpha=0.3)
    axes.legend(loc="lower right", fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=dpi)
    plt.close(figure)
    return path


def plot_tenant_shares(metrics: dict[str, Any], path: Path, *, dpi: int = 80) -> Path:
    """Each team's dominant resource share of the fleet over virtual time (the first seed), with the share
    its weight entitles it to when every team asks for more than the fleet."""
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(6.4, 3.6))
    over_time = metrics["shares_over_time"]
    weights = over_time["weights"]
    total = sum(weights.values())
    for name, shares in over_time["shares"].items():
        line = axes.plot(over_time["time_s"], shares, label=f"{name} (weight {weights[name]})", linewidth=1.2)
        axes.axhline(weights[name] / total, color=line[0].get_color(), linewidth=0.6, linestyle=":")
    axes.set_xlabel("virtual time (s)")
    axes.set_ylabel("dominant resource share")
    axes.set_ylim(0, 1)
    seed = metrics["seeds"][0] if metrics["seeds"] else "-"
    axes.set_title(f"{metrics['trace']}: teams by quota, fair sharing (seed {seed})", fontsize=10)
    axes.grid(alpha=0.3)
    axes.legend(loc="upper left", fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=dpi)
    plt.close(figure)
    return path
