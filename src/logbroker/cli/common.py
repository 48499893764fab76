"""Shared pieces of the client commands: options, output, JSON records.

Output that people scan is a rich table on stdout; with ``--json`` the same
data is JSON instead (one object per line for streams, one document for
tables). Bytes in JSON are UTF-8 text when they decode, else base64 with a
``<field>_base64: true`` marker (the same convention as ``inspect --json``);
``produce --format json`` reads exactly what ``consume --format json`` writes.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import sys
from typing import Any, Iterable

import click

from ..errors import InvalidConfigError, InvalidRequestError
from ..limits import check_partition, check_seconds, check_timestamp

MAX_TIMEOUT_S = 86_400.0


def bootstrap_option(fn):
    """Adds ``-b/--bootstrap``, ``--timeout``, the TLS options and
    ``--username``/``--password-stdin``; the command gets ``conn``: the
    keyword arguments of a client (bootstrap, timeouts, TLS, credentials). Checks them (INVALID_CONFIG / INVALID_REQUEST before any I/O) and
    keeps the client's log records off stderr: failures reach the user as
    the command's one ``error:`` line."""

    @click.option("-b", "--bootstrap", default="127.0.0.1:9555", envvar="LOGBROKER_BOOTSTRAP",
                  show_default=True,
                  help="Broker HOST:PORT, or several comma-separated (the first that answers "
                       "is asked for the cluster's metadata; env LOGBROKER_BOOTSTRAP).")
    @click.option("--timeout", type=float, default=10.0, show_default=True,
                  envvar="LOGBROKER_TIMEOUT",
                  help="Seconds to wait for the broker: to connect, per request, and for "
                       "each record's acknowledgement (0.1..86400).")
    @click.option("--tls-ca", default=None, envvar="LOGBROKER_TLS_CA", metavar="PEM",
                  help="Connect with TLS, trusting the CA bundle PEM (env LOGBROKER_TLS_CA).")
    @click.option("--tls-cert", default=None, envvar="LOGBROKER_TLS_CERT", metavar="PEM",
                  help="Client certificate for mutual TLS (env LOGBROKER_TLS_CERT).")
    @click.option("--tls-key", default=None, envvar="LOGBROKER_TLS_KEY", metavar="PEM",
                  help="Private key of --tls-cert (env LOGBROKER_TLS_KEY).")
    @click.option("--no-tls-check-hostname", "tls_check_hostname", is_flag=True, default=True,
                  flag_value=False,
                  help="Accept a trusted broker certificate that does not name the host dialled.")
    @click.option("--username", default=None, envvar="LOGBROKER_USERNAME", metavar="NAME",
                  help="Authenticate as NAME (SCRAM-SHA-256; env LOGBROKER_USERNAME); the "
                       "password from --password-stdin, env LOGBROKER_PASSWORD or a prompt.")
    @click.option("--password-stdin", is_flag=True, default=False,
                  help="Read the --username's password from the first line of stdin.")
    @functools.wraps(fn)
    def wrapper(*args, bootstrap: str, timeout: float, tls_ca, tls_cert, tls_key,
                tls_check_hostname, username, password_stdin, **kwargs):
        conn = client_conn(bootstrap, timeout)
        conn.update(tls_conn(tls_ca, tls_cert, tls_key, tls_check_hostname))
        conn.update(auth_conn(username, password_stdin))
        return fn(*args, conn=conn, **kwargs)

    return wrapper


def client_conn(bootstrap: str, timeout: float) -> dict:
    """The client keyword arguments for ``-b`` and ``--timeout``, checked."""
    from ..client.net.link import parse_bootstrap

    timeout = check_seconds(timeout, "--timeout", 0.1, MAX_TIMEOUT_S)
    try:
        parse_bootstrap(bootstrap)
    except ValueError as exc:
        raise InvalidConfigError(f"-b/--bootstrap: {exc}") from None
    quiet_client_logs()
    ms = int(timeout * 1000)
    return {"bootstrap": bootstrap, "request_timeout_ms": ms, "connect_timeout_ms": ms}


def tls_conn(ca, cert, key, check_hostname: bool) -> dict:
    """The clients' TLS keyword arguments for the TLS options (none when
    TLS is off); the files are checked here, before any I/O (INVALID_CONFIG)."""
    if ca is None and cert is None and key is None:
        return {}
    from ..client.settings import TlsSettings

    tls = TlsSettings(ca, cert, key, check_hostname)
    tls.tls_context()
    return {"tls_ca": ca, "tls_cert": cert, "tls_key": key, "tls_check_hostname": check_hostname}


