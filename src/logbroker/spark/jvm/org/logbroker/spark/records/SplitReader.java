package org.logbroker.spark.records;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.NoSuchFileException;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.util.Iterator;
import java.util.List;
import java.util.NoSuchElementException;

/**
 * The batches of one planned split, read from the segment files: the JVM
 * twin of Python's {@code logbroker.spark.scan.iter_batches}, with its
 * semantics and messages.
 *
 * <p>Yields, in offset order, every batch overlapping offsets
 * {@code [start, end)}, CRC-checked and decoded (records outside the range
 * are the caller's to skip: {@link #countInRange}). Segments are
 * {@code <dataDir>/<topic>-<partition>/<20-digit base>.log}; reading starts
 * in the last segment whose base is at or below {@code start}, at byte
 * {@code hintPosition} when that segment's base is {@code hintSegment} and
 * a valid batch header whose base offset is at or below {@code start} is
 * there (else at byte 0).
 *
 * <p>Offsets of the range with no batch are data loss: offsets below the
 * first segment ("are gone (deleted by retention?)"), and, unless
 * {@code compacted} (where missing offsets are gaps left by the cleaner,
 * skipped), offsets between batches or after the last one ("are missing
 * from the segment files"); a segment file that vanished between listing
 * and opening makes the next gap data loss even when compacted. Data loss
 * throws {@link DataLossException} when {@code failOnDataLoss}, else is
 * logged (WARN, logger {@code org.logbroker.spark}) and skipped. A corrupt
 * batch throws {@link CorruptRecordException} {@code "<path> byte <pos>
 * (offset <base>): <reason>"} (an invalid header: {@code "<path> byte
 * <pos>: <reason>"}). Exceptions surface from {@link #hasNext()}; after one
 * the reader is finished and its file closed.
 *
 * <p>{@code headersOnly}: batches are found and the data-loss rules apply,
 * but only headers are read (no record bytes, no CRC check): each yielded
 * batch is {@link DecodedBatch#headerOnly}, for counting records from
 * headers. {@link #columns(int)}: the columns decoded (default all); every
 * batch yielded is still CRC-checked over all its bytes and its layout
 * checked whole ({@link Columns}). Record bytes are read through one direct
 * window (FileBatches), taken at the first file and given back when the
 * reader finishes. Files are opened one at a time and closed when the walk
 * leaves them, at the end, on an exception, or by {@link #close()}. Not
 * thread-safe.
 */
public final class SplitReader implements Iterator<DecodedBatch>, AutoCloseable {
    private final String directory;
    private final String topic;
    private final int partition;
    private final long start;
    private final long end;
    private final long hintSegment;
    private final long hintPosition;
    private final boolean failOnDataLoss;
    private final boolean compacted;
    private final boolean headersOnly;
    private int columns = Columns.ALL;
    private long[] aborted = new long[0];
    private int nextAborted;
    private final java.util.HashSet<Long> aborting = new java.util.HashSet<>();

    private List<SegmentFiles.Segment> segments;
    private int first;
    private int index;
    private long expect;
    private boolean vanished;
    private boolean started;
    private boolean finished;
    private FileChannel channel;
    private String path;
    private FileBatches walk;
    private ByteBuffer window;
    private DecodedBatch ahead;

    public SplitReader(String dataDir, String topic, int partition, long start, long end,
                       long hintSegment, long hintPosition, boolean failOnDataLoss,
                       boolean compacted, boolean headersOnly) {
        this.directory = SegmentFiles.partitionDir(dataDir, topic, partition);
        this.topic = topic;
        this.partition = partition;
        this.start = start;
        this.end = end;
        this.hintSegment = hintSegment;
        this.hintPosition = hintPosition;
        this.failOnDataLoss = failOnDataLoss;
        this.compacted = compacted;
        this.headersOnly = headersOnly;
    }

    /**
     * Decode only {@code columns} ({@link Columns} flags) of each batch
     * (ignored when headers only); before the first {@link #hasNext()}.
     * Returns this reader.
     */
    public SplitReader columns(int columns) {
        if (started) {
            throw new IllegalStateException("columns are chosen before the first batch is read");
        }
        this.columns = columns;
        return this;
    }

    /**
     * Leave out the batches of aborted transactions (read_committed), by
     * Kafka's rule as Python's {@code records.txn_filter.AbortedFilter}:
     * {@code pairs} holds {@code producerId, firstOffset} pairs (the
     * planner's {@code Split.aborted}); once a batch reaching
     * {@code firstOffset} is met, that producer's transactional batches are
     * skipped until its next control batch (its abort marker). Control
     * batches (markers) are skipped in every case. Before the first
     * {@link #hasNext()}. Returns this reader.
     */
    public SplitReader aborted(long[] pairs) {
        if (started) {
            throw new IllegalStateException("aborted transactions are given before the first batch is read");
        }
        if (pairs.length % 2 != 0) {
            throw new IllegalArgumentException("aborted transactions come in (producer, first offset) pairs");
        }
        Integer[] order = new Integer[pairs.length / 2];
        for (int i = 0; i < order.length; i++) order[i] = i;
        java.util.Arrays.sort(order, (a, b) -> Long.compare(pairs[2 * a + 1], pairs[2 * b + 1]));
        aborted = new long[pairs.length];
        for (int i = 0; i < order.length; i++) {
            aborted[2 * i] = pairs[2 * order[i]];
            aborted[2 * i + 1] = pairs[2 * order[i] + 1];
        }
        return this;
    }

