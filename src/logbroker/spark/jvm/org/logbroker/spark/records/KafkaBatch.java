package org.logbroker.spark.records;

import java.util.Arrays;

/**
 * The records section of a Kafka RecordBatch v2 (magic 2) decoded into
 * columns: the JVM twin of Python's {@code kafka_v2.decode_kafka} /
 * {@code walk}, with the same rules and messages. Records are varint-framed
 * (zigzag varints):
 *
 * <pre>
 *   length varint, attributes int8, timestamp_delta varlong,
 *   offset_delta varint, key_length varint (-1 null), key,
 *   value_length varint (-1 null), value, header_count varint,
 *   per header: key_length varint, key (UTF-8), value_length varint (-1 null), value
 * </pre>
 *
 * Record {@code i}'s timestamp is {@code first_timestamp + timestamp_delta};
 * every timestamp must be within 2^31-1 ms of the first record's (our
 * columns' rule, kept so both readers accept the same batches). Keys,
 * values and headers are copied, packed, into one array per column.
 */
final class KafkaBatch {
    /** Python's READ_LIMIT: a decompressed section holds at most 256 MiB. */
    static final int READ_LIMIT = 256 << 20;
    private static final int MIN_RECORD = 7;

    private final byte[] data;
    private final int end;
    private int pos;

    private KafkaBatch(byte[] data, int pos, int end) {
        this.data = data;
        this.pos = pos;
        this.end = end;
    }

    /** Decode the (CRC-checked or not) magic-2 batch at {@code buf[pos..pos+h.size())}. */
    static DecodedBatch decode(byte[] buf, int pos, BatchHeader h) {
        int start = pos + BatchHeader.HEADER_SIZE;
        int stop = (int) (pos + h.size());
        if (h.codec() != 0) {
            byte[] plain = Decompression.decompress(h.codec(), buf, start, stop - start, READ_LIMIT);
            return new KafkaBatch(plain, 0, plain.length).walk(h);
        }
        return new KafkaBatch(buf, start, stop).walk(h);
    }

    private DecodedBatch walk(BatchHeader h) {
        long size = end - pos;
        if (h.recordCount * MIN_RECORD > size) {
            throw new CorruptRecordException(h.recordCount + " records cannot fit in a " + size
                    + "-byte records section");
        }
        int n = (int) h.recordCount;
        long[] stamps = new long[n];
        Spans keys = new Spans(n);
        Spans values = new Spans(n);
        Spans hkeys = null;
        Spans hvalues = null;
        int[] starts = null;
        for (int i = 0; i < n; i++) {
            try {
                long length = varint(end);
                long rend = pos + length;
                if (length < 0 || rend > end) {
                    throw new CorruptRecordException("length " + length + " runs past the section");
                }
                int recEnd = (int) rend;
                pos++;  // the attributes byte, not checked (as Kafka)
                long delta = varint(recEnd);
                long offsetDelta = varint(recEnd);
                if (offsetDelta != i) {
                    throw new CorruptRecordException("offset delta " + offsetDelta + ", expected " + i);
                }
                keys.add(blob(recEnd));
                values.add(blob(recEnd));
                long count = varint(recEnd);
                if (count != 0) {
                    if (count < 0 || 2 * count > recEnd - pos) {
                        throw new CorruptRecordException("header count " + count + " invalid");
                    }
                    if (starts == null) {
                        starts = new int[n + 1];
                        hkeys = new Spans(16);
                        hvalues = new Spans(16);
                    }
                    for (long k = 0; k < count; k++) {
                        long key = blob(recEnd);
                        if (key < 0) {
                            throw new CorruptRecordException("a header key is null");
                        }
                        int ks = (int) (key >>> 32);
                        if (!Utf8.valid(data, ks, ks + (int) (key & 0xFFFFFFFFL))) {
                            throw new CorruptRecordException("a header key is not UTF-8");
                        }
                        hkeys.add(key);
                        hvalues.add(blob(recEnd));
                    }
                }
                if (starts != null) {  // records before the first with headers keep 0
                    starts[i + 1] = hkeys.size;
                }
                if (pos != recEnd) {
                    throw new CorruptRecordException("length " + length + " disagrees with its fields");
                }
                stamps[i] = timestamp(h.firstTimestamp, delta);
            } catch (CorruptRecordException exc) {
                throw new CorruptRecordException("Kafka record " + i + ": " + exc.getMessage());
            }
        }
        if (pos != end) {
            throw new CorruptRecordException((end - pos) + " bytes after the last Kafka record");
        }
        checkSpan(stamps);
        Binary hk = null;
        if (starts != null) {
            hk = hkeys.pack(data);
        }
        return new DecodedBatch(h, stamps, keys.pack(data), values.pack(data), starts, hk,
                starts == null ? null : hvalues.pack(data));
    }

