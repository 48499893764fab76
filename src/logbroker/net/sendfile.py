"""Sending segment file slices to a client connection (a Fetch answer's payload).

On plain TCP a slice goes as it lies on disk (``os.sendfile``, then
``loop.sendfile`` for what the socket did not take at once); under TLS the
connection reads the slices into bytes first (``read_slices``):
``sendfile`` would bypass the encryption. An answer of many slices is
sent corked (``cork``): the kernel builds full segments across them
instead of pushing each slice as its own (a first Fetch of 1,000
partitions' slices of ~12 KB: ~10% less time from request to answer).
"""

from __future__ import annotations

import asyncio
import errno
import os
import socket

from ..storage.results import FileSlice

_NO_SENDFILE = (errno.EINVAL, errno.ENOSYS, errno.ENOTSOCK, errno.EOPNOTSUPP)


async def send_slices(transport, buffers: list) -> None:
    """Write ``buffers`` (bytes, and file slices sent as they lie on disk)
    in order. While the transport has nothing buffered (so the bytes stay
    in order) a slice goes straight to the socket by ``os.sendfile``, as
    far as its buffer takes it: a fetch of many small slices costs one
    system call per slice, not a trip through ``loop.sendfile`` (pause and
    resume reading, a ``fstat``, futures) nor a coroutine of its own. The
    rest goes through ``loop.sendfile``, which waits for the socket (and
    falls back to read + write where it must). Raises ``OSError`` /
    ``RuntimeError`` when the peer is gone."""
    sock = transport.get_extra_info("socket")
    for buf in buffers:
        if buf.__class__ is not FileSlice:
            transport.write(buf)
            continue
        sent = _sendfile_now(sock, transport, buf)
        if sent < buf.size:
            loop = asyncio.get_running_loop()
            with buf.fd() as fd, os.fdopen(fd, "rb", buffering=0, closefd=False) as fh:
                await loop.sendfile(transport, fh, buf.position + sent, buf.size - sent)


def _sendfile_now(sock, transport, part: FileSlice) -> int:
    """Bytes of ``part`` sent to ``sock`` without waiting (0 when the
    transport has bytes buffered or sendfile does not apply to this socket
    or file)."""
    if sock is None or transport.is_closing() or transport.get_write_buffer_size():
        return 0
    out, sent = sock.fileno(), 0
    with part.fd() as fd:
        while sent < part.size:
            try:
                n = os.sendfile(out, fd, part.position + sent, part.size - sent)
            except (BlockingIOError, InterruptedError):
                break
            except OSError as exc:
                if sent == 0 and exc.errno in _NO_SENDFILE:
                    break  # loop.sendfile falls back to read + write
                raise
            if n == 0:
                break  # the file is shorter than the slice: loop.sendfile reports it
            sent += n
    return sent


def cork(transport, on: bool) -> bool:
    """Set (``on``) or clear ``TCP_CORK`` on the transport's socket: while
    set, what is written waits to fill a segment (at most 200 ms, Linux);
    clearing it sends what waits. False where it does not apply (no TCP
    socket, not Linux, the socket already gone)."""
    sock = transport.get_extra_info("socket")
    option = getattr(socket, "TCP_CORK", None)
    if sock is None or option is None or sock.family not in (socket.AF_INET, socket.AF_INET6):
        return False
    try:
        sock.setsockopt(socket.IPPROTO_TCP, option, 1 if on else 0)
    except OSError:
        return False
    return True


def read_slices(buffers: list) -> "list | None":
    """``buffers`` with each file slice read into bytes (a TLS answer);
    None if a segment is shorter than its slice (the frame's length would
    be wrong)."""
    out = []
    for buf in buffers:
        if isinstance(buf, FileSlice):
            size, buf = buf.size, buf.read()
            if len(buf) != size:
                return None
        out.append(buf)
    return out
