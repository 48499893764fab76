"""TLS contexts for the broker's listener, its peers and the clients (docs/security.md).

Shared by the broker and the clients (the client never imports the broker
package). Both sides speak TLS 1.2 or later (stdlib ``ssl``, OpenSSL's
default ciphers).

- ``server_context(cert, key, ca, client_auth)``: the listener's context;
  with ``client_auth`` a client must present a certificate signed by ``ca``.
- ``client_context(ca, cert, key, check_hostname)``: a client's (or a broker's
  toward its peers) context: the broker's certificate must chain to ``ca``
  (the system's CAs when None) and, unless ``check_hostname`` is False, name
  the host dialled (DNS name or IP address); ``cert``/``key`` are presented
  when the broker asks (mutual TLS).

A file that cannot be read or is not PEM of the right kind raises
``InvalidConfigError`` naming the setting and the file, when the context is
built (at start), never later. ``handshake_error()`` turns an ``ssl``
exception of a handshake into a ``LogbrokerError`` with a short reason.
"""

from __future__ import annotations

import os
import ssl

from .errors import BrokerUnavailableError, InvalidConfigError, LogbrokerError, TlsError

MIN_VERSION = ssl.TLSVersion.TLSv1_2


def server_context(cert: str, key: str, ca: "str | None" = None,
                   client_auth: bool = False) -> ssl.SSLContext:
    """The listener's context: ``cert`` (PEM chain) and ``key``; with
    ``client_auth`` clients must present a certificate that chains to ``ca``."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = MIN_VERSION
    _load_chain(ctx, cert, key)
    if ca is not None:
        _load_ca(ctx, ca)
    if client_auth:
        if ca is None:
            raise InvalidConfigError("tls_client_auth needs tls_ca")
        ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


def client_context(ca: "str | None" = None, cert: "str | None" = None, key: "str | None" = None,
                   check_hostname: bool = True) -> ssl.SSLContext:
    """A client's context: trusts ``ca`` (else the system's CAs), checks the
    host name unless told not to, presents ``cert``/``key`` if given (``key``
    None: the key is in ``cert``'s file)."""
    if key is not None and cert is None:
        raise InvalidConfigError("tls_key needs tls_cert")
    if not isinstance(check_hostname, bool):
        raise InvalidConfigError(f"tls_check_hostname must be a bool, got {check_hostname!r}")
    if ca is None:
        ctx = ssl.create_default_context()  # the system's CAs
    else:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # ``ca`` alone
        _load_ca(ctx, ca)
    ctx.minimum_version = MIN_VERSION
    ctx.check_hostname = check_hostname
    ctx.verify_mode = ssl.CERT_REQUIRED
    if cert is not None:
        _load_chain(ctx, cert, key)
    return ctx


def handshake_error(exc: BaseException, address: str) -> LogbrokerError:
    """The error of a failed handshake with ``address``: ``TlsError`` (not
    retriable: a certificate or protocol problem), or ``BrokerUnavailableError``
    (retriable, reason only) when the peer just closed the connection."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        return TlsError(f"TLS handshake with {address} failed: certificate verify failed: "
                        f"{_verify_message(exc)}")
    if isinstance(exc, (ssl.SSLEOFError, ssl.SSLZeroReturnError, ConnectionError)) \
            or (isinstance(exc, ssl.SSLSyscallError)):
        return BrokerUnavailableError("closed during the TLS handshake (a plaintext listener, "
                                      "or the broker refused the connection)")
    if isinstance(exc, ssl.SSLError):
        return TlsError(f"TLS handshake with {address} failed: {reason(exc)}")
    return BrokerUnavailableError(str(exc) or type(exc).__name__)


def reason(exc: BaseException) -> str:
    """An ``ssl`` error in a few lower-case words (``tlsv13 alert certificate
    required``, ``wrong version number``)."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"certificate verify failed: {_verify_message(exc)}"
    why = getattr(exc, "reason", None)
    if why:
        return why.replace("_", " ").lower()
    return str(exc) or type(exc).__name__


def _verify_message(exc: ssl.SSLCertVerificationError) -> str:
    msg = (exc.verify_message or reason(ssl.SSLError(*exc.args[:2]))).rstrip(".")
    if not msg:
        return "unknown reason"
    return msg if msg[:2].isupper() else msg[0].lower() + msg[1:]  # "IP address mismatch"


def _load_chain(ctx: ssl.SSLContext, cert: str, key: "str | None") -> None:
    _readable(cert, "tls_cert")
    if key is not None:
        _readable(key, "tls_key")
    try:
        ctx.load_cert_chain(cert, key)
    except ssl.SSLError as exc:
        why = "tls_key does not match tls_cert" if "KEY_VALUES_MISMATCH" in str(exc) \
            else "not a PEM certificate chain and its private key"
        raise InvalidConfigError(f"tls_cert {cert!r} / tls_key {key!r}: {why} "
                                 f"({reason(exc)})") from None
    except (OSError, ValueError) as exc:
        raise InvalidConfigError(f"tls_cert {cert!r} / tls_key {key!r}: {exc}") from None


def _load_ca(ctx: ssl.SSLContext, ca: str) -> None:
    _readable(ca, "tls_ca")
    try:
        ctx.load_verify_locations(cafile=ca)
    except (ssl.SSLError, OSError, ValueError) as exc:
        raise InvalidConfigError(f"tls_ca {ca!r}: not a PEM CA bundle ({reason(exc)})") from None


def _readable(path: str, setting: str) -> None:
    if not isinstance(path, (str, os.PathLike)):
        raise InvalidConfigError(f"{setting} must be a file path, got {path!r}")
    try:
        with open(path, "rb"):
            pass
    except OSError as exc:
        raise InvalidConfigError(f"{setting} {os.fspath(path)!r}: cannot read it "
                                 f"({(exc.strerror or str(exc)).lower()})") from None


def listener_context(config) -> "ssl.SSLContext | None":
    """The listener's context (None without ``tls_cert``); raises
    ``InvalidConfigError`` for a file that is missing or not PEM."""
    if config.tls_cert is None:
        return None
    return server_context(config.tls_cert, config.tls_key, config.tls_ca, config.tls_client_auth)


def peer_context(config) -> "ssl.SSLContext | None":
    """The context a broker dials its peers with (None without TLS): trusts
    ``tls_ca`` and presents the broker's own certificate (for mutual TLS)."""
    if config.tls_cert is None:
        return None
    return client_context(config.tls_ca, config.tls_cert, config.tls_key)
