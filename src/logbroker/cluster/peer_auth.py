"""How brokers authenticate to each other (Kafka's inter-broker SASL
credentials; docs/security.md, "In a cluster").

A broker that dials a peer (replication: cluster/follower.py through
``ClusterNode.connect_to``) authenticates with SCRAM-SHA-256, as any client
does (client/auth.py), as ``inter_broker_user``. Its password comes from
the environment variable ``LOGBROKER_INTER_BROKER_PASSWORD``, else from the
first line of ``inter_broker_password_file``: never from the TOML itself.
The user is an ordinary user (``logbroker users add broker``); with ACLs
enforced it must be a super user or be allowed ``cluster_action`` on the
cluster (ReplicaFetch, OffsetForLeaderEpoch need it).

``check_settings(config)`` (no I/O) runs in ``BrokerConfig``: cluster mode
with ``auth_required`` needs ``inter_broker_user``.
``inter_broker_credentials(config)`` reads the password, once, at start:
INVALID_CONFIG when it is missing, empty or unreadable.
"""

from __future__ import annotations

import logging
import os

from ..errors import InvalidConfigError, LogbrokerError

log = logging.getLogger("logbroker.cluster")
PASSWORD_ENV = "LOGBROKER_INTER_BROKER_PASSWORD"


def check_settings(config) -> None:
    """INVALID_CONFIG unless the inter-broker settings fit together."""
    user, path = config.inter_broker_user, config.inter_broker_password_file
    if user is not None:
        from ..protocol import messages
        from ..protocol.auth_messages import check_user_name

        try:
            check_user_name(user)
        except LogbrokerError:
            raise InvalidConfigError(f"inter_broker_user must be 1-249 of [A-Za-z0-9._@-], "
                                     f"got {str(user)[:60]!r}") from None
    if path is not None and (user is None or not isinstance(path, str) or not path):
        raise InvalidConfigError("inter_broker_password_file needs inter_broker_user")
    if config.etcd is not None and config.auth_required and user is None:
        raise InvalidConfigError(
            "auth_required in cluster mode needs inter_broker_user (the user brokers "
            f"authenticate as to each other; its password from {PASSWORD_ENV} or "
            "inter_broker_password_file; docs/security.md)")


def inter_broker_credentials(config):
    """The ``SaslCredentials`` brokers dial each other with, or None
    without ``inter_broker_user``."""
    user = config.inter_broker_user
    if user is None:
        return None
    from ..client.net.auth import SaslCredentials

    password = os.environ.get(PASSWORD_ENV)
    source = PASSWORD_ENV
    if password is None and config.inter_broker_password_file is not None:
        source = f"inter_broker_password_file {config.inter_broker_password_file!r}"
        try:
            with open(config.inter_broker_password_file, encoding="utf-8") as fh:
                password = fh.readline().rstrip("\r\n")
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidConfigError(f"cannot read {source}: {exc}") from None
    if not password:
        raise InvalidConfigError(
            f"inter_broker_user {user!r} needs a password: set {PASSWORD_ENV} or "
            "inter_broker_password_file" if password is None else f"{source} is empty")
    if config.auth_required and config.super_users and f"User:{user}" not in config.super_users:
        log.warning("inter_broker_user %r is not in super_users: replication needs an ACL "
                    "allowing it cluster_action on the cluster", user)
    return SaslCredentials(user, password)


async def authenticate_peer(conn, creds, timeout: float) -> None:
    """Authenticate a fresh connection to a peer as ``creds`` (nothing when
    None); SaslAuthenticationFailedError (not retriable) names the peer."""
    if creds is not None:
        from ..client.net.auth import authenticate

        await authenticate(conn, creds, timeout)
