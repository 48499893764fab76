"""Consumer groups, client side: membership, heartbeats, the coordinator,
assignors, rebalance changes, committed offsets."""
