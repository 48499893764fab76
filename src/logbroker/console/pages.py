"""Each API answer of the console for one user: the page's ACL check, then
its view of the state narrowed to what the user may see (docs/console.md,
"Security"; access.py, views.py).

Every function takes the console, the raw query and the request's
``Access``, checks the query at the edge (inputs.py: a bad name is 400
before any ACL is asked, so nothing is learnt from it), then the page's
ACL (403, no data), then answers; an unknown topic or group is 404 only
for a user allowed to describe it, so names of hidden resources are not
revealed.

| page | needs |
|---|---|
| overview (cluster and brokers) | describe on the cluster |
| topics | nothing: lists the topics the user may describe |
| a topic | describe on it |
| groups | nothing: lists the groups the user may describe |
| a group | describe on it (offsets of hidden topics left out) |
| throughput | nothing: the topics the user may describe |
| transactions | nothing: the transactional ids the user may describe (their |
|   | partitions of hidden topics left out), open transactions of visible topics |
| messages | read on the topic |
"""

from __future__ import annotations

from . import inputs, views
from . import txn_views
from .access import CLUSTER, CLUSTER_NAME, GROUP, TOPIC, TRANSACTIONAL_ID, Access


def overview(c, q, a: Access) -> dict:
    a.require("describe", CLUSTER, CLUSTER_NAME)
    return views.overview(a.narrow(c.state()))


def topics(c, q, a: Access) -> dict:
    return views.topics(a.narrow(c.state()))


def topic(c, q, a: Access) -> dict:
    name = inputs.check_topic(inputs.param(q, "name", ""))
    a.require("describe", TOPIC, name)
    return views.topic(a.narrow(c.state()), name)


def groups(c, q, a: Access) -> dict:
    return views.groups(a.narrow(c.state()))


def group(c, q, a: Access) -> dict:
    name = inputs.check_group(inputs.param(q, "name", ""))
    a.require("describe", GROUP, name)
    state = a.narrow(c.state())
    hidden = any(g.get("hidden") for g in state.groups if g["name"] == name)
    page = views.group(state, name, None if hidden else c.history)
    if not a.everything:
        for member in page["members"]:
            member["assignment"] = [tp for tp in member["assignment"]
                                    if a.may("describe", TOPIC, tp.rpartition("-")[0])]
    return page


def throughput(c, q, a: Access) -> dict:
    page = views.throughput(c.history.traffic)
    if not a.everything:
        shown = a.visible_topics(page["topics"])
        page = {"topics": shown, "series": {t: page["series"][t] for t in shown}}
    return {**page, "sample_s": c.sample_s}


def transactions(state, ids, counts: dict, a: Access) -> dict:
    """The transactions page (txn_views.py) of ``state`` (already narrowed)
    and ``ids`` (the coordinator's states) for ``a``; any thread (the ACL
    checks are, BrokerAuth.allows), run in the console's reader thread."""
    if a.everything:
        return txn_views.transactions(state, ids, counts)
    return txn_views.transactions(state, ids, counts,
                                  lambda tid: a.may("describe", TRANSACTIONAL_ID, tid),
                                  lambda t: a.may("describe", TOPIC, t))


def messages_query(q, a: Access) -> inputs.MessageQuery:
    """The message browser's checked query, once read on its topic is allowed."""
    mq = inputs.check_messages(q)
    a.require("read", TOPIC, mq.topic)
    return mq


def session(c, q, a: Access) -> dict:
    """Who is logged in: {"auth": login required, "acls": ACLs enforced,
    "principal": "User:NAME" or None}."""
    return {"auth": getattr(c, "gate", None) is not None, "acls": not a.everything,
            "principal": a.principal}
