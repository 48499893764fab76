"""TLS and TLS+SCRAM vs plaintext (issue 14): ``python -m bench.tls``."""
