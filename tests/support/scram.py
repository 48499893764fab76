"""SCRAM-SHA-256 exchanges over raw connections of our protocol (RawConn),
for tests that look at each step's answer."""

from __future__ import annotations

from scramp import ScramClient

from logbroker.protocol import messages as m


def scram_exchange(conn, user: str, password: str):
    """Handshake, SaslHandshake and the two SaslAuthenticate steps on
    ``conn`` (a fresh RawConn): the SaslAuthenticateResponse that ended the
    exchange (the first one when it carries an error, else the final one)."""
    assert conn.call(m.Handshake()).error == 0
    client = ScramClient(["SCRAM-SHA-256"], user, password)
    assert conn.call(m.SaslHandshake(mechanism="SCRAM-SHA-256")).error == 0
    first = conn.call(m.SaslAuthenticate(auth_bytes=client.get_client_first().encode()))
    if first.error:
        return first
    client.set_server_first(first.auth_bytes.decode())
    return conn.call(m.SaslAuthenticate(auth_bytes=client.get_client_final().encode()))
