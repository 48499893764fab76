package org.logbroker.spark.records;

import java.nio.ByteBuffer;
import java.util.zip.CRC32C;

/**
 * The 61-byte big-endian header of one record batch (docs/format.md §2),
 * parsed and validated exactly as Python's {@code records.format.read_fields}.
 * Both magics share the layout: 1 (ours, columnar records) and 2 (a Kafka
 * RecordBatch v2 stored as sent). Unsigned fields (u32, u64) are held in
 * wider or signed types as noted; a valid header has
 * {@code 0 <= baseOffset <= baseOffset + lastOffsetDelta <= 2^63-1}.
 */
public final class BatchHeader {
    public static final int HEADER_SIZE = 61;
    /** base_offset + batch_length: a batch's size is batch_length + 12. */
    public static final int LOG_OVERHEAD = 12;
    public static final int CRC_START = 21;
    public static final int MAGIC = 1;
    public static final int KAFKA_MAGIC = 2;
    public static final long MAX_BATCH_LENGTH = (1L << 31) - 1;

    public static final int COMPRESSION_MASK = 0x0007;
    public static final int LOG_APPEND_TIME = 0x0008;
    public static final int ENCODING_MASK = 0x0030;
    public static final int KEY_MODE_SHIFT = 6;
    public static final int VALUE_MODE_SHIFT = 8;
    public static final int HAS_HEADERS = 0x0400;
    /** Ours (magic 1): a transaction's batch; a control batch (a marker) has both bits. */
    public static final int TRANSACTIONAL = 0x0800;
    public static final int CONTROL = 0x1000;
    public static final int KNOWN_ATTRIBUTES = 0x1FFF;
    /** Kafka's (magic 2) transactional and control bits. */
    public static final int KAFKA_TRANSACTIONAL = 0x0010;
    public static final int KAFKA_CONTROL = 0x0020;
    public static final int KAFKA_KNOWN_ATTRIBUTES = 0x003F;
    public static final int KAFKA_MAX_CODEC = 4;

    private static final int BAD_ATTRIBUTES = (~KNOWN_ATTRIBUTES & 0xFFFF) | COMPRESSION_MASK | ENCODING_MASK;
    private static final long MIN_LENGTH = HEADER_SIZE - LOG_OVERHEAD;

    /** Offset of the first record (u64 on disk; valid ones fit a signed long). */
    public final long baseOffset;
    /** Bytes after the batch_length field (u32). */
    public final long batchLength;
    /** u32 as stored (Kafka batches may hold -1 as 0xFFFFFFFF). */
    public final long leaderEpoch;
    public final int magic;
    /** CRC32C of bytes 21..end, as stored (u32 bits in an int). */
    public final int crc;
    /** u16 attribute bits. */
    public final int attributes;
    /** u32: recordCount - 1 in a valid header. */
    public final long lastOffsetDelta;
    public final long firstTimestamp;
    public final long maxTimestamp;
    public final long producerId;
    public final short producerEpoch;
    public final int baseSequence;
    /** u32, at least 1 in a valid header. */
    public final long recordCount;

    private BatchHeader(byte[] b, int p) {
        baseOffset = Bytes.i64be(b, p);
        batchLength = Bytes.u32be(b, p + 8);
        leaderEpoch = Bytes.u32be(b, p + 12);
        magic = b[p + 16] & 0xFF;
        crc = Bytes.i32be(b, p + 17);
        attributes = Bytes.u16be(b, p + 21);
        lastOffsetDelta = Bytes.u32be(b, p + 23);
        firstTimestamp = Bytes.i64be(b, p + 27);
        maxTimestamp = Bytes.i64be(b, p + 35);
        producerId = Bytes.i64be(b, p + 43);
        producerEpoch = Bytes.i16be(b, p + 51);
        baseSequence = Bytes.i32be(b, p + 53);
        recordCount = Bytes.u32be(b, p + 57);
    }

    /**
     * The header at {@code buf[pos..pos+61)}, checked as
     * {@code format.read_fields} checks it (no CRC check). Throws
     * {@link CorruptRecordException} (and nothing else) when fewer than 61
     * bytes are there or a field is out of its domain, with Python's
     * message (e.g. {@code "unknown magic 7 at position 120"}; its
     * {@code reason()} drops the {@code " at position 120"}).
     */
    public static BatchHeader parse(byte[] buf, int pos) {
        long avail = Math.max(0L, (long) buf.length - pos);
        if (pos < 0 || avail < HEADER_SIZE) {
            String head = "batch header needs " + HEADER_SIZE + " bytes";
            String tail = ", " + avail + " available";
            throw new CorruptRecordException(head + " at position " + pos + tail, head + tail, pos);
        }
        BatchHeader h = new BatchHeader(buf, pos);
        String problem = h.problem();
        if (problem != null) {
            throw new CorruptRecordException(problem + " at position " + pos, problem, pos);
        }
        return h;
    }

