"""Authentication and authorization state: SCRAM-SHA-256 and SCRAM-SHA-512
through ``scramp``, PLAIN against the stored SCRAM credentials (plain.py;
offered over TLS only unless ``sasl_plain_over_plaintext``), the mechanisms
of ``sasl_mechanisms``; one ``Session`` per connection (docs/security.md,
"Authentication"), used by the request pipeline's first two stages
(api/pipeline.py) and by the handlers that authorize themselves.

A connection starts anonymous.

- The SASL exchange (``handshake``, then two ``step``s: client-first ->
  server-first, client-final -> server-final; answered by api/sasl.py):
  anything out of order is ILLEGAL_SASL_STATE. A failed step raises one of
  ``CLOSING_ERRORS`` (the pipeline answers, then closes the connection);
  so does an exchange not finished within ``frame_timeout_ms`` of its
  handshake (``expired``). Each exchange has a fresh server nonce
  (scramp's, from ``secrets``), so a client-final replayed on another
  connection fails.
- Password guessing is throttled (auth_throttle.py): per client address
  and per user name, an attempt over its limit is refused before its
  client-first message is looked at or its proof checked
  (SASL_AUTHENTICATION_FAILED naming the limit; the connection closes),
  counted by ``throttled()``.
- An unknown user gets made-up credentials (a salt stable per name) and
  fails at the proof, as a wrong password does: the answer does not tell
  which names exist. The broker log does.
- With ``auth_required``, an anonymous connection's requests other than
  Handshake and ``SELF_AUTHORIZED`` ones are refused
  (``refuse_anonymous``: SASL_AUTHENTICATION_FAILED; an acks=0 produce,
  which gets no answer, closes the connection).
- User and ACL administration (api/access.py) call ``may_administer``:
  with ``auth_required`` an authenticated connection allowed to alter (or
  describe) the cluster, or — the bootstrap rule, for users only — a
  connection from a loopback address while no user exists or ever
  existed (the stores remember it, durably: auth_store.py); without
  ``auth_required`` but with ACLs enforced, any connection the ACLs allow
  that (anonymous as ``User:ANONYMOUS``); with neither, anyone.
- Where users and ACLs live: the metadata's stores (a single node's LMDB,
  auth_store.py and acl_store.py; or etcd, read from the broker's mirror,
  cluster/access_store.py); ``BrokerAuth`` takes them from
  ``meta.access_stores``.
- Authorization (``authorize``): when ACLs are enforced
  (``BrokerAuth.enforcing``: ``auth_required`` with ``super_users`` set, or
  ``allow_everyone_if_no_acl_found``, which turns the authorizer on by
  itself as Kafka's authorizer setting does), every other request of a
  connection not gated is checked against the ACLs (acl.py) by its entry in
  acl_rules.py, as its principal: ``User:NAME`` once authenticated, else
  ``User:ANONYMOUS`` (``acl_principal``; for ACLs and quotas only: the
  connection stays unauthenticated for everything else). It returns None (allowed), a denial
  ``(response, close)`` (its response class with
  TOPIC/GROUP/CLUSTER_AUTHORIZATION_FAILED, 29/30/31, naming the operation
  and the resource; counted, ``denied(cls)``), a Metadata or
  DescribeTopics of every topic narrowed to the topics the principal may
  describe, a FetchOffsets of every topic or a DescribeGroups answered
  with the topics it may describe only (``Narrowed``), a ``Partial`` (some topics of a Produce, Fetch or ListOffsets
  denied: the other parts are served, the denied ones get 29) or, asked
  to (``narrow=True``: the Kafka listener), a ``Narrowed`` ListGroups
  (served, its answer keeping the groups the principal may describe:
  Kafka's rule). The pipeline is the one reader of these shapes.

Metrics: each failed authentication calls the session's ``failed()``
(the connection's: ``broker.metrics.auth_failed()`` with metrics on),
each throttled attempt ``throttled()`` instead, each authorization denial
its ``denied(request class)``.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import dataclasses
import logging
import secrets
import time

from scramp import ScramException, ScramMechanism

from .. import limits
from ..errors import (ClusterAuthorizationFailedError, IllegalSaslStateError, LogbrokerError,
                      SaslAuthenticationFailedError, UnsupportedSaslMechanismError)
from ..protocol import messages as m
from ..protocol.auth_messages import DEFAULT_ITERATIONS, MECHANISM, PLAIN, SCRAM_MECHANISMS
from .acl import ANONYMOUS, CLUSTER, CLUSTER_NAME, TOPIC, Authorizer
from .acl_rules import (ERRORS, FILTERED, LISTING, NARROWED, PER_PART, RULES, Partial,
                        keep_groups, keep_topics)
from .auth_throttle import AuthThrottle
from .auth_store import KEY_BYTES_OF
from .plain import MAX_PLAIN_BYTES, PasswordChecks, parse_plain
from ..limits import listed

log = logging.getLogger("logbroker.auth")
SASL = (m.SaslHandshake, m.SaslAuthenticate)
USER_ADMIN = (m.CreateUser, m.DeleteUser, m.ListUsers)
ACL_ADMIN = (m.CreateAcls, m.DeleteAcls, m.DescribeAcls)
# requests their handlers authorize themselves (the SASL exchange; user and
# ACL administration, with the bootstrap rule): the session's gate and the
# ACL check pass them on (api/pipeline.py)
SELF_AUTHORIZED = frozenset(SASL + USER_ADMIN + ACL_ADMIN)
# errors of the SASL exchange: answered, then the connection closes
CLOSING_ERRORS = (SaslAuthenticationFailedError, IllegalSaslStateError,
                  UnsupportedSaslMechanismError)
FAILED = "invalid user name or password"
_NEW, _HANDSHAKEN, _FIRST, _DONE = range(4)


class BrokerAuth:
    """What every connection's session shares: the users, the ACLs, the
    settings, the SCRAM mechanism and a per-process secret for unknown
    users' salts. ``cluster``: the ClusterNode in cluster mode (users and
    ACLs in etcd), else None or False (the LMDB ``meta``'s). ``topics``: the
    metadata interface (``topic_names()``, ``topic_partitions(name)``): every
    topic of the cluster, not only those stored on this broker."""

    def __init__(self, config, stores, topics=None) -> None:
        """``stores(on_acls)`` -> (users, acls): the metadata's stores
        (metadata/interface.py), calling ``on_acls()`` after each ACL change."""
        self.config = config
        self.required = config.auth_required
        self.super_users = frozenset(config.super_users)
        self.allow_if_no_acl = config.allow_everyone_if_no_acl_found
        # ACLs checked: the old rule, or Kafka's (the authorizer setting alone)
        self.enforcing = self.required and bool(self.super_users) or self.allow_if_no_acl
        # the super users' names (users whose last one may not be deleted: auth_store.keeper)
        self.super_user_names = frozenset(p[5:] for p in self.super_users
                                          if p.startswith("User:") and p != "User:*")
        self.topics = topics
        self.users, self.acls = stores(self.reload_acls)
        self.authorizer = Authorizer((), self.super_users, self.allow_if_no_acl)
        self.reload_acls()
        self.scram = {name: ScramMechanism(name) for name in SCRAM_MECHANISMS}
        self.mechanisms = tuple(config.sasl_mechanisms)  # offered (SaslHandshake)
        self.passwords = PasswordChecks(self)  # PLAIN's PBKDF2, off the loop (plain.py)
        self._secret = secrets.token_bytes(32)
        self.throttle = AuthThrottle(config.auth_failures_per_s_per_ip,
                                     config.auth_failures_per_s_per_user)

    def credentials(self, name: str, mechanism: str = MECHANISM) -> tuple:
        """``scramp``'s auth_fn: the user's (salt, stored key, server key,
        iterations) for SCRAM ``mechanism``, made up (and never matching) for
        an unknown user or one without credentials of that mechanism."""
        cred = self.users.get(name)
        cred = None if cred is None else cred.of(mechanism)
        if cred is None:
            salt = hmac.new(self._secret, name.encode(), hashlib.sha256).digest()[:16]
            size = KEY_BYTES_OF[mechanism]
            return salt, secrets.token_bytes(size), secrets.token_bytes(size), DEFAULT_ITERATIONS
        return cred.salt, cred.stored_key, cred.server_key, cred.iterations

    def offered(self, tls: bool) -> tuple:
        return offered(self.config, tls)

    def reload_acls(self) -> None:
        """Index the stored bindings again (after each change)."""
        self.authorizer = Authorizer(self.acls.list(), self.super_users, self.allow_if_no_acl)

    def known(self, topic: str) -> bool:
        """The topic exists (a bad name counts as known: the edge refuses it next)."""
        try:
            limits.check_topic_name(topic)
        except LogbrokerError:
            return True
        return self.topics is None or self.topics.topic_partitions(topic) is not None

    def allows(self, principal: str, operation: str, resource_type: str, name: str) -> bool:
        """The ACL check, with Kafka's one widening: create on the cluster
        allows creating any topic."""
        ok = self.authorizer.authorize
        return ok(principal, operation, resource_type, name) or (
            operation == "create" and resource_type == TOPIC
            and ok(principal, "create", CLUSTER, CLUSTER_NAME))


def offered(config, tls: bool) -> tuple:
    """The mechanisms a connection may use (``sasl_mechanisms``): PLAIN only
    over TLS unless ``sasl_plain_over_plaintext``."""
    return tuple(name for name in config.sasl_mechanisms
                 if name != PLAIN or tls or config.sasl_plain_over_plaintext)


class Session:
    """One connection's authentication state (module docstring)."""

    __slots__ = ("auth", "peer", "ip", "failed", "denied", "throttled", "loopback", "principal",
                 "gated", "state", "server", "user", "deadline", "refused", "broker", "tls",
                 "mechanism", "fetch_session", "produce_fences")

    def __init__(self, auth: BrokerAuth, peer: str, failed, denied=None, throttled=None) -> None:
        """``failed()``: called once per failed authentication, ``denied(cls)``
        once per request refused by authorization, ``throttled()`` once per
        attempt refused by the guessing throttle (metrics)."""
        self.auth, self.failed = auth, failed
        self.denied = denied or (lambda cls: None)
        self.throttled = throttled or (lambda: None)
        self.refused = False  # the exchange was refused by the throttle (not a failure)
        self.set_peer(peer)
        self.principal = ""  # "User:NAME" once authenticated
        self.gated = auth.required  # anonymous requests are refused
        self.state = _NEW
        self.server = None
        self.user = ""
        self.deadline: "float | None" = None  # the exchange must end by then (loop time)
        self.broker = None  # the broker id this connection proved it is (api/peer.py)
        self.tls = False  # the connection is TLS (PLAIN is offered over TLS only)
        self.mechanism = ""  # the SASL mechanism chosen at the handshake
        self.fetch_session = None  # the connection's fetch session (api/fetch_session.py)
        self.produce_fences = None  # its refused producers' fences (api/produce_fence.py)

    @property
    def acl_principal(self) -> str:
        """Whom the ACLs see: ``User:NAME`` once authenticated, else ``User:ANONYMOUS``."""
        return self.principal or ANONYMOUS

    def set_peer(self, peer: str) -> None:
        """``HOST:PORT`` of the other end ("?" while unknown: not loopback)."""
        self.peer = peer
        self.ip = peer.rpartition(":")[0].strip("[]")
        self.loopback = _is_loopback(self.ip)

    def refuse_anonymous(self, msg: m.Message):
        """The answer to an unauthenticated connection's request when the
        broker requires authentication: ``(response, close)`` (an acks=0
        Produce, which gets no answer, closes the connection instead)."""
        self.failed()
        if msg.__class__ is m.Produce and msg.acks == 0:
            return None, True
        return m.RESPONSES[msg.API](
            error=SaslAuthenticationFailedError.code,
            message=f"{msg.__class__.__name__} refused: this broker requires authentication "
                    f"({MECHANISM}; give the client a username and password)"), False

    def expired(self, now: float) -> bool:
        """The exchange under way has outlived its bound (the caller closes)."""
        if self.deadline is not None and now > self.deadline:
            self.deadline = None
            self.fail("not completed within frame_timeout_ms")
            return True
        return False

    # -- the exchange ------------------------------------------------------------------------
    def handshake(self, msg: m.SaslHandshake, now: float) -> m.SaslHandshakeResponse:
        """The first SASL step: the mechanism chosen (an error closes the connection)."""
        if self.state != _NEW:
            raise IllegalSaslStateError("one SaslHandshake per connection (re-authentication "
                                        "is not supported)")
        offered = self.auth.offered(self.tls)
        if msg.mechanism not in offered:
            why = ("PLAIN sends the password itself: offered over TLS only "
                   "(sasl_plain_over_plaintext)" if msg.mechanism == PLAIN
                   and PLAIN in self.auth.mechanisms else "not offered (sasl_mechanisms)")
            log.debug("%s asked for SASL mechanism %r: %s", self.peer, msg.mechanism[:40], why)
            raise UnsupportedSaslMechanismError(
                f"mechanism {msg.mechanism[:40]!r}: {why}; use {', '.join(offered)}")
        self.state, self.mechanism = _HANDSHAKEN, msg.mechanism
        if msg.mechanism != PLAIN:
            scram = self.auth.scram[msg.mechanism]
            self.server = scram.make_server(
                lambda name: self.auth.credentials(name, scram.name))
        self.deadline = now + self.auth.config.frame_timeout_ms / 1000
        return m.SaslHandshakeResponse(mechanisms=offered)

    def step(self, msg: m.SaslAuthenticate,
             now: "float | None" = None) -> m.SaslAuthenticateResponse:
        """A SCRAM step: server-first, then server-final with the principal
        (an error closes the connection). Each step first asks the guessing
        throttle (``now``: the loop's time, by default time.monotonic, which
        it is); a wrong proof counts against it."""
        if self.state not in (_HANDSHAKEN, _FIRST):
            raise IllegalSaslStateError("SaslAuthenticate " + (
                "before SaslHandshake" if self.state == _NEW else "after the exchange ended"))
        throttle = self.auth.throttle
        now = time.monotonic() if now is None else now  # the loop's clock
        if self.mechanism == PLAIN:
            return self._plain(msg, now)
        try:
            text = msg.auth_bytes.decode("utf-8")
            if self.state == _HANDSHAKEN:
                user = _user_of(text)
                self._check_throttle(user, now)  # before the client-first is looked at
                self.server.set_client_first(text)
                self.user = user
                self.state = _FIRST
                return m.SaslAuthenticateResponse(auth_bytes=self.server.get_server_first()
                                                  .encode())
            self._check_throttle(self.user, now)  # again: others may have failed meanwhile
            try:
                self.server.set_client_final(text)
                final = self.server.get_server_final().encode()
            except Exception:
                throttle.failed(self.ip, self.user, now)
                raise
        except (ScramException, UnicodeDecodeError, ValueError, KeyError, IndexError) as exc:
            cred = self.user and self.auth.users.get(self.user)
            why = exc if cred or not self.user else "unknown user"
            if cred and cred.of(self.mechanism) is None:
                why = f"the user has no {self.mechanism} credentials (set its password again)"
            log.warning("authentication from %s as %r failed: %s", self.peer, self.user[:60], why)
            raise SaslAuthenticationFailedError(FAILED) from None
        return self._succeeded(final, now)

    def _succeeded(self, final: bytes, now: float) -> m.SaslAuthenticateResponse:
        self.auth.throttle.succeeded(self.ip, self.user, now)
        self.state, self.deadline, self.server = _DONE, None, None
        self.principal, self.gated = f"User:{self.user}", False
        log.info("%s authenticated as %s (%s)", self.peer, self.principal, self.mechanism)
        return m.SaslAuthenticateResponse(auth_bytes=final, principal=self.principal)

    def _plain(self, msg: m.SaslAuthenticate, now: float):
        """PLAIN's one step: the throttle, then (a coroutine) the password
        checked off the loop (plain.py); the answer's auth bytes are empty."""
        if self.state != _HANDSHAKEN:
            raise IllegalSaslStateError("PLAIN takes one SaslAuthenticate")
        try:
            if len(msg.auth_bytes) > MAX_PLAIN_BYTES:
                raise ValueError(f"a PLAIN message of {len(msg.auth_bytes)} bytes")
            authzid, user, password = parse_plain(bytes(msg.auth_bytes))
        except (UnicodeDecodeError, ValueError) as exc:
            log.warning("authentication from %s failed: %s", self.peer, exc)
            raise SaslAuthenticationFailedError(FAILED) from None
        self._check_throttle(user, now)
        self.user, self.state = user, _FIRST
        if authzid and authzid != user:
            self.auth.throttle.failed(self.ip, user, now)
            log.warning("authentication from %s as %r failed: authorization id %r differs",
                        self.peer, user[:60], authzid[:60])
            raise SaslAuthenticationFailedError(FAILED)
        return self._plain_checked(password)

    async def _plain_checked(self, password: str) -> m.SaslAuthenticateResponse:
        _stored, why = await self.auth.passwords.check(self.user, password)
        now = time.monotonic()
        if why is not None:
            self.auth.throttle.failed(self.ip, self.user, now)
            log.warning("authentication from %s as %r failed: %s", self.peer, self.user[:60],
                        why)
            raise SaslAuthenticationFailedError(FAILED)
        return self._succeeded(b"", now)

    def _check_throttle(self, user: str, now: float) -> None:
        """SASL_AUTHENTICATION_FAILED, naming the limit, while the guessing
        throttle holds this address or user back (the answer is at once; the
        caller closes the connection)."""
        wait, which = self.auth.throttle.wait(self.ip, user, now)
        if wait:
            self.refused = True
            who = f"from {self.ip or '?'}" if which == "address" else f"as {user[:60]!r}"
            raise SaslAuthenticationFailedError(
                f"authentication throttled: too many failed attempts {who} (at most "
                f"{self.auth.throttle.limit_of(which):g} a second per {which}, "
                f"auth_failures_per_s_per_{'ip' if which == 'address' else 'user'}); "
                f"retry in {max(wait, 0.001):.3f} s")

    def fail(self, why: str) -> None:
        """The exchange failed (the caller closes the connection once answered)."""
        self.state, self.deadline, self.server = _DONE, None, None
        if self.refused:  # the throttle's: counted and logged there
            self.throttled()
            return
        self.failed()
        log.log(logging.DEBUG if why == FAILED else logging.WARNING,
                "authentication from %s failed: %s", self.peer, why)

    # -- authorization ------------------------------------------------------------------------
    def authorize(self, msg: m.Message, narrow: bool = False):
        """None, a denial ``(response, close)``, the request narrowed to the
        topics the principal may describe (acl_rules.LISTING), a
        ``Partial`` (some parts denied, acl_rules.PER_PART), a ``Narrowed``
        whose answer keeps the topics the principal may describe
        (acl_rules.FILTERED: a FetchOffsets of every topic, DescribeGroups'
        offsets), or with ``narrow`` a ``Narrowed`` (a listing of
        acl_rules.NARROWED denied its rule: its answer filtered instead)."""
        cls, auth, principal = msg.__class__, self.auth, self.acl_principal
        rule = RULES.get(cls)
        if rule is None:  # acl_rules.NO_CHECK
            return None
        if cls in LISTING and msg.topics is None and auth.topics is not None:
            names = listed(auth.topics.topic_names())
            return dataclasses.replace(msg, topics=tuple(
                n for n in names if auth.allows(principal, "describe", TOPIC, n)))
        denied: dict[str, str] = {}  # name -> why (PER_PART: every name is a topic)
        for operation, resource_type, name in rule(msg, auth.known):
            if name not in denied and not auth.allows(principal, operation, resource_type, name):
                if narrow and cls in NARROWED:  # not a denial: it lists what it may see
                    op, rtype = NARROWED[cls]
                    return keep_groups(msg, lambda n: auth.allows(principal, op, rtype, n))
                log.info("%s (%s) denied %s: %s on %s %r", self.peer, principal, cls.__name__,
                         operation, resource_type, name)
                why = (f"{cls.__name__} refused: {principal} may not {operation} "
                       f"{resource_type} {name!r} (no ACL allows it)")
                if cls not in PER_PART or resource_type != TOPIC:  # a Produce's transactional id
                    return self._deny(msg, ERRORS[resource_type].code, why)
                denied[name] = why
        if not denied:
            if cls in FILTERED and (cls is m.DescribeGroups or msg.parts is None):
                return keep_topics(msg, lambda t: auth.allows(principal, "describe", TOPIC, t),
                                   lambda topics: log.debug(
                                       "%s (%s) %s: left out topics it may not describe: %s",
                                       self.peer, principal, cls.__name__, topics[:20]))
            return None
        code = ERRORS[TOPIC].code
        if all(part.topic in denied for part in msg.parts):
            return self._deny(msg, code, denied[msg.parts[0].topic])
        self.denied(cls)
        return Partial(msg, denied, code)

    def _deny(self, msg: m.Message, code: int, why: str):
        self.denied(msg.__class__)
        if msg.__class__ is m.Produce and msg.acks == 0:
            return None, True  # it gets no answer: the connection closes instead
        return m.RESPONSES[msg.API](error=code, message=why), False

    # -- administration -----------------------------------------------------------------------
    def may_administer(self, operation: str, users=None) -> bool:
        """CLUSTER_AUTHORIZATION_FAILED unless this connection may do
        ``operation`` on the cluster; ``users``: the bootstrap rule applies.
        True when only the bootstrap rule allows it (the write must check
        again that no user exists)."""
        auth = self.auth
        if not auth.required and not auth.enforcing:
            return False
        if self.principal or not auth.required:  # anonymous without auth_required: the ACLs
            principal = self.acl_principal
            if auth.enforcing and not auth.allows(principal, operation, CLUSTER, CLUSTER_NAME):
                log.debug("%s (%s) may not %s the cluster: %s administration refused",
                          self.peer, principal, operation,
                          "user" if users is not None else "ACL")
                raise ClusterAuthorizationFailedError(
                    f"{principal} may not {operation} cluster {CLUSTER_NAME!r} (not a "
                    "super user and no ACL allows it)")
            return False
        if users is not None and self.loopback and users.bootstrap_open():
            return True  # bootstrap: the first user ever, from the broker's own host
        what = "user" if users is not None else "ACL"
        raise ClusterAuthorizationFailedError(
            f"{what} administration needs an authenticated connection" +
            ("" if self.loopback or users is None else " (or, before the first user exists, "
             "one from a loopback address)"))


def _user_of(client_first: str) -> str:
    """The ``n=`` attribute of a client-first message (for logs and the principal)."""
    bare = client_first.split(",", 2)[2]
    for attr in bare.split(","):
        if attr.startswith("n="):
            return attr[2:].replace("=2C", ",").replace("=3D", "=")
    raise ValueError("no user name")


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
