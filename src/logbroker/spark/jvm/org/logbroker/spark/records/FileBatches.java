package org.logbroker.spark.records;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.util.Arrays;

/**
 * The whole batches of one segment file from a byte position, read with
 * positional reads: the JVM twin of Python's {@code walker.scan_file} as
 * {@code scan._batches_in} uses it (no CRC check here).
 *
 * <p>Bytes are read in windows of {@link #WINDOW} bytes starting at a
 * batch; a batch larger than a window is read alone into its own buffer.
 * Each window is a fresh array, never reused, so a batch (and the column
 * views decoded from it) stays valid after the walk moves on. The walk
 * ends silently at an incomplete tail (fewer bytes than a header, or than
 * the batch its header announces); an invalid header throws
 * {@link CorruptRecordException} {@code "<path> byte <position>: <reason>"}.
 *
 * <p>{@code headersOnly}: only the 61 header bytes of each batch are read
 * (one small read a batch), its bytes are not: {@link Found#buf} is null.
 */
final class FileBatches {
    /** Window of one read: 2 MiB, as Python's scan.WINDOW. */
    static final int WINDOW = 2 << 20;
    /** The largest batch read into one array (Java arrays stop below 2^31). */
    static final long MAX_READ = Integer.MAX_VALUE - 16;

    /** One batch found: its file position, header and bytes ({@code buf[at .. at+size)}). */
    static final class Found {
        final long position;
        final BatchHeader header;
        final byte[] buf;
        final int at;

        Found(long position, BatchHeader header, byte[] buf, int at) {
            this.position = position;
            this.header = header;
            this.buf = buf;
            this.at = at;
        }
    }

    private final FileChannel channel;
    private final long end;
    private final String path;
    private final boolean headersOnly;
    private long pos;
    private byte[] window;
    private long windowStart;
    private int windowLength;

    /** A walk of {@code channel}'s bytes [start, end) ({@code end}: the file's size). */
    FileBatches(FileChannel channel, long start, long end, String path, boolean headersOnly) {
        this.channel = channel;
        this.pos = start;
        this.end = end;
        this.path = path;
        this.headersOnly = headersOnly;
    }

    /** The next whole batch, or null at the end of the file's whole batches. */
    Found next() {
        while (end - pos >= BatchHeader.HEADER_SIZE) {
            if (headersOnly) {
                return nextHeader();
            }
            long at = pos - windowStart;
            if (window != null && at >= 0 && windowLength - at >= BatchHeader.HEADER_SIZE) {
                BatchHeader h = header(window, (int) at, pos);
                if (h.size() <= windowLength - at) {
                    Found f = new Found(pos, h, window, (int) at);
                    pos += h.size();
                    return f;
                }
                if (at > 0) {  // the batch runs past this window: a new window starts at it
                    window = null;
                    continue;
                }
                return alone(h);
            }
            window = new byte[(int) Math.min(WINDOW, end - pos)];
            windowStart = pos;
            windowLength = read(window, window.length, pos);
            if (windowLength < BatchHeader.HEADER_SIZE) {  // the file shrank under us
                header(window, 0, pos);  // throws: "batch header needs 61 bytes, N available"
            }
        }
        return null;
    }

    /** A batch larger than the window it starts: read alone (or the torn tail: null). */
    private Found alone(BatchHeader h) {
        long size = h.size();
        if (size > end - pos) {
            return null;
        }
        if (size > MAX_READ) {
            throw new CorruptRecordException(path + " byte " + pos + ": batch of " + size
                    + " bytes is too large to read");
        }
        byte[] data = new byte[(int) size];
        if (read(data, data.length, pos) < size) {
            return null;  // the file shrank under us
        }
        Found f = new Found(pos, h, data, 0);
        pos += size;
        window = null;
        return f;
    }

    private Found nextHeader() {
        byte[] head = new byte[BatchHeader.HEADER_SIZE];
        int got = read(head, head.length, pos);
        BatchHeader h = header(Arrays.copyOf(head, got), 0, pos);
        if (h.size() > end - pos) {
            return null;
        }
        Found f = new Found(pos, h, null, 0);
        pos += h.size();
        return f;
    }

    private BatchHeader header(byte[] buf, int at, long filePosition) {
        try {
            return BatchHeader.parse(buf, at);
        } catch (CorruptRecordException exc) {
            throw new CorruptRecordException(path + " byte " + filePosition + ": " + exc.reason());
        }
    }

    /** Read up to {@code n} bytes at file position {@code at} into {@code buf}; the count read. */
    private int read(byte[] buf, int n, long at) {
        return readAt(channel, buf, n, at);
    }

    /** Positional read of up to {@code n} bytes (fewer only at the end of the file). */
    static int readAt(FileChannel channel, byte[] buf, int n, long at) {
        ByteBuffer bb = ByteBuffer.wrap(buf, 0, n);
        try {
            while (bb.hasRemaining()) {
                int got = channel.read(bb, at + bb.position());
                if (got < 0) {
                    break;
                }
            }
        } catch (IOException exc) {
            throw new UncheckedIOException(exc);
        }
        return bb.position();
    }
}
