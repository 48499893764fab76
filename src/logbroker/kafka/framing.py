"""Splitting a Kafka byte stream into frames (sans-I/O, h11 style).

A Kafka frame is an int32 big-endian size, then that many bytes (a request
or response header and body). ``KafkaFrameReader`` is ``protocol.codec``'s
``FrameReader`` with the Kafka protocol's errors: the same memory rule
(memory follows the bytes received, never a length a peer announced), the
same ``receive_data`` / ``next_frame`` and ``get_buffer`` / ``buffer_updated``
(asyncio.BufferedProtocol) entry points. Our own frames also start with a
u32 length of the bytes after it, so the splitting is the same; a Kafka
frame's minimum (4 bytes: a response header) is the reader's too.

``next_frame()`` returns the next whole frame without its size prefix
(``bytes``, ``bytearray`` or, for a ``trusted`` reader, ``memoryview``) or
``NEED_DATA`` (None). ``receive_data`` / ``buffer_updated`` raise
``KafkaDecodeError`` for a size below 4 and ``KafkaFrameTooLargeError`` for
one above ``max_frame_bytes`` (a negative int32 size reads as above any
limit); after either the stream cannot be resynchronised: close it.
"""

from __future__ import annotations

from contextlib import contextmanager

from ..errors import FrameTooLargeError
from ..protocol.codec import NEED_DATA, DecodeError, FrameReader
from .errors import KafkaDecodeError

__all__ = ["NEED_DATA", "KafkaFrameReader", "KafkaFrameTooLargeError"]
DEFAULT_MAX_FRAME_BYTES = 100 << 20  # Kafka's socket.request.max.bytes (104857600)


class KafkaFrameTooLargeError(KafkaDecodeError, FrameTooLargeError):
    """A size prefix above the reader's limit (FRAME_TOO_LARGE's code)."""

    code, name = FrameTooLargeError.code, FrameTooLargeError.name


class KafkaFrameReader:
    """Frames of a Kafka byte stream; see the module docstring."""

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES, *,
                 trusted: bool = False, scratch: "bytearray | None" = None) -> None:
        if not 4 <= max_frame_bytes <= 0x7FFFFFFF:
            raise ValueError(f"max_frame_bytes {max_frame_bytes} outside 4 .. 2^31-1")
        self._reader = FrameReader(max_frame_bytes, scratch=scratch, trusted=trusted)

    @property
    def max_frame_bytes(self) -> int:
        return self._reader.max_frame_bytes

    def discard(self) -> None:
        """Drop every buffer held (the stream ended): FrameReader.discard."""
        self._reader.discard()

    @property
    def buffered_bytes(self) -> int:
        """Bytes received and not yet returned as frames."""
        return self._reader.buffered_bytes

    @property
    def held_bytes(self) -> int:
        """Memory held for the incomplete frame (at most 4x what came of it)."""
        return self._reader.held_bytes

    @property
    def in_frame(self) -> bool:
        return self._reader.in_frame

    def receive_data(self, data) -> None:
        """Feed bytes, in any split."""
        with _kafka_errors():
            self._reader.receive_data(data)

    def get_buffer(self, sizehint: int = -1) -> memoryview:
        return self._reader.get_buffer(sizehint)

    def buffer_updated(self, nbytes: int) -> None:
        """``nbytes`` were written at the start of the last ``get_buffer()``."""
        with _kafka_errors():
            self._reader.buffer_updated(nbytes)

    def next_frame(self):
        """The next whole frame (without its size prefix), or NEED_DATA."""
        return self._reader.next_frame()


@contextmanager
def _kafka_errors():
    """The framing errors of ``FrameReader`` as the Kafka layer's."""
    try:
        yield
    except DecodeError as exc:
        raise KafkaDecodeError(exc.message, context="frame") from None
    except FrameTooLargeError as exc:
        raise KafkaFrameTooLargeError(exc.message, context="frame") from None
