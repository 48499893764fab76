"""Wire protocol: frozen messages and a sans-I/O codec (docs/protocol.md)."""
