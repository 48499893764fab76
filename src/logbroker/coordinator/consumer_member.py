"""A member of a consumer-protocol group (KIP-848) and what one heartbeat
carries in and out, sans-I/O (consumer_group.py runs the group).

Assignments are ``{topic: frozenset(partitions)}``; the helpers combine them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..protocol.consumer_protocol import Assignment
from .subscriptions import Subscription


@dataclass(frozen=True)
class Beat:
    """One ConsumerGroupHeartbeat, as the coordinator reads it: None for a
    field the member left unchanged; ``owned`` {topic: frozenset}."""

    member_id: str
    member_epoch: int
    instance_id: "str | None" = None
    rack_id: "str | None" = None
    rebalance_timeout_ms: int = -1
    names: "tuple | None" = None
    regex: "str | None" = None
    assignor: "str | None" = None
    owned: "dict | None" = None
    client_id: str = ""
    host: str = ""


@dataclass(frozen=True)
class BeatAnswer:
    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: "dict | None"  # {topic: frozenset}; None: unchanged since the last answer


@dataclass
class ConsumerMember:
    member_id: str
    instance_id: "str | None" = None
    rack_id: "str | None" = None
    client_id: str = ""
    host: str = ""
    member_epoch: int = 0
    previous_epoch: int = -1
    rebalance_timeout_ms: int = 300_000
    subscription: Subscription = field(default_factory=Subscription)
    assignor: "str | None" = None
    assigned: dict = field(default_factory=dict)  # {topic: frozenset}: the member may use
    revoking: dict = field(default_factory=dict)  # {topic: frozenset}: it must release
    deadline: float = 0.0  # session expiry
    revoke_deadline: float = 0.0  # 0: nothing to revoke
    left: bool = False  # a static member left with epoch -2: held for its instance id
    sent: "dict | None" = None  # the assignment last answered

    # what our DescribeGroups shows (coordinator/group.Member's names)
    @property
    def assignment(self) -> bytes:
        """The partitions the member may use, encoded as our assignments are."""
        return Assignment(tuple((t, p) for t, ps in sorted(self.assigned.items())
                                for p in sorted(ps))).encode()

    kafka = False  # its assignment bytes (``assignment``) are ours, not Kafka's ConsumerProtocol

    def metadata(self, _protocol: str) -> bytes:
        return b""

    def owns(self) -> dict:
        return union(self.assigned, self.revoking)


def union(a: dict, b: dict) -> dict:
    out = dict(a)
    for t, ps in b.items():
        out[t] = out.get(t, frozenset()) | ps
    return out


def within(a: dict, b: dict) -> bool:
    return all(ps <= b.get(t, frozenset()) for t, ps in a.items())


def plain(d: dict) -> dict:
    return {t: sorted(ps) for t, ps in d.items()}


def frozen(d: dict) -> dict:
    return {t: frozenset(ps) for t, ps in d.items()}
