"""Kafka's group administration APIs, answered through our group
coordinator's own requests (ListGroups, DescribeGroups, DeleteGroups of
coordinator/requests.py: what ``logbroker groups list|describe|delete``
sends), so Kafka admin clients see the groups our clients see, Kafka
members and ours alike (docs/kafka.md §4.5).

- **ListGroups** (v0-2): the groups this broker coordinates that have
  members or committed offsets. In a cluster each broker answers for the
  groups whose offsets partition it leads, as Kafka's brokers do: admin
  clients ask every broker and merge. Each group's protocol type is its
  members' (``consumer``, ``connect``, ...; "" for a group that only has
  committed offsets, as Kafka lists it).
- **DescribeGroups** (v0-4): one entry per group asked, in order: state
  (Kafka's names: Empty, PreparingRebalance, CompletingRebalance, Stable),
  the group's protocol type, and each member's id, instance id (v4+),
  client id, host (``/ADDRESS``, Kafka's form), subscription and
  assignment: a Kafka member's bytes as it sent them, a logbroker
  member's in Kafka's ConsumerProtocol encoding (api/groups.py). As
  Kafka: the protocol data (the generation's assignor) and the member
  bytes only in the Stable state ("" and empty
  bytes otherwise); a group without members or offsets is answered as
  Kafka's ``Dead`` group with error 0 (GROUP_ID_NOT_FOUND is v6's answer);
  authorized operations are omitted (INT32_MIN, "not provided").
- **DeleteGroups** (v0-1): each group's offsets and membership record
  forgotten; NON_EMPTY_GROUP (68) while it has members, GROUP_ID_NOT_FOUND
  (69) for an unknown one.

Per group: NOT_COORDINATOR (16) at a broker that does not coordinate it,
COORDINATOR_LOAD_IN_PROGRESS (14), COORDINATOR_NOT_AVAILABLE (15) while
the broker cannot reach the cluster (wire_errors.kafka_group_code),
INVALID_GROUP_ID (24) for a name our rules refuse. ACLs: the session
checks our requests (net/kafka_connection.py): describe / delete on each
group (a request naming a denied group is refused whole: every group gets
GROUP_AUTHORIZATION_FAILED, 30); ListGroups lists every group with
describe on the cluster, else only the groups the principal may describe
(Kafka's rule; acl_rules.NARROWED).
"""

from __future__ import annotations

from ..errors import GroupNotFoundError
from ..protocol import messages as m
from .apis_group_admin import AUTHORIZED_OPERATIONS_OMITTED
from .plan import KafkaSite, Plan
from .wire_errors import kafka_group_code

STABLE, DEAD = "Stable", "Dead"


def list_groups(site: KafkaSite, header, body) -> Plan:
    def answer(resp: m.ListGroupsResponse) -> dict:
        if resp.error:
            return {"error_code": kafka_group_code(resp.error), "groups": []}
        types = dict(resp.protocol_types)
        return {"error_code": 0, "groups": [{"group_id": g, "protocol_type": types.get(g, "")}
                                            for g in resp.groups]}
    return Plan(m.ListGroups(), answer)


def describe_groups(site: KafkaSite, header, body) -> Plan:
    names = tuple(body.groups)

    def answer(resp: m.DescribeGroupsResponse) -> dict:
        if resp.error:  # refused whole (a denied group), or failed whole
            return {"groups": [_failed(name, resp.error) for name in names]}
        types = dict(resp.protocol_types)
        return {"groups": [_described(row, types.get(row[0], "")) for row in resp.groups]}
    return Plan(m.DescribeGroups(groups=names, kafka_bytes=True), answer)


def _failed(name: str, error: int) -> dict:
    """Kafka's entry of a group it could not describe: its error, nothing else."""
    return {"error_code": kafka_group_code(error), "group_id": name, "group_state": "",
            "protocol_type": "", "protocol_data": "", "members": [],
            "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED}


CONSUMER_KIND = "consumer"  # our DescribeGroups' kind of a consumer-protocol group


def _described(row: tuple, protocol_type: str) -> dict:
    """One of our DescribeGroups rows as Kafka's DescribedGroup."""
    name, error, _message, _parts, state, protocol, _generation, members, kind = row
    if error == GroupNotFoundError.code or kind == CONSUMER_KIND:
        # Kafka (v0-5): no such group is a Dead one; so is a consumer-protocol
        # group, as Kafka 4 answers (ConsumerGroupDescribe describes it)
        return {**_failed(name, 0), "group_state": DEAD}
    if error:
        return _failed(name, error)
    stable = state == STABLE
    return {"error_code": 0, "group_id": name, "group_state": state,
            "protocol_type": protocol_type,
            "protocol_data": protocol if stable else "",
            "members": [_member(mb, stable) for mb in members],
            "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED}


def _member(mb: tuple, stable: bool) -> dict:
    member_id, instance_id, client_id, host, assignment, metadata = mb
    return {"member_id": member_id, "group_instance_id": instance_id, "client_id": client_id,
            "client_host": kafka_host(host),
            "member_metadata": metadata if stable else b"",
            "member_assignment": assignment if stable else b""}


def kafka_host(peer: str) -> str:
    """A member's ``HOST:PORT`` as Kafka names a client host: ``/HOST``
    ("" when not known: "" or "?")."""
    if not peer or peer == "?":
        return ""
    host, sep, _port = peer.rpartition(":")
    return "/" + (host if sep else peer)


def delete_groups(site: KafkaSite, header, body) -> Plan:
    names = tuple(body.groups_names)

    def answer(resp: m.DeleteGroupsResponse) -> dict:
        if resp.error:  # refused whole (a denied group), or failed whole
            rows = [(name, resp.error) for name in names]
        else:
            rows = [(name, error) for name, error, _message in resp.groups]
        return {"results": [{"group_id": name, "error_code": kafka_group_code(error)}
                            for name, error in rows]}
    return Plan(m.DeleteGroups(groups=names), answer)
