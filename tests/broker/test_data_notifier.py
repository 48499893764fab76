"""DataNotifier's watchers (durability.py): a partition watched by one
fetch session holds that session, by several a set of them; notify tells
each exactly once, and the count of pairs follows watch and unwatch."""

from __future__ import annotations

from types import SimpleNamespace

from logbroker.durability import DataNotifier


class Session:
    def __init__(self) -> None:
        self.told: list = []

    def on_data(self, tp) -> None:
        self.told.append(tp)


def test_one_and_several_sessions_on_a_partition_are_each_told_once():
    n, a, b, c = DataNotifier(), Session(), Session(), Session()
    lg = SimpleNamespace(topic="t", partition=0)
    n.watch(("t", 0), a)
    n.watch(("t", 0), a)  # again: still one pair
    assert n.watching == 1
    n.notify(lg)
    assert a.told == [("t", 0)]
    n.watch(("t", 0), b)
    n.watch(("t", 0), c)
    n.watch(("t", 0), b)
    assert n.watching == 3
    n.notify(lg)
    assert (a.told, b.told, c.told) == ([("t", 0)] * 2, [("t", 0)], [("t", 0)])
    n.unwatch(("t", 0), b)
    n.unwatch(("t", 0), b)  # not watching any more: nothing changes
    n.unwatch(("t", 0), c)
    assert n.watching == 1
    n.notify(lg)
    assert (len(a.told), len(b.told), len(c.told)) == (3, 1, 1)
    n.unwatch(("t", 0), c)  # never watched it alone: nothing changes
    assert n.watching == 1
    n.unwatch(("t", 0), a)
    assert n.watching == 0
    n.notify(lg)
    assert len(a.told) == 3
    n.notify(SimpleNamespace(topic="other", partition=3))  # nobody watches it
