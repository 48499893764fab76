"""protocol/gc_pause.py: the cyclic GC is off between ``pause()`` and
``resume()`` and as the caller had it after, overlapping pauses of two
threads counted; a big frame decodes with it paused and leaves it as it
was, a bad one too."""

from __future__ import annotations

import gc

import pytest

from logbroker.protocol import codec, gc_pause
from logbroker.protocol import messages as m
from logbroker.protocol.parts import PartitionLeaders


@pytest.fixture
def gc_restored():
    was = gc.isenabled()
    yield
    if was:
        gc.enable()
    else:
        gc.disable()


def test_pause_turns_the_collector_off_and_resume_back_on(gc_restored):
    gc.enable()
    gc_pause.pause()
    try:
        assert not gc.isenabled()
        gc_pause.pause()  # nested: still off when the inner one ends
        gc_pause.resume()
        assert not gc.isenabled()
    finally:
        gc_pause.resume()
    assert gc.isenabled()


def test_a_pause_leaves_a_disabled_collector_disabled(gc_restored):
    gc.disable()
    gc_pause.pause()
    assert not gc.isenabled()
    gc_pause.resume()
    assert not gc.isenabled()


def _big_metadata(rows: int = 2000) -> bytes:
    rows = tuple(PartitionLeaders("t", q, 1, 0, (1, 2, 3), (1, 2)) for q in range(rows))
    return codec.encode_bytes(m.MetadataResponse(partitions=rows), 7)[4:]


@pytest.mark.parametrize("rows", [400, 2000])
def test_a_big_frame_decodes_with_no_collection_meanwhile(gc_restored, rows):
    """2,000 rows (~10,000 new containers) would start a young collection
    every 700: none runs while the frame decodes; at most the one the
    collector starts once it is on again, looking at them as usual. So
    do 400 (a header of ~6 KB, ~2,000 containers: a Metadata answer of
    400 partitions, a Fetch of 400 parts), which decoded 1.7x slower
    with the collector on in a process holding ~140,000 objects."""
    gc.enable()
    frame = _big_metadata(rows)
    assert len(frame) > 5 << 10  # a header past codec.BULK_HEADER
    runs = []

    def seen(phase, info):
        if phase == "start":
            runs.append(info["generation"])
    gc.collect()
    gc.callbacks.append(seen)
    try:
        env = codec.decode(frame)
    finally:
        gc.callbacks.remove(seen)
    assert len(runs) <= 1 and gc.isenabled()
    assert env.cid == 7 and len(env.message.partitions) == rows
    assert env.message.partitions[-1] == PartitionLeaders("t", rows - 1, 1, 0, (1, 2, 3), (1, 2))


def test_a_bad_big_frame_raises_and_the_collector_is_back(gc_restored):
    gc.enable()
    frame = bytearray(_big_metadata())
    frame[-3] = 0xc1  # never valid msgpack
    with pytest.raises(codec.DecodeError):
        codec.decode(bytes(frame))
    assert gc.isenabled()


def test_overlapping_pauses_of_two_threads_keep_it_off_until_the_last_ends(gc_restored):
    """The poll's pause begins, the fetch loop's begins and ends: the
    collector stays off for the poll's, and is on once that ends too."""
    import threading
    gc.enable()
    inside, leave, states = threading.Event(), threading.Event(), []

    def poll():
        gc_pause.pause()
        try:
            inside.set()
            leave.wait(10)
            states.append(gc.isenabled())
        finally:
            gc_pause.resume()
    t = threading.Thread(target=poll)
    t.start()
    assert inside.wait(10)
    gc_pause.pause()
    gc_pause.resume()
    assert not gc.isenabled()  # the other thread's pause goes on
    leave.set()
    t.join(10)
    assert states == [False] and gc.isenabled()
