"""Kafka's group membership APIs, answered through our group coordinator:
JoinGroup (v0-5), SyncGroup (v0-3), Heartbeat (v0-3), LeaveGroup (v0-3)
(docs/kafka.md §4, docs/groups.md "Kafka members").

Each function takes the ``KafkaSite``, the request header and body and
returns a ``Plan`` whose request is one of ours, so the coordinator's
states, timeouts, fencing and errors are those of our consumers (its
errors carry Kafka's numbers: UNKNOWN_MEMBER_ID 25, ILLEGAL_GENERATION 22,
REBALANCE_IN_PROGRESS 27, INCONSISTENT_GROUP_PROTOCOL 23,
FENCED_INSTANCE_ID 82, ...). Member bytes are translated at this edge
(member_bytes.py), so Kafka consumers and ours can share a group.

- Only the protocol type ``consumer`` (Kafka's ConsumerProtocol) is
  served: any other (Kafka Connect's ``connect``, ...) is answered
  INCONSISTENT_GROUP_PROTOCOL, as its bytes could not be translated.
- JoinGroup v0 has no rebalance timeout: the session timeout is used, as
  Kafka does. A new member (empty member id) gets its id in the answer of
  its first join, at every version: MEMBER_ID_REQUIRED (79, KIP-394) is
  never sent, which clients of v4+ accept (they take the id answered).
- ``group_instance_id`` (v5 JoinGroup, v3 SyncGroup/Heartbeat/LeaveGroup)
  is our static membership (KIP-345), served as for our consumers.
"""

from __future__ import annotations

from ..errors import InconsistentGroupProtocolError, LogbrokerError
from ..protocol import messages as m
from ..protocol.parts import LeavingMember, MemberAssignment, Protocol
from .member_bytes import (assignment_to_kafka, assignment_to_ours, checked,
                           subscription_to_kafka, subscription_to_ours)
from .plan import KafkaSite, Plan
from .wire_errors import kafka_code

CONSUMER = "consumer"


def _refused(exc: LogbrokerError, body: dict) -> Plan:
    """A plan answering ``exc`` without asking the broker."""
    return Plan(None, lambda _r: {**body, "error_code": kafka_code(exc.code)})


def join_group(site: KafkaSite, header, body) -> Plan:
    failed = {"generation_id": -1, "protocol_name": "", "leader": "",
              "member_id": body.member_id, "members": []}
    if body.protocol_type != CONSUMER:
        return _refused(InconsistentGroupProtocolError(
            f"protocol type {body.protocol_type!r}: the Kafka listener serves 'consumer' "
            "groups only"), failed)
    try:
        protocols = tuple(Protocol(p.name, checked(subscription_to_ours, p.metadata))
                          for p in body.protocols)
    except LogbrokerError as exc:
        return _refused(exc, failed)
    rebalance = body.rebalance_timeout_ms if header.api_version >= 1 else body.session_timeout_ms
    req = m.JoinGroup(group=body.group_id, session_timeout_ms=body.session_timeout_ms,
                      rebalance_timeout_ms=rebalance, member_id=body.member_id,
                      group_instance_id=body.group_instance_id, protocol_type=CONSUMER,
                      protocols=protocols, client_id=header.client_id or "")

    def answer(resp: m.JoinGroupResponse) -> dict:
        if resp.error:
            return {**failed, "error_code": kafka_code(resp.error)}
        return {"error_code": 0, "generation_id": resp.generation,
                "protocol_name": resp.protocol, "leader": resp.leader,
                "member_id": resp.member_id, "members": [
                    {"member_id": mid, "group_instance_id": iid,
                     "metadata": subscription_to_kafka(meta)}
                    for mid, iid, meta in resp.members]}
    return Plan(req, answer)


def sync_group(site: KafkaSite, header, body) -> Plan:
    try:
        assignments = tuple(MemberAssignment(a.member_id,
                                             checked(assignment_to_ours, a.assignment))
                            for a in body.assignments)
    except LogbrokerError as exc:
        return _refused(exc, {"assignment": b""})
    req = m.SyncGroup(group=body.group_id, generation=body.generation_id,
                      member_id=body.member_id, group_instance_id=body.group_instance_id,
                      assignments=assignments)

    def answer(resp: m.SyncGroupResponse) -> dict:
        if resp.error:
            return {"error_code": kafka_code(resp.error), "assignment": b""}
        return {"error_code": 0, "assignment": assignment_to_kafka(resp.assignment)}
    return Plan(req, answer)


def heartbeat(site: KafkaSite, header, body) -> Plan:
    req = m.Heartbeat(group=body.group_id, generation=body.generation_id,
                      member_id=body.member_id, group_instance_id=body.group_instance_id)
    return Plan(req, lambda resp: {"error_code": kafka_code(resp.error)})


def leave_group(site: KafkaSite, header, body) -> Plan:
    """v0-2: one member id, its error at the top; v3: a batch of members
    (by id or instance id), an error each."""
    if header.api_version < 3:
        members = ((body.member_id, None),)
    else:
        members = tuple(LeavingMember(mb.member_id, mb.group_instance_id) for mb in body.members)
    req = m.LeaveGroup(group=body.group_id, members=members)

    def answer(resp: m.LeaveGroupResponse) -> dict:
        errors = [kafka_code(error) for _mid, error, _msg in resp.members]
        if header.api_version < 3:
            return {"error_code": kafka_code(resp.error) or next(iter(errors), 0)}
        if resp.error:
            errors = [kafka_code(resp.error)] * len(members)
        return {"error_code": kafka_code(resp.error), "members": [
            {"member_id": mid, "group_instance_id": iid, "error_code": error}
            for (mid, iid), error in zip(members, errors)]}
    return Plan(req, answer)
