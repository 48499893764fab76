"""How the Kafka listener answers one request: a ``Plan`` (pure values).

A handler of ``serve_meta`` / ``serve_data`` turns a decoded Kafka request
into a ``Plan``: the logbroker request to run through the broker's
pipeline (api/pipeline.py) (``request``; None when there is nothing to run) and the
function that turns that request's response (None without a request) into
the Kafka response body, ``answer``. ``answer`` may instead return
``NO_ANSWER`` (an acks=0 Produce: nothing is written) or ``CLOSE`` (close
the connection without answering, as Kafka does for an acks=0 Produce to a
partition this broker does not lead). ``answer`` runs on the broker's loop
when the response is ready and must not raise for any response the
handlers give; it may read segment files (a Fetch's conversion).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

NO_ANSWER = object()  # write nothing for this request
CLOSE = object()  # write nothing and close the connection


@dataclass(frozen=True, slots=True)
class Plan:
    request: object  # a protocol.messages request, or None
    answer: Callable  # response (or None) -> Kafka body dict | NO_ANSWER | CLOSE


@dataclass(frozen=True, slots=True)
class KafkaSite:
    """What the Kafka translators know of the broker: its id, the address
    Kafka clients of this listener are told (Metadata, FindCoordinator: the
    addresses of the listener named ``listener``), its settings and
    its metadata (``meta.directory()``: the brokers' Kafka addresses and
    the controller, read at answer time; metadata/interface.py)."""

    broker_id: int
    host: str
    port: int
    config: object  # the BrokerConfig
    served: frozenset = frozenset()  # the API keys answered (ApiVersions lists only these)
    meta: object = None  # the broker's metadata interface (cluster_meta.py reads its directory)
    listener: str = ""  # the listener's name ("": the single-listener form): whose addresses
    tls: bool = False  # the listener speaks TLS (PLAIN is offered there)


def by_topic(rows, key=lambda row: row[0]) -> list:
    """``[(topic, [rows...]), ...]`` in first-seen order (Kafka answers
    group partitions under their topic, in the request's order)."""
    grouped: dict = {}
    for row in rows:
        grouped.setdefault(key(row), []).append(row)
    return list(grouped.items())
