"""``logbroker produce --transactional-id ID``: the checked input sent in
transactions (the whole input, or one per ``--transaction-records N``),
each committed when its last record is sent; a failure aborts the open one
and reports how many records earlier transactions committed (exit 1).
produce.py reads and checks the input; this module only sends it.
"""

from __future__ import annotations

import click

from ..errors import LogbrokerError, RequestTimedOutError, UnknownError


def deliver_in_transactions(topic: str, records, shape, conn: dict, path, txn_id: str,
                            per_txn: "int | None", check_partitions, progress) -> None:
    """Send ``records()`` (``(line, send kwargs)``) to ``topic`` in
    transactions of ``per_txn`` records (None: one); raises the failure as
    its own class, the message saying what was committed."""
    from .. import Producer

    wait_ms = conn["request_timeout_ms"]
    wait_s = wait_ms / 1000 + 1
    committed = transactions = 0
    with Producer(**conn, transactional_id=txn_id, max_block_ms=wait_ms,
                  delivery_timeout_ms=wait_ms) as producer:
        check_partitions(producer, topic, shape)
        in_txn = 0
        try:
            producer.init_transactions(wait_s)
            with progress(path) as advance:
                for _, rec in records():
                    if in_txn == 0:
                        producer.begin_transaction()
                    producer.send(topic, **rec)
                    in_txn += 1
                    advance(len(rec["value"] or b"") + 1)
                    if per_txn is not None and in_txn == per_txn:
                        producer.commit_transaction(wait_s)
                        committed, transactions, in_txn = committed + in_txn, transactions + 1, 0
            if in_txn:
                producer.commit_transaction(wait_s)
                committed, transactions, in_txn = committed + in_txn, transactions + 1, 0
        except (LogbrokerError, TimeoutError) as exc:
            raise _failed(producer, exc, in_txn, committed, shape.records) from None
    click.echo(f"produced {committed} record(s) to {topic} in {transactions} committed "
               f"transaction(s) of transactional id {txn_id!r}", err=True)


def _failed(producer, exc, in_txn: int, committed: int, total: int) -> LogbrokerError:
    """Abort the open transaction (best effort) and say what was committed."""
    aborted = ""
    if in_txn:
        try:
            producer.abort_transaction(5)
            aborted = f"; the open transaction ({in_txn} record(s)) was aborted"
        except (LogbrokerError, TimeoutError):
            aborted = (f"; the open transaction ({in_txn} record(s)) could not be aborted: "
                       "the coordinator aborts it after transaction_timeout_ms")
    if isinstance(exc, TimeoutError):
        exc = RequestTimedOutError(str(exc))
    elif not isinstance(exc, LogbrokerError):
        exc = UnknownError(f"{type(exc).__name__}: {exc}")
    cause = exc.__cause__
    detail = f" ({cause})" if cause is not None and str(cause) not in exc.message else ""
    return type(exc)(f"{exc.message}{detail} ({committed} of {total} record(s) committed"
                     f"{aborted})")
