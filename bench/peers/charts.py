"""PNG charts of a peers run (matplotlib, Agg): throughput per workload and
round-trip latency, medians with min–max whiskers, one bar per system.

``draw(figs, systems, out_dir, prefix)`` writes the files and returns their
names (relative to ``out_dir``)."""

from __future__ import annotations

import os

from bench.peers.report import TPUT
from bench.peers.run import SYSTEMS

COLORS = {"logbroker": "#1f6feb", "logbroker-lazy": "#79b8ff", "redis-always": "#d73a49",
          "redis-everysec": "#f9a3ab", "nats": "#2da44e", "rabbitmq": "#fb8f44"}


def _bars(ax, figs: dict, systems: list[str], key: str, title: str, unit: str) -> None:
    xs, meds, lo, hi, colors = [], [], [], [], []
    for i, s in enumerate(systems):
        f = figs.get(s, {}).get(key)
        if not f:
            continue
        xs.append(i)
        meds.append(f["median"])
        lo.append(f["median"] - f["min"])
        hi.append(f["max"] - f["median"])
        colors.append(COLORS.get(s, "#888888"))
    ax.bar(xs, meds, yerr=[lo, hi], color=colors, capsize=3)
    ax.set_xticks(range(len(systems)))
    ax.set_xticklabels(systems, rotation=30, ha="right", fontsize=8)
    ax.set_title(title, fontsize=10)
    ax.set_ylabel(unit, fontsize=8)
    ax.tick_params(axis="y", labelsize=8)
    ax.yaxis.set_major_formatter(lambda v, _: f"{v:,.0f}" if max(meds, default=0) >= 100 else f"{v:.2f}")
    for x, m in zip(xs, meds):
        ax.annotate(f"{m:,.0f}" if m >= 100 else f"{m:.3f}", (x, m), ha="center", va="bottom", fontsize=7)


def draw(figs: dict, systems: list[str], out_dir: str, prefix: str = "peers") -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    systems = [s for s in systems if s in SYSTEMS]
    os.makedirs(out_dir, exist_ok=True)
    names = []
    fig, axes = plt.subplots(2, 3, figsize=(15, 8.5))
    for ax, (wl, mode) in zip(axes.T.flat, TPUT):
        _bars(ax, figs, systems, f"{wl} {mode} rec/s", f"{wl} {mode}", "records/s")
    fig.suptitle("Throughput, records/s (median, whiskers min–max; fsync rows: logbroker, redis-always)")
    fig.tight_layout()
    names.append(f"{prefix}-throughput.png")
    fig.savefig(os.path.join(out_dir, names[-1]), dpi=90)
    plt.close(fig)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5))
    for ax, q in zip(axes, ("p50", "p99")):
        _bars(ax, figs, systems, f"RT {q} ms", f"single-record ack latency {q}", "ms")
    fig.tight_layout()
    names.append(f"{prefix}-latency.png")
    fig.savefig(os.path.join(out_dir, names[-1]), dpi=90)
    plt.close(fig)
    return names
