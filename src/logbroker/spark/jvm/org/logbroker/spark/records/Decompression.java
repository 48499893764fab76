package org.logbroker.spark.records;

import com.github.luben.zstd.ZstdInputStreamNoFinalizer;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.util.Arrays;
import java.util.zip.CRC32;
import java.util.zip.DataFormatException;
import java.util.zip.Inflater;
import org.xerial.snappy.Snappy;

/**
 * Decompressing the records section of a Kafka (magic 2) batch, bounded:
 * the JVM twin of Python's {@code records/compression.py}. Codes are
 * Kafka's: 1 gzip (one RFC 1952 member, nothing after it), 2 snappy
 * (xerial framing {@code \x82SNAPPY\0}, two int32 versions, then blocks of
 * u32 BE length + raw block; or one raw block), 3 lz4 frames ({@link Lz4Frame}),
 * 4 zstd frames.
 *
 * <p>Output is never held beyond {@code limit + 1} bytes: a section that
 * decompresses to more is refused ("... decompresses to more than N
 * bytes"; Python raises RecordTooLargeError there, this a
 * CorruptRecordException). Any malformed input, and any exception of a
 * codec library, becomes a {@link CorruptRecordException} whose message
 * starts as Python's ({@code "<codec> records section: ..."}).
 */
final class Decompression {
    static final String[] NAMES = {"none", "gzip", "snappy", "lz4", "zstd"};
    private static final byte[] XERIAL_MAGIC = {(byte) 0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0};
    private static final int XERIAL_HEADER = 16;

    private Decompression() {
    }

    /** The decompressed bytes of {@code src[off..off+len)} (codec 1..4), at most {@code limit}. */
    static byte[] decompress(int codec, byte[] src, int off, int len, int limit) {
        switch (codec) {
            case 1:
                return Gzip.decompress(src, off, len, limit);
            case 2:
                return snappy(src, off, len, limit);
            case 3:
                try {
                    return Lz4Frame.decompress(src, off, len, limit);
                } catch (RuntimeException exc) {
                    if (exc instanceof CorruptRecordException) {
                        throw exc;
                    }
                    throw failed("lz4", exc);
                }
            case 4:
                return zstd(src, off, len, limit);
            default:
                throw new CorruptRecordException("unknown compression code " + codec);
        }
    }

    static CorruptRecordException tooLarge(String name, long limit) {
        return new CorruptRecordException(name + " records section decompresses to more than "
                + limit + " bytes");
    }

    private static CorruptRecordException failed(String name, Throwable exc) {
        String what = exc.getMessage() != null ? exc.getMessage() : exc.getClass().getSimpleName();
        return new CorruptRecordException(name + " records section: " + what);
    }

    /** zstd frames through zstd-jni's stream decoder into a buffer doubling up to limit + 1. */
    private static byte[] zstd(byte[] src, int off, int len, int limit) {
        String name = NAMES[4];
        if (len == 0) {
            throw new CorruptRecordException(name + " records section: incomplete frame");
        }
        try (InputStream in = new ZstdInputStreamNoFinalizer(new ByteArrayInputStream(src, off, len))) {
            int cap = (int) Math.min(limit + 1L, Math.max(64 << 10, 8L * len));
            byte[] out = new byte[cap];
            int n = 0;
            while (true) {
                if (n == out.length) {
                    if (n > limit) {
                        throw tooLarge(name, limit);
                    }
                    out = Arrays.copyOf(out, (int) Math.min(limit + 1L, 2L * n));
                }
                int got = in.read(out, n, out.length - n);
                if (got < 0) {
                    break;
                }
                n += got;
            }
            if (n > limit) {
                throw tooLarge(name, limit);
            }
            return n == out.length ? out : Arrays.copyOf(out, n);
        } catch (CorruptRecordException exc) {
            throw exc;
        } catch (IOException | RuntimeException exc) {
            if ("Truncated source".equals(exc.getMessage())) {
                throw new CorruptRecordException(name + " records section: incomplete frame");  // zstd's name
            }
            throw failed(name, exc);
        }
    }

    private static byte[] snappy(byte[] src, int off, int len, int limit) {
        if (len < XERIAL_MAGIC.length
                || !Arrays.equals(src, off, off + XERIAL_MAGIC.length, XERIAL_MAGIC, 0, XERIAL_MAGIC.length)) {
            return rawSnappy(src, off, len, limit);
        }
        if (len < XERIAL_HEADER) {
            throw new CorruptRecordException("snappy (xerial) header cut short");
        }
        int end = off + len;
        int pos = off + XERIAL_HEADER;
        byte[][] parts = new byte[4][];
        int count = 0;
        long total = 0;
        while (pos < end) {
            if (end - pos < 4) {
                throw new CorruptRecordException("snappy (xerial) block length cut short");
            }
            long size = Bytes.u32be(src, pos);
            pos += 4;
            if (size > end - pos) {
                throw new CorruptRecordException("snappy (xerial) block of " + size
                        + " bytes runs past the data");
            }
            byte[] block = rawSnappy(src, pos, (int) size, (int) (limit - total));
            if (count == parts.length) {
                parts = Arrays.copyOf(parts, 2 * count);
            }
            parts[count++] = block;
            total += block.length;
            pos += (int) size;
        }
        byte[] out = new byte[(int) total];
        int at = 0;
        for (int i = 0; i < count; i++) {
            System.arraycopy(parts[i], 0, out, at, parts[i].length);
            at += parts[i].length;
        }
        return out;
    }

