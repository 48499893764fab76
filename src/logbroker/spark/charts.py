"""The charts of the tools/ jobs, as matplotlib Figures built from plain rows.

Pure: no Spark. Every function returns a ``matplotlib.figure.Figure`` made
without pyplot (no global state, nothing to close; ``fig.savefig(path)``
writes it), so a test can read its axes: one panel (``fig.axes``) per topic,
titled with the topic; bars, never lone dots; y axes from 0; x limits shared
by every panel.

- ``timeline_figure``: records or bytes per time bucket (buckets.py), one
  panel per topic. Up to ``MAX_PANELS`` topics get a panel each; beyond that,
  the ``MAX_PANELS - 1`` largest by records and one "other" panel summing the
  rest. The x axis runs from the start of the data's first bucket to the end
  of its last, in UTC; the y label names the unit ("records per second").
- ``top_keys_figure``: horizontal bars of each topic's top keys, labelled
  with their records and share of the topic.
"""

from __future__ import annotations

import math
import os
from collections import defaultdict
from datetime import UTC, datetime

from .buckets import Bucket, format_span

MAX_PANELS = 12
MAX_KEYS = 20          # keys drawn per panel of the top keys chart
LABELLED_BARS = 12     # at most this many bars in a panel get their value written on them
BYTE_UNITS = (("bytes", 1), ("kB", 10**3), ("MB", 10**6), ("GB", 10**9), ("TB", 10**12))
DAY = 86400.0


def to_num(seconds: float) -> float:
    """Epoch seconds as a matplotlib date number (days since 1970, UTC)."""
    from matplotlib import dates

    return float(dates.date2num(datetime.fromtimestamp(seconds, UTC)))


def panel_groups(totals: dict[str, int], max_panels: int = MAX_PANELS) -> list[tuple[str, list[str]]]:
    """``(panel title, topics)`` per panel: every topic alone, in name order,
    when there are at most ``max_panels``; otherwise the ``max_panels - 1``
    largest by ``totals`` (ties by name) and ``("other (N topics)", rest)``."""
    if len(totals) <= max_panels:
        return [(t, [t]) for t in sorted(totals)]
    ranked = sorted(totals, key=lambda t: (-totals[t], t))
    top, rest = ranked[:max_panels - 1], sorted(ranked[max_panels - 1:])
    return [(t, [t]) for t in top] + [(f"other ({len(rest)} topics)", rest)]


def timeline_figure(rows, bucket: Bucket, first: float, last: float, value: str = "records",
                    max_panels: int = MAX_PANELS):
    """``value`` ("records" or "bytes") per ``bucket``, one panel per topic.

    ``rows``: mappings with "topic", "start" (epoch seconds of a bucket's
    start, a multiple of ``bucket.seconds``), "records" and "bytes"; one row
    per topic and bucket that has records (a bucket without a row is 0).
    ``first``/``last``: the data's first and last timestamp (epoch seconds).
    Bars are ``bucket.seconds`` wide, starting at their bucket's start.
    """
    series: dict[str, dict[int, float]] = defaultdict(lambda: defaultdict(float))
    totals: dict[str, int] = defaultdict(int)
    for r in rows:
        series[r["topic"]][int(r["start"])] += r[value]
        totals[r["topic"]] += r["records"]
    panels = []
    for title, topics in panel_groups(totals, max_panels):
        summed: dict[int, float] = defaultdict(float)
        for t in topics:
            for start, v in series[t].items():
                summed[start] += v
        panels.append((title, sorted(summed.items())))
    peak = max((v for _, points in panels for _, v in points), default=0)
    unit, scale = ("records", 1) if value == "records" else _byte_unit(peak)
    lo, hi = bucket.bounds(first, last)
    fig, axes = _grid(len(panels), panel_height=2.1, width=11)
    for ax, (title, points) in zip(axes, panels):
        _timeline_panel(ax, points, bucket, scale, unit)
        _time_axis(ax, lo, hi, bucket.seconds)
        total = sum(v for _, v in points) / scale
        ax.set_title(f"{title}: {_fmt(total, scale)} {unit}", fontsize=10, loc="left")
    n = bucket.count(first, last)
    fig.suptitle(f"logbroker: {unit} per {bucket.name} — {_when(first, last - first)} to "
                 f"{_when(last, last - first)} UTC (span {format_span(last - first)}, "
                 f"{n} bucket{'s' if n > 1 else ''})", fontsize=11)
    return fig


def _timeline_panel(ax, points, bucket: Bucket, scale: float, unit: str) -> None:
    from matplotlib import ticker

    xs = [to_num(start) for start, _ in points]
    ys = [v / scale for _, v in points]
    few = len(points) <= LABELLED_BARS  # few: white edges part them; many: edges fill pixel gaps
    bars = ax.bar(xs, ys, width=bucket.seconds / DAY, align="edge", color="C0",
                  edgecolor="white" if few else "C0", linewidth=1 if few else 0.5)
    if few:
        ax.bar_label(bars, labels=[_fmt(y, scale) for y in ys], fontsize=8, padding=2)
    top = max(ys, default=0)
    ax.set_ylim(0, top * 1.15 if top > 0 else 1)
    ax.set_ylabel(f"{unit} per {bucket.name}", fontsize=8)
    if scale == 1:
        ax.yaxis.set_major_formatter(ticker.StrMethodFormatter("{x:,.0f}"))
    ax.tick_params(labelsize=8)
    ax.grid(axis="y", alpha=0.3)


