"""Kafka's group membership APIs, answered through our group coordinator:
JoinGroup (v0-5), SyncGroup (v0-3), Heartbeat (v0-3), LeaveGroup (v0-3)
(docs/kafka.md §4, docs/groups.md "Kafka members").

Each function takes the ``KafkaSite``, the request header and body and
returns a ``Plan`` whose request is one of ours, so the coordinator's
states, timeouts, fencing and errors are those of our consumers (its
errors carry Kafka's numbers: UNKNOWN_MEMBER_ID 25, ILLEGAL_GENERATION 22,
REBALANCE_IN_PROGRESS 27, INCONSISTENT_GROUP_PROTOCOL 23,
FENCED_INSTANCE_ID 82, ...).

- Member bytes are opaque, as to Kafka's classic coordinator: the
  protocol type (``consumer``, Kafka Connect's ``connect``, ...), each
  protocol's metadata and the leader's assignments go to the coordinator
  as sent, marked as Kafka's (``kafka_bytes``), and come back byte for
  byte: a subscription of any version or layout reaches the leader as its
  member wrote it, an assignment its member as the leader wrote it. Only
  in a ``consumer`` group that a logbroker consumer shares are they
  translated, by the handlers (api/groups.py, kafka/member_bytes.py).
- JoinGroup v0 has no rebalance timeout: the session timeout is used, as
  Kafka does. A new member (empty member id) gets its id in the answer of
  its first join, at every version: MEMBER_ID_REQUIRED (79, KIP-394) is
  never sent, which clients of v4+ accept (they take the id answered).
- ``group_instance_id`` (v5 JoinGroup, v3 SyncGroup/Heartbeat/LeaveGroup)
  is our static membership (KIP-345), served as for our consumers.
"""

from __future__ import annotations

from ..protocol import messages as m
from ..protocol.parts import LeavingMember, MemberAssignment, Protocol
from .plan import KafkaSite, Plan
from .wire_errors import kafka_code


def join_group(site: KafkaSite, header, body) -> Plan:
    failed = {"generation_id": -1, "protocol_name": "", "leader": "",
              "member_id": body.member_id, "members": []}
    protocols = tuple(Protocol(p.name, bytes(p.metadata)) for p in body.protocols)
    rebalance = body.rebalance_timeout_ms if header.api_version >= 1 else body.session_timeout_ms
    req = m.JoinGroup(group=body.group_id, session_timeout_ms=body.session_timeout_ms,
                      rebalance_timeout_ms=rebalance, member_id=body.member_id,
                      group_instance_id=body.group_instance_id,
                      protocol_type=body.protocol_type, protocols=protocols,
                      client_id=header.client_id or "", kafka_bytes=True)

    def answer(resp: m.JoinGroupResponse) -> dict:
        if resp.error:
            return {**failed, "error_code": kafka_code(resp.error)}
        return {"error_code": 0, "generation_id": resp.generation,
                "protocol_name": resp.protocol, "leader": resp.leader,
                "member_id": resp.member_id, "members": [
                    {"member_id": mid, "group_instance_id": iid, "metadata": meta}
                    for mid, iid, meta in resp.members]}
    return Plan(req, answer)


def sync_group(site: KafkaSite, header, body) -> Plan:
    assignments = tuple(MemberAssignment(a.member_id, bytes(a.assignment))
                        for a in body.assignments)
    req = m.SyncGroup(group=body.group_id, generation=body.generation_id,
                      member_id=body.member_id, group_instance_id=body.group_instance_id,
                      assignments=assignments, kafka_bytes=True)

    def answer(resp: m.SyncGroupResponse) -> dict:
        if resp.error:
            return {"error_code": kafka_code(resp.error), "assignment": b""}
        return {"error_code": 0, "assignment": resp.assignment}
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
