"""Consumer groups: the coordinator of membership and committed offsets,
kept in the internal compacted offsets topic (docs/groups.md)."""