def _time_axis(ax, lo: int, hi: int, step: int) -> None:
    """x from ``lo`` to ``hi`` (epoch seconds), UTC dates; a tick per bucket
    edge when there are few buckets."""
    from matplotlib import dates, ticker

    columns = ax.get_subplotspec().get_gridspec().ncols
    locator = dates.AutoDateLocator(minticks=3, maxticks={1: 12, 2: 8}.get(columns, 7))
    formatter = dates.ConciseDateFormatter(locator)
    if (hi - lo) // step <= LABELLED_BARS:
        locator = ticker.FixedLocator([to_num(t) for t in range(lo, hi + 1, step)])
        formatter = dates.DateFormatter("%H:%M:%S" if step < 60 else
                                        "%b %d %H:%M" if step < DAY else "%Y-%m-%d")
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(formatter)
    ax.set_xlim(to_num(lo), to_num(hi))


def top_keys_figure(rows, max_panels: int = MAX_PANELS, max_keys: int = MAX_KEYS):
    """Each topic's top keys as horizontal bars, the most frequent on top,
    labelled "records (share)".

    ``rows``: mappings with "topic", "key" (bytes, str or None), "records",
    "share" (of the topic's records, 0..1), "rank" (1 = most records) and
    "topic_records". One panel per topic, the ``max_panels`` largest by
    ``topic_records`` (the rest are named as left out in the title), each
    with its ``max_keys`` first ranks.
    """
    by_topic: dict[str, list] = defaultdict(list)
    for r in rows:
        by_topic[r["topic"]].append(r)
    ranked = sorted(by_topic, key=lambda t: (-by_topic[t][0]["topic_records"], t))
    shown = sorted(ranked[:max_panels])
    keys = min(max_keys, max(len(by_topic[t]) for t in shown)) if shown else 1
    fig, axes = _grid(len(shown), panel_height=0.6 + 0.24 * keys, width=11)
    for ax, topic in zip(axes, shown):
        mine = sorted(by_topic[topic], key=lambda r: r["rank"])[:max_keys]
        _keys_panel(ax, topic, mine)
    left_out = len(ranked) - len(shown)
    fig.suptitle("logbroker: top keys per topic (records, share of the topic)"
                 + (f" — {left_out} smaller topics not shown" if left_out else ""), fontsize=11)
    return fig


def _keys_panel(ax, topic: str, mine: list) -> None:
    from matplotlib import ticker

    counts = [r["records"] for r in mine]
    bars = ax.barh(range(len(mine)), counts, color="C0", linewidth=0)
    ax.bar_label(bars, labels=[f"{r['records']:,} ({r['share']:.1%})" for r in mine],
                 fontsize=8, padding=2)
    ax.set_yticks(range(len(mine)), [key_label(r["key"]) for r in mine], fontsize=8)
    ax.set_ylim(len(mine) - 0.5, -0.5)  # rank 1 on top
    ax.set_xlim(0, max(counts, default=0) * 1.45 or 1)
    ax.set_xlabel("records", fontsize=8)
    ax.xaxis.set_major_formatter(ticker.StrMethodFormatter("{x:,.0f}"))
    ax.tick_params(axis="x", labelsize=8)
    total = mine[0]["topic_records"] if mine else 0
    covered = sum(r["share"] for r in mine)
    ax.set_title(f"{topic}: {total:,} records, top {len(mine)} keys {covered:.1%}",
                 fontsize=10, loc="left")


def save(figures: dict, out: str, dpi: int = 100) -> None:
    """Write each of ``figures`` (file name -> Figure) as ``out/<name>``."""
    for name, fig in figures.items():
        fig.savefig(os.path.join(out, name), dpi=dpi)


def key_label(key, width: int = 24) -> str:
    """A key for an axis: text as is, bytes decoded (undecodable bytes
    escaped), ``(no key)`` for None, ``""`` for empty; cut at ``width``."""
    if key is None:
        return "(no key)"
    text = bytes(key).decode("utf-8", "backslashreplace") if not isinstance(key, str) else key
    if not text:
        return '""'
    return text if len(text) <= width else text[:width - 1] + "…"


def _grid(n: int, panel_height: float, width: float):
    """A Figure with ``n`` panels (at least one) in 1-3 columns; unused cells removed."""
    from matplotlib.figure import Figure

    n = max(n, 1)
    cols = 1 if n <= 3 else 2 if n <= 8 else 3
    rows = math.ceil(n / cols)
    fig = Figure(figsize=(width, 0.7 + panel_height * rows), layout="constrained")
    axes = list(fig.subplots(rows, cols, squeeze=False).flat)
    for ax in axes[n:]:
        ax.remove()
    return fig, axes[:n]


def _byte_unit(peak: float) -> tuple[str, int]:
    unit = BYTE_UNITS[0]
    for name, size in BYTE_UNITS:
        if peak >= size:
            unit = (name, size)
    return unit


def _fmt(v: float, scale: float) -> str:
    """A count as is; a scaled amount to 3 significant digits (2.04, 20.4, 204)."""
    digits = 0 if scale == 1 or v >= 100 else 1 if v >= 10 else 2
    return f"{v:,.{digits}f}"


def _when(t: float, span: float) -> str:
    text = datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    return text[:-3] if span < 60 else text[:-7]
