"""Errors of the Kafka codec, under the one registry (``logbroker.errors``).

``KafkaDecodeError`` is an INVALID_REQUEST (42) naming the field path of the
problem (``topic_data[0].partition_data[1].records: length 500 exceeds the 12
bytes left``); the decoder raises nothing else, whatever the bytes.
``KafkaUnsupportedVersionError`` is the one decode failure that still carries
a readable request header, so a listener can answer it (ApiVersions) or close
the connection (any other API, as Kafka does). ``KafkaEncodeError`` is a value
our own code tried to encode that its schema does not allow.
"""

from __future__ import annotations

from ..errors import InvalidRequestError, UnsupportedVersionError


class _Located(InvalidRequestError):
    """An error whose ``path`` locates the field (``a[0].b``); ``context``
    names the message (``Produce v7 request``)."""

    def __init__(self, detail: str, path: str = "", context: str = "") -> None:
        self.detail, self.path, self.context = detail, path, context
        where = ": ".join(p for p in (context, path) if p)
        super().__init__(f"{where}: {detail}" if where else detail)

    def within(self, segment: str) -> "KafkaDecodeError":
        """The same error one level up: ``segment`` prefixed to the path."""
        if not self.path:
            path = segment
        elif self.path.startswith("["):
            path = segment + self.path
        else:
            path = f"{segment}.{self.path}"
        return type(self)(self.detail, path, self.context)

    def in_context(self, context: str) -> "KafkaDecodeError":
        return type(self)(self.detail, self.path, context)


class KafkaDecodeError(_Located):
    """Bytes that are not a valid Kafka message; ``path`` locates the field."""


class KafkaUnsupportedVersionError(KafkaDecodeError):
    """A request for an API key or version outside the profile; ``header``
    (a ``RequestHeader``) was readable. Its code is UNSUPPORTED_VERSION's (35),
    also given as ``cause``."""

    code, name = UnsupportedVersionError.code, UnsupportedVersionError.name

    def __init__(self, detail: str, header=None) -> None:
        super().__init__(detail)
        self.header = header
        self.cause = UnsupportedVersionError(detail)

    def within(self, segment: str) -> "KafkaUnsupportedVersionError":
        return self

    def in_context(self, context: str) -> "KafkaUnsupportedVersionError":
        return self


class KafkaEncodeError(_Located):
    """A value that its field's type or version does not allow (our bug)."""
