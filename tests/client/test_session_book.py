"""Our side of a broker's fetch session (client/consumer/session_book.py):
what each Fetch names, forgets and expects, from the plans and answers
alone (pure; the broker's side runs in tests/broker/test_fetch_sessions.py)."""

from __future__ import annotations

from logbroker.client.consumer.session_book import NO_SESSIONS_S, SessionBook
from logbroker.protocol.parts import FetchedPart

MB = 1 << 20


def plan(*entries):
    """[((topic, partition, offset, max_bytes), gen)] from (partition, offset, gen)."""
    return [(("t", q, off, MB), gen) for q, off, gen in entries]


def answer(q: int, nbytes: int = 0, error: int = 0) -> FetchedPart:
    return FetchedPart("t", q, error, "", 10, 0, nbytes)


def test_the_opening_fetch_names_everything_and_the_next_only_what_changed():
    book = SessionBook()
    sent = book.request(plan((0, 5, 1), (1, 7, 1), (2, 9, 1)))
    assert sent.session_epoch == 0 and [p[1] for p in sent.parts] == [0, 1, 2]
    book.answered(sent, 0, [answer(0), answer(1), answer(2)])
    quiet = book.request(plan((0, 5, 1), (1, 7, 1), (2, 9, 1)))
    assert quiet.session_epoch == 1 and quiet.parts == () and quiet.forget == ()
    assert quiet.gens == {("t", 0): 1, ("t", 1): 1, ("t", 2): 1}  # the answer may hold any
    book.answered(quiet, 1, [])
    moved = book.request(plan((0, 5, 1), (1, 8, 1), (2, 9, 2)))  # an offset, a generation
    assert moved.session_epoch == 2 and [p[1:3] for p in moved.parts] == [(1, 8), (2, 9)]


def test_a_partition_answered_with_bytes_or_an_error_is_named_again():
    """The broker reads only what is named or has news: a consumer that seeks
    back to the offset it last named must name it again to get its records."""
    book = SessionBook()
    sent = book.request(plan((0, 0, 1), (1, 0, 1), (2, 0, 1)))
    book.answered(sent, 0, [answer(0, nbytes=100), answer(1, error=6), answer(2)])
    nxt = book.request(plan((0, 0, 2), (1, 0, 1), (2, 0, 1)))  # 0 seeked back to 0
    assert [p[1] for p in nxt.parts] == [0, 1]


def test_partitions_no_longer_wanted_are_forgotten():
    book = SessionBook()
    book.answered(book.request(plan((0, 0, 1), (1, 0, 1))), 0, [answer(0), answer(1)])
    sent = book.request(plan((1, 0, 1), (3, 4, 1)))
    assert sent.forget == (("t", 0),) and [p[1] for p in sent.parts] == [3]
    assert set(sent.gens) == {("t", 1), ("t", 3)}


def test_an_answer_without_a_session_ends_ours_and_an_unopened_one_stops_asking():
    book = SessionBook()
    first = book.request(plan((0, 0, 1)), now=100.0)
    book.answered(first, 0, [answer(0)], now=100.0)
    inc = book.request(plan((0, 0, 1)), now=101.0)
    book.answered(inc, -1, [], now=101.0)  # a quota's empty answer: reopen
    again = book.request(plan((0, 0, 1)), now=102.0)
    assert again.session_epoch == 0 and len(again.parts) == 1
    book.answered(again, -1, [answer(0)], now=102.0)  # the opening refused: a broker without sessions
    plain = book.request(plan((0, 0, 1), (1, 0, 1)), now=103.0)
    assert plain.session_epoch == -1 and len(plain.parts) == 2
    later = book.request(plan((0, 0, 1)), now=102.0 + NO_SESSIONS_S + 1)
    assert later.session_epoch == 0


def test_reset_opens_a_new_session():
    book = SessionBook()
    book.answered(book.request(plan((0, 0, 1))), 0, [answer(0)])
    book.reset()
    sent = book.request(plan((0, 0, 1)))
    assert sent.session_epoch == 0 and len(sent.parts) == 1
