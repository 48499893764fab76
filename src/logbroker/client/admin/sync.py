"""The sync ``Admin`` client: topics, groups, offsets and users (used by the CLI).

Every method is one blocking request (``list_offsets`` by topic name and
``describe_topics``: two; ``list_offsets``: one per leader) with a deadline
of ``request_timeout_ms``. Read-only requests and offset commits are
retried on a lost connection until the deadline, ``list_offsets`` also
across leader changes; creating, deleting and electing are sent once (a
retry could report TOPIC_ALREADY_EXISTS for a topic the first attempt
created). Errors: ``BrokerUnavailableError``,
``RequestTimedOutError``, ``ClientClosedError``, the broker's error as its
registered exception (``errors.for_code``), whose message names the topic,
partition or group, and — before anything is sent — ``TypeError`` or the
registry's error for a bad argument (``client/validate.py``).

The methods are ``AdminCore``'s coroutines (signatures and docstrings
included), run on this client's I/O thread.
"""

from __future__ import annotations

from .core import METHODS, AdminCore
from ..loop_thread import LoopThread
from ..net.routing import Router
from ..settings import TlsSettings, client_options
from ..waiting import SyncShell, blocking, forward


class Admin(SyncShell):
    """``Admin(bootstrap="127.0.0.1:9555", request_timeout_ms=30000,
    connect_timeout_ms=5000)``; a context manager. Thread-safe. TLS:
    ``tls_ca=``, ``tls_cert=``/``tls_key=``, ``tls_check_hostname=`` as
    for every client (settings.TlsSettings, docs/security.md); ``username=``
    and ``password=`` authenticate (SCRAM-SHA-256)."""

    def __init__(self, bootstrap="127.0.0.1:9555", *, client_id: str = "logbroker-admin",
                 request_timeout_ms: int = 30_000, connect_timeout_ms: int = 5_000,
                 tls_ca: "str | None" = None, tls_cert: "str | None" = None,
                 tls_key: "str | None" = None, tls_check_hostname: bool = True,
                 username: "str | None" = None, password: "str | None" = None,
                 sasl_mechanism: str = "SCRAM-SHA-256") -> None:
        self.options = client_options(bootstrap, client_id, request_timeout_ms,
                                      connect_timeout_ms,
                                      TlsSettings(tls_ca, tls_cert, tls_key, tls_check_hostname,
                                                  username, password, sasl_mechanism))
        self._core = AdminCore(Router(self.options))
        self._timeout = self.options.request_timeout + self.options.connect_timeout + 1
        self._io = LoopThread("logbroker-admin-io")

    def close(self) -> None:
        """Close the connection and the I/O thread. Idempotent."""
        if not self._core.closed:
            self._core.closed = True
            self._stop(self._core.aclose())


forward(Admin, AdminCore, METHODS, blocking)
