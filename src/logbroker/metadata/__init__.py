"""Cluster metadata behind one interface (interface.py): the single node's
(LMDB, local.py) and the cluster's (etcd view + controller, cluster.py)."""