def auth_conn(username: "str | None", password_stdin: bool) -> dict:
    """The clients' ``username``/``password`` (none without ``--username``).
    The password: stdin's first line with ``--password-stdin``, else env
    LOGBROKER_PASSWORD, else a prompt on a terminal; INVALID_CONFIG when
    there is none (or a password without a user name)."""
    import os

    if username is None:
        if password_stdin:
            raise InvalidConfigError("--password-stdin needs --username")
        return {}
    from ..protocol.auth_messages import check_user_name

    try:
        check_user_name(username)
    except InvalidRequestError as exc:
        raise InvalidConfigError(f"--username: {exc.message}") from None
    if password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    elif os.environ.get("LOGBROKER_PASSWORD"):
        password = os.environ["LOGBROKER_PASSWORD"]
    elif sys.stdin.isatty():
        password = click.prompt(f"Password for {username}", hide_input=True, err=True)
    else:
        password = ""
    if not password:
        raise InvalidConfigError(f"no password for --username {username}: use --password-stdin, "
                                 "env LOGBROKER_PASSWORD or a terminal")
    return {"username": username, "password": password}


def quiet_client_logs() -> None:
    """The clients log retries and failures as warnings; with no handler
    configured Python would print them on stderr next to the command's own
    ``error:`` line. A NullHandler on the ``logbroker`` logger keeps them
    off stderr (records still propagate to any handler the caller set up)."""
    import logging

    logger = logging.getLogger("logbroker")
    if not any(isinstance(h, logging.NullHandler) for h in logger.handlers):
        logger.addHandler(logging.NullHandler())


json_option = click.option("--json", "as_json", is_flag=True, help="Machine-readable JSON output.")


def table(columns: Iterable[str], rows: Iterable[Iterable[Any]], title: "str | None" = None) -> None:
    """A table on stdout for people (wide enough never to wrap cells)."""
    from rich.console import Console
    from rich.table import Table

    t = Table(title=title, box=None, header_style="bold", pad_edge=False)
    for col in columns:
        t.add_column(col, no_wrap=True, justify="right" if col.isupper() and col not in
                     ("TOPIC", "GROUP", "NAME", "CONFIG", "VALUE") else "left")
    for row in rows:
        t.add_row(*("-" if v is None else str(v) for v in row))
    Console(width=max(200, Console().width), soft_wrap=True).print(t)


def ids(broker_ids: Iterable[int]) -> str:
    """Broker ids for a table cell: ``1,2,3`` (``-`` for none)."""
    return ",".join(str(i) for i in broker_ids) or "-"


def emit_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, separators=(",", ":")) + "\n")


def bytes_fields(name: str, raw: "bytes | None") -> dict:
    """``{name: text|base64|None}`` plus ``name_base64: True`` when base64."""
    if raw is None:
        return {name: None}
    try:
        return {name: raw.decode("utf-8")}
    except UnicodeDecodeError:
        return {name: base64.b64encode(raw).decode("ascii"), f"{name}_base64": True}


def fields_bytes(obj: dict, name: str) -> "bytes | None":
    """The inverse of ``bytes_fields``; raises InvalidRequestError on bad input."""
    value = obj.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidRequestError(f"{name!r} must be a string or null")
    if obj.get(f"{name}_base64"):
        try:
            return base64.b64decode(value, validate=True)
        except binascii.Error:
            raise InvalidRequestError(f"{name!r} is marked base64 but is not") from None
    return value.encode("utf-8")


def record_json(rec) -> dict:
    """One consumed record as a JSON object."""
    out = {"topic": rec.topic, "partition": rec.partition, "offset": rec.offset,
           "timestamp": rec.timestamp}
    out.update(bytes_fields("key", rec.key))
    out.update(bytes_fields("value", rec.value))
    out["headers"] = [{"key": k, **bytes_fields("value", v)} for k, v in rec.headers]
    return out


def json_record(line: str, lineno: int) -> dict:
    """Parse one JSON line into ``send()`` keyword arguments (value, key,
    headers, timestamp_ms, partition); raises InvalidRequestError naming the
    line. ``partition`` is checked against the partition limit only (the
    caller checks it against the topic); ``topic`` and ``offset`` are
    ignored (``consume --format json`` writes them)."""
    try:
        obj = json.loads(line)
        if not isinstance(obj, dict):
            raise InvalidRequestError("not a JSON object")
        headers, given = [], obj.get("headers") or []
        if not isinstance(given, list):
            raise InvalidRequestError("headers must be a list of {key, value} objects")
        for h in given:
            if not isinstance(h, dict) or not isinstance(h.get("key"), str):
                raise InvalidRequestError("headers must be objects with a string key")
            headers.append((utf8(h["key"], "header key"), fields_bytes(h, "value")))
        ts = obj.get("timestamp")
        part = obj.get("partition")
        return {"value": fields_bytes(obj, "value"), "key": fields_bytes(obj, "key"),
                "headers": headers,
                "timestamp_ms": None if ts is None else check_timestamp(ts),
                "partition": None if part is None else check_partition(part)}
    except (ValueError, RecursionError, InvalidRequestError) as exc:
        msg = exc.message if isinstance(exc, InvalidRequestError) else str(exc)
        raise InvalidRequestError(f"line {lineno}: {msg}") from None


def utf8(text: str, what: str) -> str:
    """``text`` if it encodes as UTF-8 (the wire's strings), else INVALID_REQUEST."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidRequestError(f"{what} {text!r} is not valid UTF-8") from None
    return text
