"""How a broker proves to a peer which broker it is (docs/cluster.md,
"Broker identity"), in every mode, open or authenticated.

Replication trusts the replica id a follower's ReplicaFetch names: the
leader counts it toward the ISR and the high watermark. So that id must be
proven, not claimed. Every broker of a cluster holds the same secret (32
random bytes): by default created once in etcd at ``<root>cluster_secret``
(a compare-and-set on an absent key: the first broker to start creates it,
every other reads it), or given to every broker alike by the environment
variable ``LOGBROKER_CLUSTER_SECRET`` or the first line of
``cluster_secret_file`` (at least 16 bytes; then etcd's is not used).

The exchange, on a fresh connection (after SCRAM when the cluster uses it):

    dialler -> PeerChallenge(broker_id=C, nonce=cn)       (cn: 32 random bytes)
    server  <- (broker_id=S, nonce=sn)                    (sn: 32 random bytes)
    dialler -> PeerProof(proof=HMAC(secret, "client" C S cn sn))
    server  <- (proof=HMAC(secret, "server" C S cn sn))

The server checks the dialler's HMAC (constant-time) and binds the
connection to broker C: ReplicaFetch and a follower's OffsetForLeaderEpoch
on it may name replica C only (api/peer.py). The dialler checks the
server's HMAC and that S is the leader it meant to reach. The secret never
crosses the wire; both nonces are fresh per exchange, so a recorded proof
is worth nothing on another connection; the role, the cluster name and
both ids are in the MAC, so a proof cannot be reflected or relayed to
another broker or cluster. Without TLS a connection can still be hijacked
after the proof by whoever controls the network path: use TLS between
brokers where that matters (docs/security.md).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import secrets
import struct
from dataclasses import dataclass

from ..errors import (ClusterUnavailableError, InvalidConfigError,
                      SaslAuthenticationFailedError, for_code)

log = logging.getLogger("logbroker.cluster")
SECRET_ENV = "LOGBROKER_CLUSTER_SECRET"
SECRET_BYTES = 32  # the size of the secret created in etcd
MIN_SECRET_BYTES = 16  # a configured one
NONCE_BYTES = 32
MIN_NONCE, MAX_NONCE = 16, 64  # a dialler's nonce


@dataclass(frozen=True)
class PeerKey:
    """The cluster's secret, the cluster's name and this broker's id."""

    secret: bytes
    cluster: str
    me: int

    def mac(self, role: str, client: int, server: int, client_nonce: bytes,
            server_nonce: bytes) -> bytes:
        """HMAC-SHA256 over every value of the exchange, each length-framed."""
        h = hmac.new(self.secret, digestmod=hashlib.sha256)
        for part in (b"logbroker-peer-proof", role.encode(), self.cluster.encode(),
                     struct.pack(">qq", client, server), client_nonce, server_nonce):
            h.update(struct.pack(">I", len(part)) + part)
        return h.digest()

    def __repr__(self) -> str:  # never the secret in a log line
        return f"PeerKey(cluster={self.cluster!r}, me={self.me})"


def configured_secret(config) -> "bytes | None":
    """The secret from ``LOGBROKER_CLUSTER_SECRET``, else the first line of
    ``cluster_secret_file``; None when neither is set (then etcd's).
    INVALID_CONFIG when it is unreadable or shorter than 16 bytes."""
    value, source = os.environ.get(SECRET_ENV), SECRET_ENV
    path = getattr(config, "cluster_secret_file", None)
    if value is None and path is not None:
        source = f"cluster_secret_file {path!r}"
        try:
            with open(path, encoding="utf-8") as fh:
                value = fh.readline().rstrip("\r\n")
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidConfigError(f"cannot read {source}: {exc}") from None
    if value is None:
        return None
    raw = value.encode()
    if len(raw) < MIN_SECRET_BYTES:
        raise InvalidConfigError(f"{source} must hold at least {MIN_SECRET_BYTES} bytes "
                                 f"(got {len(raw)}): every broker of the cluster uses the same")
    return raw


async def shared_secret(etcd, key: str) -> bytes:
    """The cluster's secret in etcd at ``key``, created (32 random bytes)
    by a compare-and-set if no broker has yet. A value of another size is
    not used: INVALID_CONFIG (an operator deletes the key, then restarts
    every broker)."""
    got = await etcd.get(key)
    if got is None:
        if await etcd.cas({key: secrets.token_bytes(SECRET_BYTES)}, {key: 0}):
            log.info("created the cluster's broker secret in etcd (%s)", key)
        got = await etcd.get(key)
        if got is None:
            raise ClusterUnavailableError(f"the cluster's secret at {key} vanished; retrying")
    if len(got.value) != SECRET_BYTES:
        raise InvalidConfigError(f"the cluster's secret at {key} in etcd is {len(got.value)} "
                                 f"bytes, not {SECRET_BYTES}: delete the key and restart every "
                                 "broker (docs/cluster.md)")
    return got.value


async def prove(conn, key: PeerKey, server: int, timeout: float) -> None:
    """Prove to ``server`` over ``conn`` that we are ``key.me`` and check
    that it is ``server`` of our cluster; SaslAuthenticationFailedError
    (or the peer's error) otherwise."""
    from ..protocol import messages as m

    nonce = secrets.token_bytes(NONCE_BYTES)
    resp = await conn.request(m.PeerChallenge(broker_id=key.me, nonce=nonce), timeout)
    if resp.error:
        raise for_code(resp.error)(resp.message)
    if resp.broker_id != server:
        raise SaslAuthenticationFailedError(f"dialled broker {server}, reached broker "
                                            f"{resp.broker_id}")
    sn = bytes(resp.nonce)
    resp = await conn.request(m.PeerProof(proof=key.mac("client", key.me, server, nonce, sn)),
                              timeout)
    if resp.error:
        raise for_code(resp.error)(resp.message)
    if not hmac.compare_digest(bytes(resp.proof), key.mac("server", key.me, server, nonce, sn)):
        raise SaslAuthenticationFailedError(f"broker {server} did not prove the cluster's "
                                            "secret (another cluster, or not a broker)")



