"""What every message of our protocol is: ``Message`` and ``Response``
(each class names its ``API`` number and ``SCHEMA``), the registries of
request and response classes by API number, and the fields every response
carries (``RESP``: error code and message). The message modules register
their classes here as they are defined."""

from __future__ import annotations

from typing import Any, ClassVar

REQUESTS: dict[int, type] = {}
RESPONSES: dict[int, type] = {}


def register(cls):
    """Class decorator: ``cls`` joins REQUESTS or RESPONSES under its API number."""
    (RESPONSES if cls.RESPONSE else REQUESTS)[cls.API] = cls
    return cls


class Message:
    """``LATER``: fields added to the message after it first shipped; a peer
    of an older release leaves them out, and the decoder then takes the
    dataclass default (every other field of ``SCHEMA`` is required)."""

    API: ClassVar[int]
    RESPONSE: ClassVar[bool] = False
    SCHEMA: ClassVar[dict[str, Any]]
    HAS_PAYLOAD: ClassVar[bool] = False
    LATER: ClassVar[frozenset] = frozenset()


class Response(Message):
    RESPONSE = True


RESP = {"error": int, "message": str}
