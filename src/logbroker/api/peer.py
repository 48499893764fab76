"""A broker's proof of identity on a connection (the server's side of
cluster/peer_proof.py), and the check that binds the broker-only requests
to it.

``peer_challenge`` / ``peer_proof`` answer the two steps; a proof that
fails, or a step out of order, is SASL_AUTHENTICATION_FAILED (58): the
pipeline answers, logs a warning and closes the connection. Once proven,
``session.broker`` is the broker id the connection may act as.

``check_replica(meta, session, replica_id, what)`` is called by every
request a follower makes as a replica (ReplicaFetch; OffsetForLeaderEpoch
with a replica id >= 0): in a cluster the connection must have proven it is
broker ``replica_id``, in every mode, open or authenticated (a SCRAM user
with cluster_action could otherwise name any replica). Refused:
CLUSTER_AUTHORIZATION_FAILED (31), logged as a warning (at most one line a
second; the rest at debug). A single node has no replicas: nothing to check.
"""

from __future__ import annotations

import hmac
import logging
import secrets
import time
from dataclasses import dataclass

from .. import limits
from ..cluster.peer_proof import MAX_NONCE, MIN_NONCE, NONCE_BYTES
from ..errors import (ClusterAuthorizationFailedError, IllegalSaslStateError,
                      SaslAuthenticationFailedError)
from ..protocol import messages as m

log = logging.getLogger("logbroker.cluster")
WARN_EVERY_S = 1.0
_last_warning = [0.0]


@dataclass(frozen=True)
class Challenge:
    """An exchange under way: the claimed id and both nonces."""

    broker_id: int
    client_nonce: bytes
    server_nonce: bytes


def _key(meta):
    meta.check_replication()  # INVALID_REQUEST on a single node
    return meta.peer_key()  # CLUSTER_UNAVAILABLE until this broker has its cluster's secret


def peer_challenge(svc, req: m.PeerChallenge, session) -> m.PeerChallengeResponse:
    """Step 1: remember the claim, answer our id and a fresh nonce."""
    key = _key(svc.meta)
    if session.broker is not None:
        raise IllegalSaslStateError("one broker proof per connection")
    limits.check_int(req.broker_id, "broker_id", 0, limits.MAX_INT32)
    if not MIN_NONCE <= len(req.nonce) <= MAX_NONCE:
        raise SaslAuthenticationFailedError(f"broker proof: the nonce must be {MIN_NONCE}-"
                                            f"{MAX_NONCE} bytes, got {len(req.nonce)}")
    if req.broker_id == key.me:
        raise SaslAuthenticationFailedError(f"broker proof: {session.peer} claims to be this "
                                            f"broker ({key.me})")
    nonce = secrets.token_bytes(NONCE_BYTES)
    session.broker = Challenge(req.broker_id, bytes(req.nonce), nonce)
    return m.PeerChallengeResponse(broker_id=key.me, nonce=nonce)


def peer_proof(svc, req: m.PeerProof, session) -> m.PeerProofResponse:
    """Step 2: check the HMAC; the connection is broker ``broker_id`` from now on."""
    key = _key(svc.meta)
    ch = session.broker
    if ch.__class__ is not Challenge:
        raise IllegalSaslStateError("PeerProof " + ("before PeerChallenge" if ch is None
                                                    else "after the proof"))
    want = key.mac("client", ch.broker_id, key.me, ch.client_nonce, ch.server_nonce)
    if not hmac.compare_digest(bytes(req.proof), want):
        session.broker = -1  # the exchange is over; the pipeline closes the connection
        raise SaslAuthenticationFailedError(f"broker proof from {session.peer} as broker "
                                            f"{ch.broker_id} failed: wrong cluster secret")
    session.broker = ch.broker_id
    log.info("%s proved it is broker %d", session.peer, ch.broker_id)
    return m.PeerProofResponse(proof=key.mac("server", ch.broker_id, key.me, ch.client_nonce,
                                             ch.server_nonce))


def check_replica(meta, session, replica_id: int, what: str) -> None:
    """CLUSTER_AUTHORIZATION_FAILED unless this connection proved it is
    broker ``replica_id`` (module docstring); a consumer's -1 passes."""
    if replica_id < 0 or meta.peer_key() is None:  # a consumer's; a single node's
        return
    proven = session.broker
    if proven.__class__ is int and proven == replica_id and proven >= 0:
        return
    why = ("proved it is broker %d" % proven if proven.__class__ is int and proven >= 0
           else "not proved it is any broker")
    now = time.monotonic()
    level = logging.DEBUG
    if now - _last_warning[0] >= WARN_EVERY_S:
        _last_warning[0], level = now, logging.WARNING
    log.log(level, "refused %s from %s (%s) as replica %d: the connection has %s", what,
            session.peer, session.principal or "anonymous", replica_id, why)
    raise ClusterAuthorizationFailedError(
        f"{what} as replica {replica_id} refused: this connection has {why} (brokers prove "
        "their identity with the cluster's secret; docs/cluster.md)")

