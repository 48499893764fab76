"""Cluster mode: metadata in etcd, leaders per partition, follower replication.

Without ``--etcd`` none of this is imported: the single node of today.
See docs/cluster.md.
"""
