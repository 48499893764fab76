"""Clusters of real brokers through etcd: replication, placement, failover, the nemesis run (src/logbroker/cluster)."""
