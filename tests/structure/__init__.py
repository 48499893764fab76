"""Structural rules of the code base, checked on the source (docs/architecture.md)."""
