package org.logbroker.spark.records;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.util.Arrays;
import java.util.concurrent.ArrayBlockingQueue;

/**
 * The whole batches of one segment file from a byte position, read with
 * positional reads: the JVM twin of Python's {@code walker.scan_file} as
 * {@code scan._batches_in} uses it (no CRC check here).
 *
 * <p>Bytes are read into a direct buffer, the window (its capacity, at
 * most {@link #WINDOW} bytes, given by the caller and reused across files),
 * starting at a batch: the channel reads straight into it (no copy through
 * a temporary buffer, no zeroed array), and the decoder copies out only
 * what a read needs. A batch found in the window ({@link Found#window})
 * is valid only until the next call to {@link #next()}. A batch larger
 * than the window is read alone into an array of its own
 * ({@link Found#buf}), which stays valid. The walk ends silently at an
 * incomplete tail (fewer bytes than a header, or than the batch its header
 * announces); an invalid header throws {@link CorruptRecordException}
 * {@code "<path> byte <position>: <reason>"}.
 *
 * <p>{@code headersOnly}: only the 61 header bytes of each batch are read
 * (one small read a batch), its bytes are not: {@link Found#buf} and
 * {@link Found#window} are null (and no window is needed).
 */
final class FileBatches {
    /** The window a split's reader allocates: 2 MiB, as Python's scan.WINDOW. */
    static final int WINDOW = 2 << 20;
    /** The largest batch read into one array (Java arrays stop below 2^31). */
    static final long MAX_READ = Integer.MAX_VALUE - 16;
    /** The smallest window allocated (a small file's). */
    static final int MIN_WINDOW = 64 << 10;
    /**
     * Full-size windows of finished readers, for the next ones: direct
     * memory is freed only by a GC, so windows are reused rather than
     * allocated for every split (at most this many wait here).
     */
    private static final ArrayBlockingQueue<ByteBuffer> POOL = new ArrayBlockingQueue<>(8);

    /**
     * One batch found: its file position, header and bytes, either
     * {@code buf[at .. at+size)} or {@code window[at .. at+size)} (absolute).
     */
    static final class Found {
        final long position;
        final BatchHeader header;
        final byte[] buf;
        final ByteBuffer window;
        final int at;

        Found(long position, BatchHeader header, byte[] buf, ByteBuffer window, int at) {
            this.position = position;
            this.header = header;
            this.buf = buf;
            this.window = window;
            this.at = at;
        }
    }

    private final FileChannel channel;
    private final long end;
    private final String path;
    private final boolean headersOnly;
    private final ByteBuffer window;
    private final byte[] head = new byte[BatchHeader.HEADER_SIZE];
    private long pos;
    private long windowStart;
    private int windowLength;

    /**
     * A walk of {@code channel}'s bytes [start, end) ({@code end}: the
     * file's size) through {@code window} (a direct buffer, whose previous
     * bytes are dropped; null when {@code headersOnly}).
     */
    FileBatches(FileChannel channel, long start, long end, String path, boolean headersOnly,
                ByteBuffer window) {
        this.channel = channel;
        this.pos = start;
        this.end = end;
        this.path = path;
        this.headersOnly = headersOnly;
        this.window = window;
    }

    /**
     * A window for a walk of {@code bytes} bytes: {@code current} when big
     * enough, else a little-endian direct buffer of {@code bytes} (at
     * least {@link #MIN_WINDOW}, at most {@link #WINDOW}; a full-size one
     * from the pool when there is one), {@code current} being released.
     */
    static ByteBuffer window(ByteBuffer current, long bytes) {
        int need = (int) Math.max(MIN_WINDOW, Math.min(WINDOW, bytes));
        if (current != null && current.capacity() >= need) {
            return current;
        }
        release(current);
        ByteBuffer pooled = need == WINDOW ? POOL.poll() : null;
        return pooled != null ? pooled : ByteBuffer.allocateDirect(need).order(ByteOrder.LITTLE_ENDIAN);
    }

    /** Give back a window (or null) no walk uses any more: pooled when full-size. */
    static void release(ByteBuffer window) {
        if (window != null && window.capacity() == WINDOW) {
            POOL.offer(window);
        }
    }

    /** The next whole batch, or null at the end of the file's whole batches. */
    Found next() {
        while (end - pos >= BatchHeader.HEADER_SIZE) {
            if (headersOnly) {
                return nextHeader();
            }
            long at = pos - windowStart;
            if (windowLength > 0 && at >= 0 && windowLength - at >= BatchHeader.HEADER_SIZE) {
                window.get((int) at, head);
                BatchHeader h = header(head, pos);
                if (h.size() <= windowLength - at) {
                    Found f = new Found(pos, h, null, window, (int) at);
                    pos += h.size();
                    return f;
                }
                if (at > 0) {  // the batch runs past this window: a new window starts at it
                    windowLength = 0;
                    continue;
                }
                return alone(h);
            }
            windowStart = pos;
            windowLength = read((int) Math.min(window.capacity(), end - pos), pos);
            if (windowLength < BatchHeader.HEADER_SIZE) {  // the file shrank under us
                byte[] got = new byte[windowLength];
                window.get(0, got);
                windowLength = 0;
                header(got, pos);  // throws: "batch header needs 61 bytes, N available"
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
        if (readAt(channel, data, data.length, pos) < size) {
            return null;  // the file shrank under us
        }
        Found f = new Found(pos, h, data, null, 0);
        pos += size;
        windowLength = 0;
        return f;
    }

    private Found nextHeader() {
        int got = readAt(channel, head, head.length, pos);
        BatchHeader h = header(got == head.length ? head : Arrays.copyOf(head, got), pos);
        if (h.size() > end - pos) {
            return null;
        }
        Found f = new Found(pos, h, null, null, 0);
        pos += h.size();
        return f;
    }

    private BatchHeader header(byte[] buf, long filePosition) {
        try {
            return BatchHeader.parse(buf, 0);
        } catch (CorruptRecordException exc) {
            throw new CorruptRecordException(path + " byte " + filePosition + ": " + exc.reason());
        }
    }

    /** Read up to {@code n} bytes at file position {@code at} into the window; the count read. */
    private int read(int n, long at) {
        window.clear().limit(n);
        try {
            while (window.hasRemaining()) {
                int got = channel.read(window, at + window.position());
                if (got < 0) {
                    break;
                }
            }
        } catch (IOException exc) {
            throw new UncheckedIOException(exc);
        }
        return window.position();
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
