"""Our side of a broker's fetch session (client/consumer/session_book.py):
what each Fetch names, forgets and expects, from what the fetcher wants and
the answers alone (pure; the broker's side runs in
tests/broker/test_fetch_sessions.py)."""

from __future__ import annotations

from logbroker.client.consumer.session_book import NO_SESSIONS_S, SessionBook
from logbroker.protocol.parts import FetchedPart

MB = 1 << 20


def want(book: SessionBook, *entries) -> None:
    """(partition, offset, gen) each."""
    for q, off, gen in entries:
        book.want(("t", q), ("t", q, off, MB), gen)


def answer(q: int, nbytes: int = 0, error: int = 0) -> FetchedPart:
    return FetchedPart("t", q, error, "", 10, 0, nbytes)


def test_the_opening_fetch_names_everything_and_the_next_only_what_changed():
    book = SessionBook()
    want(book, (0, 5, 1), (1, 7, 1), (2, 9, 1))
    sent = book.request()
    assert sent.session_epoch == 0 and [p[1] for p in sent.parts] == [0, 1, 2]
    book.answered(sent, 0, [answer(0), answer(1), answer(2)])
    want(book, (0, 5, 1), (1, 7, 1), (2, 9, 1))  # the same again: nothing to name
    quiet = book.request()
    assert quiet.session_epoch == 1 and quiet.parts == () and quiet.forget == ()
    assert [book.gen(("t", q)) for q in range(4)] == [1, 1, 1, -1]  # what an answer may hold
    book.answered(quiet, 1, [])
    want(book, (1, 8, 1), (2, 9, 2))  # an offset, a generation
    moved = book.request()
    assert moved.session_epoch == 2 and [p[1:3] for p in moved.parts] == [(1, 8), (2, 9)]
    assert book.gen(("t", 2)) == 2


def test_a_partition_answered_with_bytes_or_an_error_is_named_again():
    """The broker reads only what is named or has news: a consumer that seeks
    back to the offset it last named must name it again to get its records."""
    book = SessionBook()
    want(book, (0, 0, 1), (1, 0, 1), (2, 0, 1))
    sent = book.request()
    book.answered(sent, 0, [answer(0, nbytes=100), answer(1, error=6), answer(2)])
    assert book.gen(("t", 0)) == -1  # an answer now holds nothing for it
    want(book, (0, 0, 2))  # 0 seeked back to 0
    nxt = book.request()
    assert sorted(p[1] for p in nxt.parts) == [0, 1]


def test_partitions_no_longer_wanted_are_forgotten():
    book = SessionBook()
    want(book, (0, 0, 1), (1, 0, 1))
    book.answered(book.request(), 0, [answer(0), answer(1)])
    book.unwant(("t", 0))
    want(book, (3, 4, 1))
    sent = book.request()
    assert sent.forget == (("t", 0),) and [p[1] for p in sent.parts] == [3]
    assert book.gen(("t", 0)) == -1 and book.gen(("t", 3)) == 1


def test_an_answer_without_a_session_ends_ours_and_an_unopened_one_stops_asking():
    book = SessionBook()
    want(book, (0, 0, 1))
    first = book.request(now=100.0)
    book.answered(first, 0, [answer(0)], now=100.0)
    inc = book.request(now=101.0)
    book.answered(inc, -1, [], now=101.0)  # a quota's empty answer: reopen
    again = book.request(now=102.0)
    assert again.session_epoch == 0 and len(again.parts) == 1
    book.answered(again, -1, [answer(0)], now=102.0)  # the opening refused: no sessions there
    want(book, (1, 0, 1))
    plain = book.request(now=103.0)
    assert plain.session_epoch == -1 and len(plain.parts) == 2
    book.answered(plain, -1, [], now=103.0)
    assert book.request(now=104.0).session_epoch == -1
    assert book.request(now=102.0 + NO_SESSIONS_S + 1).session_epoch == 0


def test_reset_opens_a_new_session_with_everything_wanted():
    book = SessionBook()
    want(book, (0, 0, 1), (1, 3, 1))
    book.answered(book.request(), 0, [answer(0)])
    book.reset()
    sent = book.request()
    assert sent.session_epoch == 0 and sorted(p[1] for p in sent.parts) == [0, 1]
