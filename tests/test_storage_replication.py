"""Storage primitives of replication: a follower's append of the leader's batches
(byte for byte), the epoch history (assign, end offset for an epoch, KIP-101
truncation), restarting a log at any offset, partitions hosted one by one, and a
follower log's crash recovery."""

from __future__ import annotations

import pytest

from fixtures import batch
from logbroker.errors import CorruptRecordError
from logbroker.records import format as fmt
from logbroker.records.walker import scan_batches, whole_batches


# -- whole_batches ----------------------------------------------------------------------------
def test_whole_batches_keeps_the_complete_prefix():
    one, two = batch([b"a", b"b"]), batch([b"c"])
    both = one + two
    assert bytes(whole_batches(both)) == both
    for cut in (1, len(two) - 1, len(two) - fmt.HEADER_SIZE + 1):
        assert bytes(whole_batches(both[:-cut])) == one
    assert len(whole_batches(one[:fmt.HEADER_SIZE - 1])) == 0
    assert len(whole_batches(b"")) == 0
    assert [p for p, _ in scan_batches(whole_batches(memoryview(both)[:-1]))] == [0]
    with pytest.raises(CorruptRecordError):
        whole_batches(one + b"\xff" * fmt.HEADER_SIZE)
