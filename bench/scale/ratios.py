"""The scale bench's figures against one partition's (issue 32's targets
are such ratios), and what bounds each ratio.

Per round (the machine's speed moves between rounds, so a ratio is only
taken within one), for each partition count P of a flush that also ran
at one partition: ``x one`` = the rate at P over the rate at one
partition; ``ceiling`` = one partition's wall time per record over the
larger of the client's and the broker's CPU time per record at P, and
which side that is. Each side's CPU is a floor under its wall time (the
client's threads share one GIL; the broker's Python runs on its loop, its
``syncfs`` worker and the kernel's copies aside), so the ratio cannot pass
the ceiling however well the other side and the overlap do: a target
above it needs that side cheaper per record. Pure: it reads the bench's
results.
"""

from __future__ import annotations

import statistics

PHASES = ("produce", "consume")


def ratios(rounds: list) -> list:
    """Rows ``{partitions, flush, <phase>: {x_one: [per round], ceiling:
    [per round], bound: [side per round]}}`` for each broker case beside a
    one-partition case of its flush in the same round; ``rounds`` is the
    bench's ``results["rounds"]`` (a list of rounds, each a list of cases)."""
    rows: dict = {}
    for cases in rounds:
        ones = {c["flush"]: c for c in cases
                if c.get("case", "broker") == "broker" and c["partitions"] == 1}
        for c in cases:
            one = ones.get(c.get("flush"))
            if c.get("case", "broker") != "broker" or c["partitions"] == 1 or one is None:
                continue
            row = rows.setdefault((c["partitions"], c["flush"]), {
                "partitions": c["partitions"], "flush": c["flush"],
                **{ph: {"x_one": [], "ceiling": [], "bound": []} for ph in PHASES}})
            for ph in PHASES:
                wall_one = 1e6 / one[f"{ph}_rec_s"]  # us a record at one partition
                client, broker = c[f"{ph}_client_us"], c[f"{ph}_broker_us"]
                worst = max(client, broker)
                row[ph]["x_one"].append(c[f"{ph}_rec_s"] / one[f"{ph}_rec_s"])
                row[ph]["ceiling"].append(wall_one / worst if worst > 0 else float("inf"))
                row[ph]["bound"].append("client" if client >= broker else "broker")
    return sorted(rows.values(), key=lambda r: (r["flush"], r["partitions"]))


def _cell(values: list) -> str:
    return f"{statistics.median(values):.2f} ({', '.join(f'{v:.2f}' for v in values)})"


def _bound(sides: list) -> str:
    return max(set(sides), key=sides.count)


def ratio_table(results: dict):
    """The rich table of ``ratios`` (None when no count beside one partition ran)."""
    from bench.common import harness

    rows = ratios(results.get("rounds", []))
    if not rows:
        return None
    return harness.table(
        "Against one partition, per round (median (rounds)): x one = the rate over one "
        "partition's; ceiling = one partition's wall time per record over the larger CPU time "
        "per record at P, and whose (bench/scale/ratios.py)",
        ("partitions", "flush", "produce x one", "produce ceiling", "consume x one",
         "consume ceiling"),
        [(f"{r['partitions']:,}", r["flush"],
          *(cell for ph in PHASES for cell in (
              _cell(r[ph]["x_one"]), f"{_cell(r[ph]['ceiling'])} {_bound(r[ph]['bound'])}")))
         for r in rows])
