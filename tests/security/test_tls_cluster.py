"""A 3-broker cluster with mutual TLS (docs/security.md): brokers replicate
to each other over TLS, each presenting its own certificate to its peers;
a client with a certificate produces with acks=all and every replica ends up
with the same segment bytes."""

from __future__ import annotations

from tests.support.fixtures import Cluster, segment_bytes, wait_until
from logbroker import Admin, Producer
from tests.support.tls import pki, tls_flags  # noqa: F401 - the certificates fixture

RECORDS = 500


def test_a_mutual_tls_cluster_replicates(tmp_path, etcd, pki):  # noqa: F811
    flags = tuple(tls_flags(pki.server, pki.ca, client_auth=True))
    cluster = Cluster(tmp_path, etcd.url, extra=flags)
    tls = {"tls_ca": pki.ca, "tls_cert": pki.client[0], "tls_key": pki.client[1]}
    try:
        for b in cluster.brokers.values():
            b.start()
        with Admin(cluster.bootstrap, **tls) as admin:
            wait_until(lambda: len(admin.describe_cluster().brokers) == 3, 15, "3 brokers")
            admin.create_topic("replicated", 2, replication_factor=3)

            def in_sync():
                parts = [p for p in admin.describe_cluster(["replicated"]).partitions]
                return len(parts) == 2 and all(p.leader >= 0 and len(p.isr) == 3 for p in parts)
            wait_until(in_sync, 15, "every replica in sync")
        with Producer(cluster.bootstrap, **tls) as p:
            for i in range(RECORDS):
                p.send("replicated", b"r%d" % i, partition=i % 2)
            p.flush(15)

        def same_everywhere():
            for part in (0, 1):
                copies = [segment_bytes(b.data_dir, "replicated", part)
                          for b in cluster.brokers.values()]
                if not copies[0] or any(c != copies[0] for c in copies):
                    return False
            return True
        wait_until(same_everywhere, 15, "the same segments on every broker")
        for b in cluster.brokers.values():
            assert "TLS handshake with" not in b.log() and "Traceback" not in b.log()
    finally:
        cluster.close()