    /** What is wrong with this header (the first rule broken), or null when valid. */
    private String problem() {
        boolean lengthOk = batchLength >= MIN_LENGTH && batchLength <= MAX_BATCH_LENGTH;
        boolean countOk = recordCount >= 1 && lastOffsetDelta == recordCount - 1;
        // base is u64: a negative long is >= 2^63, out of range like base + delta > 2^63-1
        boolean offsetOk = baseOffset >= 0 && baseOffset <= Long.MAX_VALUE - lastOffsetDelta;
        boolean timeOk = maxTimestamp >= firstTimestamp;
        if (magic == MAGIC && lengthOk && (attributes & BAD_ATTRIBUTES) == 0
                && ((attributes >> KEY_MODE_SHIFT) & 3) != 3 && ((attributes >> VALUE_MODE_SHIFT) & 3) != 3
                && countOk && offsetOk && timeOk) {
            return null;
        }
        if (magic == KAFKA_MAGIC && lengthOk && (attributes & ~KAFKA_KNOWN_ATTRIBUTES) == 0
                && (attributes & COMPRESSION_MASK) <= KAFKA_MAX_CODEC && countOk && offsetOk && timeOk) {
            return null;
        }
        if (magic != MAGIC && magic != KAFKA_MAGIC) {
            return "unknown magic " + magic;
        }
        if (!lengthOk) {
            return "batch length " + batchLength + " out of range";
        }
        if (magic == KAFKA_MAGIC) {
            if ((attributes & ~KAFKA_KNOWN_ATTRIBUTES) != 0 || (attributes & COMPRESSION_MASK) > KAFKA_MAX_CODEC) {
                return String.format("unsupported attributes 0x%04x (magic 2)", attributes);
            }
        } else if ((attributes & ~KNOWN_ATTRIBUTES) != 0 || (attributes & (COMPRESSION_MASK | ENCODING_MASK)) != 0) {
            return String.format("unsupported attributes 0x%04x", attributes);
        } else if (((attributes >> KEY_MODE_SHIFT) & 3) == 3 || ((attributes >> VALUE_MODE_SHIFT) & 3) == 3) {
            return String.format("invalid column mode in attributes 0x%04x", attributes);
        }
        if (!countOk) {
            return "record count " + recordCount + " / last offset delta " + lastOffsetDelta + " mismatch";
        }
        if (!offsetOk) {
            return "offset " + Long.toUnsignedString(baseOffset) + " out of range";
        }
        return "max timestamp below first timestamp";
    }

    /** Bytes the whole batch occupies, header included (up to 2^31+11). */
    public long size() {
        return batchLength + LOG_OVERHEAD;
    }

    public long lastOffset() {
        return baseOffset + lastOffsetDelta;
    }

    /** The offset after the batch's last (saturates at 2^63-1, for a batch ending there). */
    public long nextOffset() {
        long last = lastOffset();
        return last == Long.MAX_VALUE ? last : last + 1;
    }

    /** A transaction's batch (either magic): dropped by read_committed readers when aborted. */
    public boolean isTransactional() {
        return (attributes & (magic == MAGIC ? TRANSACTIONAL : KAFKA_TRANSACTIONAL)) != 0;
    }

    /** A control batch (a commit or abort marker, either magic): never a record to readers. */
    public boolean isControl() {
        return (attributes & (magic == MAGIC ? CONTROL : KAFKA_CONTROL)) != 0;
    }

    /** 0 = create time (set by the producer), 1 = log append time. */
    public int timestampType() {
        return (attributes & LOG_APPEND_TIME) != 0 ? 1 : 0;
    }

    /** Compression codec of a Kafka batch (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd); 0 for ours. */
    public int codec() {
        return attributes & COMPRESSION_MASK;
    }

    /** Records of this batch in offsets [start, end): the overlap of [base, next) with it. */
    public long countIn(long start, long end) {
        return Math.max(0L, Math.min(nextOffset(), end) - Math.max(baseOffset, start));
    }

    /**
     * Throw {@link CorruptRecordException} unless the stored CRC matches
     * CRC32C of the batch's bytes 21..end at {@code buf[pos..pos+size())},
     * which must be in {@code buf}. The message is Python's
     * {@code check_crc}'s, naming position {@code reportedPosition}.
     */
    public void checkCrc(byte[] buf, int pos, long reportedPosition) {
        CRC32C c = new CRC32C();
        c.update(buf, pos + CRC_START, (int) (size() - CRC_START));
        crcMatches((int) c.getValue(), reportedPosition);
    }

    /** {@link #checkCrc(byte[], int, long)} of the batch at {@code buf[pos..pos+size())} (any buffer). */
    public void checkCrc(ByteBuffer buf, int pos, long reportedPosition) {
        CRC32C c = new CRC32C();
        c.update(buf.slice(pos + CRC_START, (int) (size() - CRC_START)));
        crcMatches((int) c.getValue(), reportedPosition);
    }

    private void crcMatches(int actual, long reportedPosition) {
        if (actual != crc) {
            throw new CorruptRecordException(String.format(
                    "CRC mismatch at position %d (offset %d): stored 0x%08x, computed 0x%08x",
                    reportedPosition, baseOffset, crc, actual));
        }
    }

    @Override
    public String toString() {
        return "BatchHeader(base=" + baseOffset + ", count=" + recordCount + ", magic=" + magic
                + ", attributes=0x" + Integer.toHexString(attributes) + ", size=" + size() + ")";
    }
}
