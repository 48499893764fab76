"""What a consumer-protocol member subscribes to: topic names and/or a
regular expression (ConsumerGroupHeartbeat v1), sans-I/O.

Regexes are RE2's syntax, as Kafka's (RE2/J), and matched by RE2 in linear
time: a member's pattern cannot make the coordinator backtrack for ever
(Python's ``re`` could, with ``(a+)+$``). A pattern is compiled once per
process (a small LRU) and must match a whole topic name. Internal topics
(``__``-prefixed) are never matched by a regex, as in Kafka.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import re2

from ..errors import InvalidRegularExpressionError, InvalidRequestError

MAX_REGEX_CHARS = 1_000
MAX_TOPICS = 1_000  # names in one subscription

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a bad pattern is the member's error, not a log line of RE2's


@functools.lru_cache(maxsize=256)
def compile_regex(pattern: str):
    """The compiled pattern, or INVALID_REGULAR_EXPRESSION naming the rule it breaks."""
    if len(pattern) > MAX_REGEX_CHARS:
        raise InvalidRegularExpressionError(f"a topic regex of {len(pattern)} characters "
                                            f"(limit {MAX_REGEX_CHARS})")
    try:
        return re2.compile(pattern, _OPTIONS)
    except re2.error as exc:
        raise InvalidRegularExpressionError(f"topic regex {pattern!r:.100} is not valid RE2 "
                                            f"syntax: {exc}") from None


@dataclass(frozen=True)
class Subscription:
    names: tuple = ()
    regex: "str | None" = None

    def changed(self, names: "tuple | None", regex: "str | None") -> "Subscription":
        """This subscription with the fields a heartbeat gave (None: unchanged;
        an empty regex clears it)."""
        if names is not None and len(names) > MAX_TOPICS:
            raise InvalidRequestError(f"{len(names)} subscribed topics (limit {MAX_TOPICS})")
        if regex:
            compile_regex(regex)
        return Subscription(self.names if names is None else tuple(sorted(set(names))),
                            self.regex if regex is None else (regex or None))

    def topics(self, topics) -> list:
        """The existing topics subscribed to (``topics``: ``count(name)``,
        ``names()``), in name order."""
        found = {n for n in self.names if topics.count(n)}
        if self.regex:
            rx = compile_regex(self.regex)
            found |= {n for n in topics.names() if not n.startswith("__") and rx.fullmatch(n)}
        return sorted(found)