    /** A batch readers never see: a marker, or a batch of an aborted transaction. */
    private boolean hidden(BatchHeader h) {
        boolean control = h.isControl();
        if (!control && !h.isTransactional()) {
            return false;
        }
        long last = h.lastOffset();
        while (nextAborted < aborted.length && aborted[nextAborted + 1] <= last) {
            aborting.add(aborted[nextAborted]);
            nextAborted += 2;
        }
        if (control) {
            aborting.remove(h.producerId);
            return true;
        }
        return aborting.contains(h.producerId);
    }

    /**
     * Records of a batch in offsets [start, end): the overlap of its
     * [base, base + count) with the range (0 when none).
     */
    public static long countInRange(BatchHeader h, long start, long end) {
        return h.countIn(start, end);
    }

    @Override
    public boolean hasNext() {
        if (ahead != null) {
            return true;
        }
        if (finished) {
            return false;
        }
        try {
            ahead = advance();
        } catch (RuntimeException exc) {
            finished = true;
            closeQuietly();
            release();
            throw exc;
        }
        if (ahead == null) {
            finished = true;
            closeQuietly();
            release();
        }
        return ahead != null;
    }

    @Override
    public DecodedBatch next() {
        if (!hasNext()) {
            throw new NoSuchElementException();
        }
        DecodedBatch out = ahead;
        ahead = null;
        return out;
    }

    @Override
    public void close() {
        finished = true;
        ahead = null;
        closeQuietly();
        release();
    }

    private void lost(long lo, long hi, String why) {
        DataLossException.report(failOnDataLoss,
                topic + "-" + partition + " offsets [" + lo + ", " + hi + ") " + why);
    }

    /** Pick the first segment and the first expected offset; false when there is nothing to read. */
    private boolean begin() {
        segments = SegmentFiles.list(directory);
        first = -1;
        for (int i = 0; i < segments.size(); i++) {
            if (segments.get(i).base <= start) {
                first = i;
            }
        }
        if (first < 0) {
            if (segments.isEmpty() || segments.get(0).base >= end) {
                lost(start, end, "are gone (deleted by retention?)");
                return false;
            }
            lost(start, segments.get(0).base, "are gone (deleted by retention?)");
            first = 0;
            expect = segments.get(0).base;
        } else {
            expect = start;
        }
        index = first;
        return true;
    }

    private DecodedBatch advance() {
        if (!started) {
            started = true;
            if (!begin()) {
                return null;
            }
        }
        while (true) {
            if (walk == null && !open()) {
                if (expect < end && (vanished || !compacted)) {
                    lost(expect, end, "are missing from the segment files");
                }
                return null;
            }
            FileBatches.Found f = walk.next();
            if (f == null) {
                closeQuietly();
                index++;
                continue;
            }
            BatchHeader h = f.header;
            if (h.nextOffset() <= expect) {
                continue;
            }
            if (h.baseOffset >= end) {  // past the range: offsets before it still count
                if (expect < end && (vanished || !compacted)) {
                    lost(expect, end, "are missing from the segment files");
                }
                return null;
            }
            if (h.baseOffset > expect && (vanished || !compacted)) {
                lost(expect, h.baseOffset, "are missing from the segment files");
            }
            vanished = false;
            if (hidden(h)) {  // a marker, or an aborted transaction's batch: no records here
                expect = h.nextOffset();
                continue;
            }
            DecodedBatch batch = headersOnly ? DecodedBatch.headerOnly(h) : decode(f);
            expect = h.nextOffset();
            return batch;
        }
    }

    private DecodedBatch decode(FileBatches.Found f) {
        try {
            if (f.buf != null) {
                return DecodedBatch.decode(f.buf, f.at, f.header, true, columns);
            }
            return DecodedBatch.decodeCopy(f.window, f.at, f.header, columns);
        } catch (CorruptRecordException exc) {
            throw new CorruptRecordException(path + " byte " + f.position + " (offset "
                    + f.header.baseOffset + "): " + exc.getMessage());
        }
    }

    /** Open the segment at {@code index} (skipping vanished ones); false past the range's segments. */
    private boolean open() {
        while (index < segments.size()) {
            SegmentFiles.Segment s = segments.get(index);
            if (s.base >= end) {
                return false;
            }
            FileChannel ch;
            try {
                ch = FileChannel.open(Paths.get(s.path), StandardOpenOption.READ);
            } catch (NoSuchFileException exc) {  // deleted after listing: retention
                vanished = true;
                index++;
                continue;
            } catch (IOException exc) {
                throw new UncheckedIOException(exc);
            }
            channel = ch;
            path = s.path;
            try {
                long size = ch.size();
                long pos = s.base == hintSegment && index == first ? hintPosition : 0;
                long from = validHint(ch, pos);
                if (!headersOnly) {
                    window = FileBatches.window(window, size - from);
                }
                walk = new FileBatches(ch, from, size, path, headersOnly, window);
            } catch (IOException exc) {
                throw new UncheckedIOException(exc);
            }
            return true;
        }
        return false;
    }

    /** Give the window back (the walk is over: no batch refers to it). */
    private void release() {
        walk = null;
        FileBatches.release(window);
        window = null;
    }

    /** {@code pos} when a valid header of a batch at or below start is there, else 0. */
    private long validHint(FileChannel ch, long pos) {
        if (pos <= 0) {
            return 0;
        }
        byte[] head = new byte[BatchHeader.HEADER_SIZE];
        int got = FileBatches.readAt(ch, head, head.length, pos);
        if (got < head.length) {
            return 0;
        }
        try {
            return BatchHeader.parse(head, 0).baseOffset <= start ? pos : 0;
        } catch (CorruptRecordException exc) {
            return 0;
        }
    }

    private void closeQuietly() {
        walk = null;
        if (channel != null) {
            try {
                channel.close();
            } catch (IOException ignored) {
                // a read-only file: nothing was written that a close could lose
            }
            channel = null;
        }
    }
}
