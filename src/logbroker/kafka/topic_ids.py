"""Kafka's topic ids as the Kafka listener's translators see them.

Every topic has one (storage/topic_ids.py: random at creation, stored with
the topic; derived from the name for a topic stored before ids). Metadata
v10+ answers them and v12 looks topics up by them; the consumer group
protocol (KIP-848) names assigned partitions by them. The maps are read from
the broker's metadata at the moment of asking (``meta.topic_ids()``), so a
topic created or deleted since is seen at once.
"""

from __future__ import annotations

from ..storage.topic_ids import ZERO_ID

NO_TOPIC_ID = ZERO_ID  # Kafka's "no id" (a topic named by name in a request)


def ids_by_name(site, names=None) -> dict:
    """{topic name: id} of every topic, or of ``names`` (empty without
    metadata: unit tests). Naming the topics reads only theirs."""
    meta = getattr(site, "meta", None)
    return {} if meta is None else meta.topic_ids(names)


def names_by_id(site) -> dict:
    """{id: topic name} of every topic."""
    return {tid: name for name, tid in ids_by_name(site).items()}
