"""Test certificates from trustme (skips without it): a broker's TLS files, the
module-scoped ``pki`` fixture of tests/security/test_tls*.py and the broker's
``--tls-*`` flags."""

from __future__ import annotations

import datetime
from types import SimpleNamespace

import pytest


def tls_files(tmp_path) -> tuple:
    """(CA bundle, broker certificate, its key) for 127.0.0.1, from trustme."""
    trustme = pytest.importorskip("trustme")
    ca, ca_pem, cert, key = trustme.CA(), tmp_path / "ca.pem", tmp_path / "b.crt", tmp_path / "b.key"
    leaf = ca.issue_cert("127.0.0.1")
    ca.cert_pem.write_to_path(str(ca_pem))
    leaf.cert_chain_pems[0].write_to_path(str(cert))
    leaf.private_key_pem.write_to_path(str(key))
    return ca_pem, cert, key


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """PEM files: ``ca``; the broker's cert for 127.0.0.1/localhost; a second,
    unrelated CA; certs for ``example.org`` only and an expired one; client
    certs from each CA (mutual TLS)."""
    trustme = pytest.importorskip("trustme")
    d = tmp_path_factory.mktemp("pki")
    ca, other = trustme.CA(), trustme.CA()
    now = datetime.datetime.now(datetime.timezone.utc)
    out = {}

    def save(name, leaf):
        leaf.cert_chain_pems[0].write_to_path(str(d / f"{name}.crt"))
        leaf.private_key_pem.write_to_path(str(d / f"{name}.key"))
        out[name] = (str(d / f"{name}.crt"), str(d / f"{name}.key"))

    ca.cert_pem.write_to_path(str(d / "ca.pem"))
    other.cert_pem.write_to_path(str(d / "other-ca.pem"))
    save("server", ca.issue_cert("127.0.0.1", "localhost"))
    save("elsewhere", ca.issue_cert("example.org"))
    save("expired", ca.issue_cert("127.0.0.1", not_before=now - datetime.timedelta(days=30),
                                  not_after=now - datetime.timedelta(days=1)))
    save("client", ca.issue_cert("client-1"))
    save("stranger", other.issue_cert("client-2"))
    return SimpleNamespace(ca=str(d / "ca.pem"), other_ca=str(d / "other-ca.pem"), **out)


def tls_flags(cert, ca=None, client_auth=False) -> list:
    flags = ["--tls-cert", cert[0], "--tls-key", cert[1]]
    flags += ["--tls-ca", ca] if ca else []
    return flags + (["--tls-client-auth"] if client_auth else [])