    private static long timestamp(long first, long delta) {
        long ts = first + delta;
        if (((first ^ ts) & (delta ^ ts)) < 0) {
            throw new CorruptRecordException("timestamp " + first + " + " + delta + " is outside int64");
        }
        return ts;
    }

    /** Python's rule: every timestamp within 2^31-1 ms of the first record's. */
    private static void checkSpan(long[] stamps) {
        if (stamps.length == 0) {
            return;
        }
        long hi = stamps[0];
        long lo = stamps[0];
        for (long t : stamps) {
            hi = Math.max(hi, t);
            lo = Math.min(lo, t);
        }
        long first = stamps[0];
        // hi >= first >= lo: the differences are exact unless they pass 2^63 (then far out of range)
        long up = hi - first;
        long down = first - lo;
        if (up < 0 || up > Integer.MAX_VALUE || down < 0 || down > -(long) Integer.MIN_VALUE) {
            throw new CorruptRecordException("Kafka record timestamps " + lo + ".." + hi
                    + " are not all within 2^31-1 ms of the first record's, " + first);
        }
    }

    /** A zigzag varint (up to 64 bits) at {@code pos} before {@code limit}; advances pos. */
    private long varint(int limit) {
        if (pos >= limit) {
            throw new CorruptRecordException("a varint runs past the record");
        }
        int b = data[pos++] & 0xFF;
        if (b < 0x80) {
            return (b >>> 1) ^ -(b & 1);
        }
        long result = b & 0x7F;
        int shift = 7;
        while (true) {
            if (pos >= limit) {
                throw new CorruptRecordException("a varint runs past the record");
            }
            b = data[pos++] & 0xFF;
            if (shift == 63 && b < 0x80 && (b & 0x7E) != 0) {  // Python's int would pass 64 bits
                throw new CorruptRecordException("a varint larger than 64 bits");
            }
            result |= (long) (b & 0x7F) << shift;
            if (b < 0x80) {
                return (result >>> 1) ^ -(result & 1);
            }
            shift += 7;
            if (shift > 63) {
                throw new CorruptRecordException("a varint longer than 10 bytes");
            }
        }
    }

    /** A length-prefixed blob: its span as (start << 32 | length), or -1 for null; advances pos. */
    private long blob(int limit) {
        long n = varint(limit);
        if (n < 0) {
            if (n == -1) {
                return -1;
            }
            throw new CorruptRecordException("length " + n + " invalid");
        }
        if (n > limit - pos) {
            throw new CorruptRecordException("length " + n + " runs past the record");
        }
        long span = ((long) pos << 32) | n;
        pos += (int) n;
        return span;
    }

    /** Spans (start, length; -1 = null) of one column's entries, packed on demand. */
    private static final class Spans {
        long[] spans;
        int size;
        long bytes;

        Spans(int capacity) {
            spans = new long[Math.max(1, capacity)];
        }

        void add(long span) {
            if (size == spans.length) {
                spans = Arrays.copyOf(spans, 2 * size);
            }
            spans[size++] = span;
            if (span >= 0) {
                bytes += span & 0xFFFFFFFFL;
            }
        }

        /** The entries copied into one array (at most the section's size: fits an int). */
        Binary pack(byte[] src) {
            byte[] out = new byte[(int) bytes];
            int[] offsets = new int[size + 1];
            boolean[] nulls = null;
            int at = 0;
            for (int i = 0; i < size; i++) {
                long s = spans[i];
                offsets[i] = at;
                if (s < 0) {
                    if (nulls == null) {
                        nulls = new boolean[size];
                    }
                    nulls[i] = true;
                    continue;
                }
                int len = (int) (s & 0xFFFFFFFFL);
                System.arraycopy(src, (int) (s >>> 32), out, at, len);
                at += len;
            }
            offsets[size] = at;
            return new Binary(out, offsets, nulls);
        }
    }
}
