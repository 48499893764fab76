"""The network: listeners of both protocols, connections, TLS handshakes,
admission, ordered answering (frames in, answers out)."""
