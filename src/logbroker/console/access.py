"""What one console user may see: the broker's ACLs applied per page
(docs/console.md, "Security").

``Access(auth, principal)`` wraps the broker's ``BrokerAuth`` (auth.py):
when ACLs are enforced (``auth.enforcing``) and a principal is logged in,
``may(operation, resource_type, name)`` is the broker's own check
(``BrokerAuth.allows``: the Authorizer's rules, super users always
allowed); otherwise (no auth, or authentication without ACLs) everything
is allowed. ``require`` raises the broker's authorization error of the
resource (TOPIC/GROUP/CLUSTER_AUTHORIZATION_FAILED, acl_rules.ERRORS),
naming the principal, the operation and the resource; app.py answers it
as HTTP 403 with no data.

``narrow(state)`` is the console's ``State`` with only what the principal
may describe: topics (and their logs, traffic, transactions, partitions in
the cluster view), groups, and in each group the committed offsets of visible topics
(a group with some hidden is marked ``hidden``, so its page leaves out
the lag history, a total over every topic). The views (views.py) then
run unchanged on it, so no page can show a topic the list would not.
"""

from __future__ import annotations

import dataclasses
import logging

from ..security.acl import CLUSTER, CLUSTER_NAME, GROUP, TOPIC, TRANSACTIONAL_ID
from ..security.acl_rules import ERRORS

log = logging.getLogger("logbroker.console")
__all__ = ["Access", "CLUSTER", "CLUSTER_NAME", "GROUP", "TOPIC", "TRANSACTIONAL_ID"]


class Access:
    def __init__(self, auth, principal: "str | None") -> None:
        """``principal``: "User:NAME" of the session, None when the console
        has no login (auth_required off)."""
        self.auth, self.principal = auth, principal
        self.everything = principal is None or auth is None or not auth.enforcing

    def may(self, operation: str, resource_type: str, name: str) -> bool:
        return self.everything or self.auth.allows(self.principal, operation, resource_type,
                                                   name)

    def require(self, operation: str, resource_type: str, name: str) -> None:
        """The resource's AUTHORIZATION_FAILED error unless ``may``."""
        if not self.may(operation, resource_type, name):
            log.info("console: %s denied %s on %s %r", self.principal, operation,
                     resource_type, name[:100])
            raise ERRORS[resource_type](f"{self.principal} may not {operation} {resource_type} "
                                        f"{name!r} (no ACL allows it)")

    def narrow(self, state):
        """``state`` with only what the principal may describe (module docstring)."""
        if self.everything:
            return state
        seen: dict[str, bool] = {}

        def topic(name: str) -> bool:
            ok = seen.get(name)
            if ok is None:
                ok = seen[name] = self.may("describe", TOPIC, name)
            return ok

        groups = []
        for g in state.groups:
            if self.may("describe", GROUP, g["name"]):
                offsets = {tp: o for tp, o in g["offsets"].items() if topic(tp[0])}
                groups.append({**g, "offsets": offsets,
                               "hidden": len(offsets) < len(g["offsets"])})
        cluster = state.cluster
        if cluster is not None:
            cluster = {**cluster,
                       "partitions": {k: v for k, v in cluster["partitions"].items()
                                      if topic(k[0])},
                       "replication": {k: v for k, v in cluster["replication"].items()
                                       if topic(k)}}
        return dataclasses.replace(
            state, topics={t: n for t, n in state.topics.items() if topic(t)},
            logs={k: v for k, v in state.logs.items() if topic(k[0])},
            traffic={k: v for k, v in state.traffic.items() if topic(k[0])},
            txns={k: v for k, v in state.txns.items() if topic(k[0])},
            groups=groups, cluster=cluster)

    def visible_topics(self, names) -> list:
        """Those of ``names`` the principal may describe, in order."""
        return [n for n in names if self.may("describe", TOPIC, n)]
