package org.logbroker.spark.records;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * One record batch decoded into columns: record {@code i} has offset
 * {@code header.baseOffset + i}, timestamp {@code timestamps[i]} (ms),
 * key {@code keys} entry i, value {@code values} entry i, and headers
 * {@code headerStarts[i] .. headerStarts[i+1]-1} of {@code headerKeys}
 * (UTF-8, never null, checked) and {@code headerValues}.
 *
 * <p>{@code headerStarts} ({@code n+1} cumulative counts starting at 0),
 * {@code headerKeys} and {@code headerValues} are all null when no record
 * has a header. A batch made by {@link #headerOnly} has only its header
 * (every other field null). A batch decoded for some {@link Columns} has
 * null in the fields of the others ({@link #columns} says which were
 * decoded; a Kafka batch is always decoded whole). {@link #header} is the
 * batch's header as stored
 * (for a Kafka batch: magic 2, its own attributes; Python's
 * {@code decode_kafka} replaces first_timestamp by the first record's, here
 * the header is kept and {@link #timestamps} hold the records' truth).
 *
 * <p>Decoding checks every layout rule of Python's {@code decode_ours} /
 * {@code kafka_v2.walk} up front (including the per-entry rules Python
 * checks when entries are read: offsets and header counts in order, header
 * keys UTF-8; of the columns decoded) and throws
 * {@link CorruptRecordException}, never another exception, for malformed
 * bytes.
 */
public final class DecodedBatch {
    static final int COL_ABSENT = 0;
    static final int COL_DENSE = 1;
    static final int COL_NULLABLE = 2;

    public final BatchHeader header;
    /** The {@link Columns} flags of the fields decoded (NONE for a header-only batch). */
    public final int columns;
    public final long[] timestamps;
    public final Binary keys;
    public final Binary values;
    public final int[] headerStarts;
    public final Binary headerKeys;
    public final Binary headerValues;
    private final boolean headerOnly;

    /** A batch decoded whole (every column). */
    DecodedBatch(BatchHeader header, long[] timestamps, Binary keys, Binary values,
                 int[] headerStarts, Binary headerKeys, Binary headerValues) {
        this(header, Columns.ALL, false, timestamps, keys, values, headerStarts, headerKeys, headerValues);
    }

    private DecodedBatch(BatchHeader header, int columns, boolean headerOnly, long[] timestamps,
                         Binary keys, Binary values, int[] headerStarts, Binary headerKeys,
                         Binary headerValues) {
        this.header = header;
        this.columns = columns;
        this.headerOnly = headerOnly;
        this.timestamps = timestamps;
        this.keys = keys;
        this.values = values;
        this.headerStarts = headerStarts;
        this.headerKeys = headerKeys;
        this.headerValues = headerValues;
    }

    /** A batch of which only the header was read (headers-only reads, e.g. COUNT). */
    public static DecodedBatch headerOnly(BatchHeader header) {
        return new DecodedBatch(header, Columns.NONE, true, null, null, null, null, null, null);
    }

    public boolean isHeaderOnly() {
        return headerOnly;
    }

    /** The number of records (the header's count). */
    public int recordCount() {
        return (int) header.recordCount;
    }

    /** {@link #decode(byte[], int, BatchHeader, boolean, int)} of every column. */
    public static DecodedBatch decode(byte[] buf, int pos, BatchHeader h, boolean verifyCrc) {
        return decode(buf, pos, h, verifyCrc, Columns.ALL);
    }

    /**
     * Decode the batch at {@code buf[pos .. pos + h.size())}, {@code h}
     * being {@code BatchHeader.parse(buf, pos)}; bytes after it are ignored.
     * Dispatches on the magic: 1 our columnar section (the {@code columns}
     * asked for), 2 a Kafka v2 section (decompressed, at most 256 MiB;
     * every column). The CRC is checked first when {@code verifyCrc}.
     * Positions in error messages are relative to the batch
     * ({@code "CRC mismatch at position 0 ..."}), as Python's
     * {@code decode_batch} of the batch's own bytes words them. For our
     * format the columns are views of {@code buf}: it must not change while
     * the result is used.
     */
    public static DecodedBatch decode(byte[] buf, int pos, BatchHeader h, boolean verifyCrc, int columns) {
        checkSize(buf.length, pos, h);
        if (verifyCrc) {
            h.checkCrc(buf, pos, 0);
        }
        if (h.magic != BatchHeader.MAGIC) {
            return KafkaBatch.decode(buf, pos, h);
        }
        return decodeOurs(ByteBuffer.wrap(buf).order(ByteOrder.LITTLE_ENDIAN), buf, pos, h, columns);
    }

    /**
     * Decode the batch at {@code buf[pos .. pos + h.size())} (absolute
     * indexes; position and limit are ignored), CRC-checked over all its
     * bytes, as {@link #decode(byte[], int, BatchHeader, boolean, int)}
     * does, except that nothing of the result refers to {@code buf}: the
     * parts of the columns asked for are copied into arrays of their own
     * (a Kafka batch: the whole batch, then decoded as always), so
     * {@code buf} may be reused once this returns.
     */
    public static DecodedBatch decodeCopy(ByteBuffer buf, int pos, BatchHeader h, int columns) {
        checkSize(buf.capacity(), pos, h);
        h.checkCrc(buf, pos, 0);
        if (h.magic != BatchHeader.MAGIC) {
            byte[] copy = new byte[(int) h.size()];
            buf.get(pos, copy);
            return KafkaBatch.decode(copy, 0, h);
        }
        ByteBuffer le = buf.order() == ByteOrder.LITTLE_ENDIAN ? buf
                : buf.duplicate().order(ByteOrder.LITTLE_ENDIAN);
        return decodeOurs(le, null, pos, h, columns);
    }

    private static void checkSize(int length, int pos, BatchHeader h) {
        long size = h.size();
        if (pos < 0 || (long) length - pos < size) {
            throw new CorruptRecordException("batch announces " + size + " bytes, buffer holds "
                    + Math.max(0L, (long) length - pos));
        }
    }

    /**
     * Our columnar section (docs/format.md §4), as {@code columns.decode_ours}:
     * the whole layout checked, then the entries of the columns asked for.
     * {@code array}: {@code buf}'s array, whose bytes the columns view; null:
     * the columns' bytes are copied out of {@code buf}. {@code buf} is little-endian.
     */
    private static DecodedBatch decodeOurs(ByteBuffer buf, byte[] array, int pos, BatchHeader h,
                                           int columns) {
        Cursor cur = new Cursor(buf, pos + BatchHeader.HEADER_SIZE, (int) (pos + h.size()));
        long count = h.recordCount;
        int at = cur.take(4 * count, "timestamp deltas");
        int n = (int) count;  // 4n bytes fit in the batch: n < 2^30
        long[] timestamps = null;
        if (Columns.has(columns, Columns.TIMESTAMP)) {
            timestamps = new long[n];
            long first = h.firstTimestamp;
            for (int i = 0; i < n; i++) {
                long delta = buf.getInt(at + 4 * i);
                long ts = first + delta;
                if (((first ^ ts) & (delta ^ ts)) < 0) {
                    throw new CorruptRecordException("timestamp of record " + i + " out of range: "
                            + first + " + " + delta);
                }
                timestamps[i] = ts;
            }
        }
        Column keys = cur.column(n, (h.attributes >> BatchHeader.KEY_MODE_SHIFT) & 3, "keys");
        Column values = cur.column(n, (h.attributes >> BatchHeader.VALUE_MODE_SHIFT) & 3, "values");
        int counts = -1;
        int total = 0;
        Column hkeys = null;
        Column hvalues = null;
        if ((h.attributes & BatchHeader.HAS_HEADERS) != 0) {
            counts = cur.take(4L * (n + 1), "header counts");
            total = buf.getInt(counts + 4 * n);
            if (buf.getInt(counts) != 0 || total < 0) {
                throw new CorruptRecordException("header counts malformed");
            }
            hkeys = cur.column(total, COL_DENSE, "header keys");
            hvalues = cur.column(total, COL_NULLABLE, "header values");
        }
        if (cur.pos != cur.end) {
            throw new CorruptRecordException((cur.end - cur.pos)
                    + " unexpected bytes at the end of the records section");
        }
        // the layout holds: now the rules Python checks entry by entry, when records are read
        Binary keyColumn = Columns.has(columns, Columns.KEY) ? keys.build(array) : null;
        Binary valueColumn = Columns.has(columns, Columns.VALUE) ? values.build(array) : null;
        if (!Columns.has(columns, Columns.HEADERS) || counts < 0 || total == 0) {
            return new DecodedBatch(h, columns, false, timestamps, keyColumn, valueColumn, null, null, null);
        }
        int[] starts = new int[n + 1];
        for (int i = 0; i < n; i++) {
            int lo = buf.getInt(counts + 4 * i);
            int hi = buf.getInt(counts + 4 * i + 4);
            if (lo < 0 || lo > hi || hi > total) {
                throw new CorruptRecordException("header counts out of order at record " + i);
            }
            starts[i + 1] = hi;
        }
        Binary hk = hkeys.build(array);
        checkUtf8(hk, "header key is not UTF-8: ");
        return new DecodedBatch(h, columns, false, timestamps, keyColumn, valueColumn, starts, hk,
                hvalues.build(array));
    }

    /** Throw {@code prefix + "entry j is not valid UTF-8"} unless every entry of {@code col} is. */
    static void checkUtf8(Binary col, String prefix) {
        for (int j = 0; j < col.size(); j++) {
            if (!Utf8.valid(col.data, col.offsets[j], col.offsets[j + 1])) {
                throw new CorruptRecordException(prefix + "entry " + j + " is not valid UTF-8");
            }
        }
    }

    /** Reads the parts of our records section in order, within [pos, end). */
    private static final class Cursor {
        final ByteBuffer buf;
        int pos;
        final int end;

        Cursor(ByteBuffer buf, int pos, int end) {
            this.buf = buf;
            this.pos = pos;
            this.end = end;
        }

        /** The position of the next {@code size} bytes, consumed. */
        int take(long size, String what) {
            if (size < 0 || end - pos < size) {
                throw new CorruptRecordException("records section too short for " + what);
            }
            int at = pos;
            pos += (int) size;
            return at;
        }

        /** The next column's parts (consumed); its entries are checked by {@link Column#build}. */
        Column column(int n, int mode, String what) {
            if (mode == COL_ABSENT) {
                return new Column(buf, n, -1, -1, -1, 0);
            }
            int validity = mode == COL_NULLABLE ? take((n + 7L) / 8, what) : -1;
            int offs = take(4L * (n + 1), what);
            int last = buf.getInt(offs + 4 * n);
            if (buf.getInt(offs) != 0) {
                throw new CorruptRecordException(what + " offsets do not start at 0");
            }
            return new Column(buf, n, validity, offs, take(last, what), last);
        }
    }

    /** A binary column of our section: where its bitmap, offsets and data are. */
    private static final class Column {
        final ByteBuffer buf;
        final int n;
        final int validity;
        final int offs;
        final int data;
        final int last;

        Column(ByteBuffer buf, int n, int validity, int offs, int data, int last) {
            this.buf = buf;
            this.n = n;
            this.validity = validity;
            this.offs = offs;
            this.data = data;
            this.last = last;
        }

        /**
         * The column, its offsets checked (in order, within the data): a view
         * of {@code array} ({@code buf}'s array), or, when null, over a copy
         * of its data bytes.
         */
        Binary build(byte[] array) {
            if (offs < 0) {
                return Binary.allNull(n);
            }
            int base = array != null ? data : 0;
            int[] offsets = new int[n + 1];
            int prev = 0;
            for (int i = 0; i < n; i++) {
                int next = buf.getInt(offs + 4 * i + 4);
                if (prev > next || next > last) {
                    throw new CorruptRecordException("column offsets out of order at entry " + i);
                }
                offsets[i] = base + prev;
                prev = next;
            }
            offsets[n] = base + last;
            boolean[] nulls = null;
            if (validity >= 0) {
                for (int i = 0; i < n; i++) {
                    if ((buf.get(validity + (i >> 3)) >> (i & 7) & 1) == 0) {
                        if (nulls == null) {
                            nulls = new boolean[n];
                        }
                        nulls[i] = true;
                    }
                }
            }
            byte[] bytes = array;
            if (bytes == null) {
                bytes = new byte[last];
                buf.get(data, bytes, 0, last);
            }
            return new Binary(bytes, offsets, nulls);
        }
    }
}
