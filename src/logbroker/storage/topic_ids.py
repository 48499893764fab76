"""Topic ids (Kafka's KIP-516): 16 bytes naming one incarnation of a topic.

A topic gets a random id when it is created (``new_topic_id``), stored with
its config (LMDB's ``topics`` table on a single node, the topic's value in
etcd in a cluster), so a topic deleted and created again under the same name
has a new id and a client holding the old one learns it is gone. A topic
stored before ids existed has none; it is named by ``derived_topic_id``, a
name-based UUID every broker computes alike, so nothing needs rewriting
(such a topic's id does not change when it is re-created without one, which
only topics of older brokers can be). Kafka reserves the all-zero id (and
the id whose halves are 0 and 1) for "no topic": neither is ever produced.
"""

from __future__ import annotations

import uuid

TOPIC_ID_BYTES = 16
ZERO_ID = bytes(TOPIC_ID_BYTES)
_NAMESPACE = uuid.UUID("5f0c7a52-9d3b-4c1e-8a8e-6b2f3d1c0a47")  # ours, fixed forever


def new_topic_id() -> bytes:
    """A fresh random id (a version-4 UUID: never Kafka's reserved ones)."""
    return uuid.uuid4().bytes


def derived_topic_id(name: str) -> bytes:
    """The id of a topic stored without one: a version-5 UUID of its name."""
    return uuid.uuid5(_NAMESPACE, name).bytes


def topic_id_or_derived(stored: "bytes | None", name: str) -> bytes:
    """``stored`` when it is a valid id, else the name's derived id."""
    if isinstance(stored, (bytes, bytearray)) and len(stored) == TOPIC_ID_BYTES \
            and bytes(stored) != ZERO_ID:
        return bytes(stored)
    return derived_topic_id(name)


def topic_id_text(topic_id: bytes) -> str:
    """The id as Kafka prints it: URL-safe base64 without padding."""
    import base64

    return base64.urlsafe_b64encode(topic_id).rstrip(b"=").decode()
