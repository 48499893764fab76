"""Test certificates: a broker's TLS files from trustme (skips without it)."""

from __future__ import annotations

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
