"""The JVM connector's planner: ``python -m logbroker.spark.bridge``.

Planning stays in Python (it owns the LMDB index, the checkpointed high
watermark and the option rules; docs/architecture.md decision 89): the
connector (spark/jvm, ``PlannerBridge.java``) starts this process once per
driver JVM and asks it, one JSON line per request on stdin, one JSON line
per answer on stdout:

    {"op": "hello"}                 -> {"version": VERSION}
    {"op": "plan", "options": {...}, "columns": [...], "filters": tree | null}
                                    -> {"splits": [split, ...]} | {"error": "..."}

``options`` are Spark's (any key case), ``columns`` the names the query
reads (pruning: which decides ``includeHeaders``), ``filters`` a
narrow.py tree. A split is ``Split``'s fields (options.py) plus ``bytes``,
its estimated share of the segment bytes, and ``locations``: the hosts of
its ``replicas`` (bootstrap with option ``paths``), deduplicated in order,
which Spark prefers for its task. A wrong option, path, topic or
lost range answers ``error`` with the message the Python source raises; the
process keeps serving. It ends at end of input (the JVM exited).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import sys

from ..errors import LogbrokerError
from .narrow import narrowing
from .options import Split, parse_options
from .planners import make_planner
from .scan import list_segments

VERSION = 2  # 2: splits carry replicas and locations (option paths)
log = logging.getLogger("logbroker.spark")


def plan(request: dict) -> dict:
    """One ``plan`` request's answer (never raises for a user's mistake)."""
    columns = tuple(request.get("columns") or ())
    o = parse_options(request.get("options") or {}, columns=columns)
    planner = make_planner(o, locality=True)  # with paths: splits name their replicas
    planner.narrow = narrowing(request.get("filters"))
    try:
        splits = planner.plan()
        tps = {(s.topic, s.partition) for s in splits}
        rates = {} if o.bootstrap else {tp: _per_record(o.data_dir, tp, planner.bounds(*tp))
                                        for tp in tps}
    finally:
        planner.close()
    return {"splits": [_split_json(s, rates.get((s.topic, s.partition), 0.0)) for s in splits]}


def _split_json(s: Split, per_record: float) -> dict:
    out = dataclasses.asdict(s)
    out["columns"] = list(s.columns)
    out["client"] = [list(kv) for kv in s.client]
    out["replicas"] = [list(r) for r in s.replicas]
    out["locations"] = list(dict.fromkeys(host for host, _ in s.replicas))
    out["bytes"] = int((s.end - s.start) * per_record)
    return out


def _per_record(data_dir: str, tp: tuple, bounds: tuple) -> float:
    """Segment bytes per offset of a partition: an estimate for Spark's
    planner statistics."""
    total = 0
    for _, path in list_segments(os.path.join(data_dir, f"{tp[0]}-{tp[1]}")):
        try:
            total += os.path.getsize(path)
        except FileNotFoundError:  # deleted by retention since listed
            pass
    return total / max(1, bounds[2] - bounds[1])


def answer(line: str) -> dict:
    """The answer to one request line."""
    try:
        request = json.loads(line)
        op = request.get("op")
        if op == "hello":
            return {"version": VERSION}
        if op == "plan":
            return plan(request)
        return {"error": f"unknown op {op!r}"}
    except LogbrokerError as exc:
        return {"error": exc.message}
    except (ValueError, TypeError, AttributeError) as exc:
        log.error("logbroker planner: bad request: %s", exc)
        return {"error": f"bad planner request: {exc}"}


def serve(inp=sys.stdin, out=sys.stdout) -> None:
    """Answer request lines until end of input."""
    for line in inp:
        if not line.strip():
            continue
        out.write(json.dumps(answer(line), separators=(",", ":")) + "\n")
        out.flush()


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    serve()
