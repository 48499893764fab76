"""The console's query parameters, checked at the edge (docs/console.md).

Every ``check_*`` takes the raw query (a mapping of str to str) and returns
plain checked values, or raises a ``LogbrokerError`` (INVALID_REQUEST,
INVALID_TOPIC, INVALID_GROUP_ID) that app.py answers as HTTP 400 with
``{"code", "message"}``. Nothing here touches the broker.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import limits
from ..errors import InvalidRequestError

MAX_PAGE_RECORDS = 50  # records one message-browser page shows at most
PAGE_BYTES = 1 << 20  # batch bytes one page reads at most
INFLATE_BYTES = 4 << 20  # bytes of compressed records one page inflates at most (its CPU bound)
VALUE_CAP = 4096  # bytes of one key, value or header shown; longer ones are truncated
FORMATS = ("text", "json", "hex")
MAX_PARAM_CHARS = 300


@dataclass(frozen=True)
class MessageQuery:
    """One message-browser page: from ``offset``, or from the first record
    at or after ``time_ms`` when ``offset`` is None."""

    topic: str
    partition: int
    offset: "int | None"
    time_ms: "int | None"
    limit: int
    format: str


def param(query, name: str, default: "str | None" = None) -> "str | None":
    value = query.get(name, default)
    if value is not None and len(value) > MAX_PARAM_CHARS:
        raise InvalidRequestError(f"{name}: at most {MAX_PARAM_CHARS} characters")
    return value


def parse_int(text: "str | None", what: str, low: int, high: int) -> int:
    """``text`` as a decimal integer in low..high."""
    if text is None or not text.strip().lstrip("-").isdigit() or not text.strip().isascii():
        raise InvalidRequestError(f"{what} must be an integer, got {text!r}")
    return limits.check_int(int(text.strip()), what, low, high)


def parse_time(text: str) -> int:
    """ms since the epoch, from digits (epoch ms) or an ISO 8601 time (UTC
    unless it names its zone)."""
    text = text.strip()
    if text.isdigit() and text.isascii():
        return limits.check_timestamp(int(text), "time")
    ms = limits.iso_ms(text, f"time must be epoch ms or ISO 8601, got {text!r}")
    return limits.check_timestamp(ms, "time")


def check_messages(query) -> MessageQuery:
    topic = limits.check_topic_name(param(query, "topic", ""))
    partition = parse_int(param(query, "partition", "0"), "partition", 0, limits.MAX_PARTITIONS - 1)
    offset_text, time_text = param(query, "offset"), param(query, "time")
    if offset_text not in (None, "") and time_text not in (None, ""):
        raise InvalidRequestError("give offset or time, not both")
    offset = time_ms = None
    if time_text not in (None, ""):
        time_ms = parse_time(time_text)
    else:
        offset = parse_int(offset_text or "0", "offset", 0, limits.MAX_OFFSET)
    limit = parse_int(param(query, "limit", "20"), "limit", 1, MAX_PAGE_RECORDS)
    fmt = param(query, "format", "text")
    if fmt not in FORMATS:
        raise InvalidRequestError(f"format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    return MessageQuery(topic, partition, offset, time_ms, limit, fmt)


def check_topic(name: str) -> str:
    return limits.check_topic_name(name)


def check_group(name: str) -> str:
    return limits.check_group_name(name)
