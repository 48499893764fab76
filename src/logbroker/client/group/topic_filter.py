"""What a consumer subscribes to: a list of topic names, or a pattern.

A pattern (``re.compile(...)`` or a string) must match a topic's whole name
(``fullmatch``, as Kafka's ``Pattern.matcher(topic).matches()``); internal
topics (names starting with ``__``) never match. No I/O: the consumer's
metadata refresh (every ``metadata_max_age_ms``) hands ``match`` the topics
that exist now, so topics created later are picked up.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable

from ...errors import InvalidRequestError
from .. import validate

INTERNAL_PREFIX = "__"


@dataclass(frozen=True)
class TopicFilter:
    names: tuple = ()
    pattern: "re.Pattern | None" = None

    @classmethod
    def make(cls, topics=None, pattern=None) -> "TopicFilter":
        """From ``subscribe``'s arguments: ``topics`` (a name or names) or
        ``pattern``, not both. ``TypeError`` for wrong types,
        ``InvalidTopicError`` for a bad name, ``InvalidRequestError`` for a
        pattern that does not compile."""
        if pattern is None:
            if topics is None:
                raise TypeError("subscribe() needs topics or pattern=")
            return cls(tuple(dict.fromkeys(validate.topics(topics))))
        if topics is not None:
            raise TypeError("subscribe() takes topics or pattern=, not both")
        if isinstance(pattern, str):
            try:
                pattern = re.compile(pattern)
            except (re.error, RecursionError, OverflowError) as exc:
                raise InvalidRequestError(f"pattern {pattern[:60]!r} does not compile: "
                                          f"{exc}") from None
        if not isinstance(pattern, re.Pattern) or not isinstance(pattern.pattern, str):
            raise TypeError("pattern must be a str or a compiled str pattern, not "
                            f"{type(pattern).__name__}")
        return cls((), pattern)

    def __bool__(self) -> bool:
        return bool(self.names) or self.pattern is not None

    def match(self, available: Iterable[str]) -> tuple:
        """The subscribed topics among ``available`` (the existing topics)
        for a pattern, sorted; the names given otherwise (existing or not)."""
        if self.pattern is None:
            return self.names
        return tuple(sorted(t for t in available if not t.startswith(INTERNAL_PREFIX)
                            and self.pattern.fullmatch(t)))

    def describe(self) -> "tuple | str":
        """What ``subscription()`` shows: the names, or the pattern's text."""
        return self.names if self.pattern is None else self.pattern.pattern
