"""Which planner a query uses: over its data dir (plan.Planner) or, with
``bootstrap``, over running brokers (remote.RemotePlanner)."""

from __future__ import annotations

from .options import Options
from .plan import Planner, PlannerBase


def make_planner(o: Options, locality: bool = False) -> PlannerBase:
    """The planner of ``o``: over its data dir, or (``bootstrap``) over running
    brokers. ``locality`` (the JVM engine's bridge, with option ``paths``):
    bootstrap splits carry the replicas whose files a task may read; the
    Python engine fetches from the leader and leaves it off (paths ignored)."""
    if not o.bootstrap:
        return Planner(o)
    from .remote import RemotePlanner  # only then is the client imported (spark.md)

    return RemotePlanner(o, locality=locality and bool(o.paths))
