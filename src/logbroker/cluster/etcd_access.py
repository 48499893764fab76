"""How a broker reaches a secured etcd (docs/cluster.md, "Securing etcd"):
TLS, client certificates and etcd's user authentication.

Settings (broker/config.py): an ``https://`` etcd address turns TLS on,
etcd's certificate checked against ``etcd_ca`` (else the system's roots);
``etcd_cert`` + ``etcd_key``: a client certificate (etcd's
``--client-cert-auth``; with etcd's authentication on, its common name is
the etcd user); ``etcd_user``: etcd's user authentication, its password
from the environment variable ``LOGBROKER_ETCD_PASSWORD``, else the first
line of ``etcd_password_file``, never from the TOML itself.

``check_etcd_settings(config)`` (no I/O) runs in ``BrokerConfig``;
``etcd_access(config)`` reads the files and the password once, at start
(INVALID_CONFIG naming what is missing or unreadable).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from urllib.parse import urlsplit

from ..errors import InvalidConfigError

PASSWORD_ENV = "LOGBROKER_ETCD_PASSWORD"
MAX_PEM_BYTES = 1 << 20


@dataclass(frozen=True)
class EtcdAccess:
    """What the etcd client needs beyond the address: ``tls`` (an https
    address), the PEM bytes, the user and password (None: not used)."""

    tls: bool = False
    ca: "bytes | None" = None
    cert: "bytes | None" = None
    key: "bytes | None" = None
    user: "str | None" = None
    password: "str | None" = None

    def __repr__(self) -> str:  # never the key or the password in a log line
        return (f"EtcdAccess(tls={self.tls}, ca={self.ca is not None}, "
                f"cert={self.cert is not None}, user={self.user!r})")


def is_tls(url: str) -> bool:
    return urlsplit(url if "://" in url else f"http://{url}").scheme == "https"


def check_etcd_settings(config) -> None:
    """INVALID_CONFIG unless the etcd settings fit together."""
    for name in ("etcd_ca", "etcd_cert", "etcd_key", "etcd_user", "etcd_password_file",
                 "cluster_secret_file"):
        value = getattr(config, name)
        if value is not None and (not isinstance(value, str) or not value):
            raise InvalidConfigError(f"{name} must be a non-empty string, got {value!r}")
    if (config.etcd_cert is None) != (config.etcd_key is None):
        raise InvalidConfigError("etcd_cert and etcd_key go together")
    if config.etcd_password_file is not None and config.etcd_user is None:
        raise InvalidConfigError("etcd_password_file needs etcd_user")
    tls_set = config.etcd_ca is not None or config.etcd_cert is not None
    if tls_set and config.etcd is not None and not is_tls(config.etcd):
        raise InvalidConfigError(f"etcd_ca / etcd_cert need an https:// etcd address, got "
                                 f"{config.etcd!r}")


def _read(path: str, what: str) -> bytes:
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_PEM_BYTES + 1)
    except OSError as exc:
        raise InvalidConfigError(f"cannot read {what} {path!r}: {exc}") from None
    if not data or len(data) > MAX_PEM_BYTES:
        raise InvalidConfigError(f"{what} {path!r} is empty or over 1 MiB")
    return data


def etcd_access(config) -> EtcdAccess:
    """The files and the password read (module docstring)."""
    password = None
    if config.etcd_user is not None:
        password = os.environ.get(PASSWORD_ENV)
        if password is None and config.etcd_password_file is not None:
            password = _read(config.etcd_password_file, "etcd_password_file").decode(
                "utf-8", "replace").splitlines()[0]
        if not password:
            raise InvalidConfigError(f"etcd_user {config.etcd_user!r} needs a password: set "
                                     f"{PASSWORD_ENV} or etcd_password_file")
    tls = config.etcd is not None and is_tls(config.etcd)
    return EtcdAccess(
        tls=tls,
        ca=_read(config.etcd_ca, "etcd_ca") if config.etcd_ca else None,
        cert=_read(config.etcd_cert, "etcd_cert") if config.etcd_cert else None,
        key=_read(config.etcd_key, "etcd_key") if config.etcd_key else None,
        user=config.etcd_user, password=password)
