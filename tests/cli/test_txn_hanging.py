"""``logbroker transactions hanging`` and ``abort`` (api/txn_admin.py):
a transaction left open on a partition (here written by a broker whose
batches are not verified, as one from before KIP-890 part 1 could be) is
listed with its age and ended by an operator's abort marker; the LSO moves
on. Real broker, the CLI in this process."""

from __future__ import annotations

import json
import time

from logbroker import Admin
from logbroker.protocol import messages as m
from logbroker.records.builder import build_batch
from tests.support.fixtures import FAST, BrokerProcess, RawConn, invoke_cli


def test_a_hanging_transaction_is_listed_and_aborted(tmp_path):
    with BrokerProcess(tmp_path / "data", config={
            "transaction_partition_verification_enable": False}) as b:
        conn = RawConn(b.port)
        assert conn.call(m.CreateTopics(topics=(("hung", 2, {}),))).topics[0][1] == 0
        old = int(time.time() * 1000) - 120_000
        data = build_batch([(b"v", None, (), old)], producer_id=4242, producer_epoch=3,
                           base_sequence=0, transactional=True)
        resp = conn.call(m.Produce(acks=-1, parts=(("hung", 1, len(data)),), payload=(data,),
                                   transactional_id="gone"))
        assert resp.parts[0].error == 0, resp

        def lso() -> int:
            return conn.call(m.ListOffsets(parts=(("hung", 1, m.LATEST),),
                                           isolation=1)).parts[0][4]
        assert lso() == 0
        got = invoke_cli(["transactions", "hanging", "--max-age-ms", "60000", "--json"],
                         bootstrap=b.bootstrap)
        assert got.exit_code == 0, got.output
        rows = json.loads(got.stdout)
        assert [(r["topic"], r["partition"], r["producer_id"], r["producer_epoch"],
                 r["first_offset"]) for r in rows] == [("hung", 1, 4242, 3, 0)]
        assert rows[0]["age_ms"] >= 120_000
        quiet = invoke_cli(["transactions", "hanging", "--json"], bootstrap=b.bootstrap)
        assert json.loads(quiet.stdout) == []  # younger than the default 15 minutes
        # a producer without an open transaction there: refused, nothing written
        bad = invoke_cli(["transactions", "abort", "--topic", "hung", "--partition", "0",
                          "--producer-id", "4242"], bootstrap=b.bootstrap)
        assert bad.exit_code == 1 and "INVALID_TXN_STATE" in bad.output
        none = invoke_cli(["transactions", "abort", "--topic", "hung", "--partition", "1",
                           "--start-offset", "5"], bootstrap=b.bootstrap)
        assert none.exit_code == 1 and "no open transaction starts at offset 5" in none.output
        done = invoke_cli(["transactions", "abort", "--topic", "hung", "--partition", "1",
                           "--start-offset", "0"], bootstrap=b.bootstrap)
        assert done.exit_code == 0, done.output
        assert lso() == 2  # the record and the abort marker: nothing open
        with Admin(b.bootstrap, **FAST) as admin:
            assert admin.describe_producers([("hung", 0), ("hung", 1)]) == {
                ("hung", 0): [], ("hung", 1): []}
        fetched = conn.call(m.Fetch(max_wait_ms=0, isolation=1,
                                    parts=(("hung", 1, 0, 1 << 20),)))
        assert [tuple(a) for a in fetched.txn[0].aborted] == [(4242, 0)]
        conn.close()