    /** One raw snappy block: its announced length checked before anything is allocated. */
    private static byte[] rawSnappy(byte[] src, int off, int len, int limit) {
        int size;
        try {
            size = Snappy.uncompressedLength(src, off, len);
        } catch (IOException | RuntimeException exc) {
            throw failed("snappy", exc);
        }
        if (size < 0 || size > limit) {
            throw tooLarge("snappy", limit);
        }
        byte[] out = new byte[size];
        int n;
        try {
            n = Snappy.uncompress(src, off, len, out, 0);
        } catch (IOException | RuntimeException exc) {
            throw failed("snappy", exc);
        }
        if (n != size) {
            throw new CorruptRecordException("snappy block announced " + size + " bytes, held " + n);
        }
        return out;
    }

    /** One gzip member (RFC 1952) through {@link Inflater}, as zlib's gzip mode reads it. */
    private static final class Gzip {
        private static final int FHCRC = 2;
        private static final int FEXTRA = 4;
        private static final int FNAME = 8;
        private static final int FCOMMENT = 16;

        static byte[] decompress(byte[] src, int off, int len, int limit) {
            int end = off + len;
            int pos = header(src, off, end);
            Inflater inf = new Inflater(true);
            try {
                inf.setInput(src, pos, end - pos);
                byte[] out = new byte[(int) Math.min(limit + 1L, Math.max(64 << 10, 4L * len))];
                int n = 0;
                while (!inf.finished()) {
                    if (n == out.length) {
                        if (n > limit) {
                            throw tooLarge("gzip", limit);
                        }
                        out = Arrays.copyOf(out, (int) Math.min(limit + 1L, 2L * n));
                    }
                    int got = inf.inflate(out, n, out.length - n);
                    n += got;
                    if (got == 0 && (inf.needsInput() || inf.needsDictionary())) {
                        if (inf.needsDictionary()) {
                            throw zlib("need dictionary");
                        }
                        throw new CorruptRecordException("gzip records section is cut short");
                    }
                }
                if (n > limit) {
                    throw tooLarge("gzip", limit);
                }
                int rest = inf.getRemaining();
                int trailer = end - rest;
                CRC32 crc = new CRC32();
                crc.update(out, 0, n);
                if (rest >= 4 && (int) crc.getValue() != Bytes.i32le(src, trailer)) {
                    throw zlib("incorrect data check");  // zlib checks each part of the trailer once read
                }
                if (rest < 8) {
                    throw new CorruptRecordException("gzip records section is cut short");
                }
                if (n != Bytes.i32le(src, trailer + 4)) {
                    throw zlib("incorrect length check");
                }
                if (rest > 8) {
                    throw new CorruptRecordException((rest - 8) + " bytes after the gzip stream");
                }
                return n == out.length ? out : Arrays.copyOf(out, n);
            } catch (DataFormatException exc) {
                throw zlib(exc.getMessage());
            } finally {
                inf.end();
            }
        }

        /** zlib's wording of a Z_DATA_ERROR, as Python's zlib.error reads. */
        private static CorruptRecordException zlib(String what) {
            return new CorruptRecordException("gzip records section: Error -3 while decompressing data: " + what);
        }

        /** The position after the member header at {@code src[pos..end)}. */
        private static int header(byte[] src, int pos, int end) {
            int start = pos;
            if (end - pos < 10) {
                throw new CorruptRecordException("gzip records section is cut short");
            }
            if ((src[pos] & 0xFF) != 0x1F || (src[pos + 1] & 0xFF) != 0x8B) {
                throw zlib("incorrect header check");
            }
            if (src[pos + 2] != 8) {
                throw zlib("unknown compression method");
            }
            int flags = src[pos + 3] & 0xFF;
            if ((flags & 0xE0) != 0) {
                throw zlib("unknown header flags set");
            }
            pos += 10;
            if ((flags & FEXTRA) != 0) {
                if (end - pos < 2) {
                    throw new CorruptRecordException("gzip records section is cut short");
                }
                int xlen = (src[pos] & 0xFF) | (src[pos + 1] & 0xFF) << 8;
                pos += 2 + xlen;
            }
            for (int flag : new int[] {FNAME, FCOMMENT}) {
                if ((flags & flag) != 0) {
                    while (pos < end && src[pos] != 0) {
                        pos++;
                    }
                    pos++;
                }
            }
            if ((flags & FHCRC) != 0) {
                if (end - pos >= 2) {
                    CRC32 crc = new CRC32();
                    crc.update(src, start, pos - start);
                    int want = (src[pos] & 0xFF) | (src[pos + 1] & 0xFF) << 8;
                    if (((int) crc.getValue() & 0xFFFF) != want) {
                        throw zlib("header crc mismatch");
                    }
                }
                pos += 2;
            }
            if (pos > end) {
                throw new CorruptRecordException("gzip records section is cut short");
            }
            return pos;
        }
    }
}
