"""The metrics server's settings, checked (docs/metrics.md, "The server").

``check_settings(config)`` raises INVALID_CONFIG naming the rule for a bad
``metrics_*`` value: ``metrics_refresh_s`` 0.1..3600, ``metrics_max_connections``
1..10,000, ``metrics_timeout_ms`` 100..300,000; ``metrics_auth`` needs
``auth_required`` (the users it checks) and, on a host other than loopback,
``metrics_tls`` (passwords would cross the network in clear);
``metrics_tls`` needs ``tls_cert``.
"""

from __future__ import annotations

from ..errors import InvalidConfigError
from ..limits import is_loopback_host


def check_settings(c) -> None:
    refresh = c.metrics_refresh_s
    if type(refresh) not in (int, float) or not 0.1 <= refresh <= 3600:
        raise InvalidConfigError(f"metrics_refresh_s must be 0.1..3600 seconds, got {refresh!r}")
    for name, low, high in (("metrics_max_connections", 1, 10_000),
                            ("metrics_timeout_ms", 100, 300_000)):
        value = getattr(c, name)
        if type(value) is not int or not low <= value <= high:
            raise InvalidConfigError(f"{name} must be an integer {low}..{high}, got {value!r}")
    for name in ("metrics_auth", "metrics_tls"):
        if type(getattr(c, name)) is not bool:
            raise InvalidConfigError(f"{name} must be true or false, got {getattr(c, name)!r}")
    if c.metrics_tls and c.tls_cert is None:
        raise InvalidConfigError("metrics_tls needs tls_cert and tls_key (the listener's "
                                 "certificate serves /metrics too)")
    if c.metrics_auth and not c.auth_required:
        raise InvalidConfigError("metrics_auth needs auth_required: /metrics checks the "
                                 "broker's users")
    if c.metrics_auth and not c.metrics_tls and not is_loopback_host(c.host):
        raise InvalidConfigError(f"metrics_auth on host {c.host!r} needs metrics_tls: its "
                                 "passwords would cross the network in clear")
