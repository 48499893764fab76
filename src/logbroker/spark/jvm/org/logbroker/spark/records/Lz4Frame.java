package org.logbroker.spark.records;

import java.util.Arrays;
import net.jpountz.xxhash.XXHash32;
import net.jpountz.xxhash.XXHashFactory;

/**
 * LZ4 frames (the LZ4 frame format, as Kafka's lz4 codec, KIP-57) decoded
 * here rather than by lz4-java's {@code LZ4FrameInputStream}, which refuses
 * frames of linked blocks: liblz4's default, written by many clients and
 * accepted by Python's reader (cramjam). Blocks, linked or independent,
 * are decoded into one output array, so a match may reach back into the
 * frame's earlier blocks. Concatenated frames and skippable frames are
 * read; header, block and content checksums (xxHash32, lz4-java's) are
 * checked; dictionaries (a dictionary ID) are refused. Output stops at
 * {@code limit} bytes. Every malformed input throws
 * {@code CorruptRecordException("lz4 records section: lz4: ...")} naming
 * liblz4's error (as cramjam reports it), e.g. {@code ERROR_blockChecksum_invalid}.
 */
final class Lz4Frame {
    private static final int MAGIC = 0x184D2204;
    private static final int SKIPPABLE_MASK = 0xFFFFFFF0;
    private static final int SKIPPABLE = 0x184D2A50;
    private static final int MIN_MATCH = 4;
    /** The smallest frame header: magic, FLG, BD, header checksum (less is a truncated frame). */
    private static final int MIN_HEADER = 7;
    private static final XXHash32 XXH = XXHashFactory.fastestInstance().hash32();

    private final byte[] src;
    private final int end;
    private final int limit;
    private int pos;
    private byte[] out;
    private int n;

    private Lz4Frame(byte[] src, int off, int len, int limit) {
        this.src = src;
        this.pos = off;
        this.end = off + len;
        this.limit = limit;
        this.out = new byte[(int) Math.min(limit + 1L, Math.max(64 << 10, 8L * len))];
    }

    /** The decompressed bytes of the frames at {@code src[off..off+len)}, at most {@code limit}. */
    static byte[] decompress(byte[] src, int off, int len, int limit) {
        if (len == 0) {
            throw bad("empty input");
        }
        Lz4Frame f = new Lz4Frame(src, off, len, limit);
        while (f.pos < f.end) {
            f.frame();
        }
        return Arrays.copyOf(f.out, f.n);
    }

    private static CorruptRecordException bad(String what) {
        return new CorruptRecordException("lz4 records section: lz4: " + what);
    }

    private void need(long bytes) {
        if (end - pos < bytes) {
            throw bad("truncated frame");
        }
    }

    private int u32le() {
        need(4);
        int v = Bytes.i32le(src, pos);
        pos += 4;
        return v;
    }

    private void frame() {
        need(MIN_HEADER);
        int magic = u32le();
        if ((magic & SKIPPABLE_MASK) == SKIPPABLE) {
            long size = u32le() & 0xFFFFFFFFL;
            need(size);
            pos += (int) size;
            return;
        }
        if (magic != MAGIC) {
            throw bad("ERROR_frameType_unknown");
        }
        int descriptor = pos;
        need(2);
        int flg = src[pos] & 0xFF;
        int bd = src[pos + 1] & 0xFF;
        pos += 2;
        if ((flg & 0x02) != 0) {  // liblz4's order of checks, for its error names
            throw bad("ERROR_reservedFlag_set");
        }
        if (flg >> 6 != 1) {
            throw bad("ERROR_headerVersion_wrong");
        }
        if ((bd & 0x80) != 0) {
            throw bad("ERROR_reservedFlag_set");
        }
        if ((bd >> 4 & 7) < 4) {
            throw bad("ERROR_maxBlockSize_invalid");
        }
        if ((bd & 0x0F) != 0) {
            throw bad("ERROR_reservedFlag_set");
        }
        boolean linked = (flg & 0x20) == 0;
        boolean blockChecksum = (flg & 0x10) != 0;
        boolean contentChecksum = (flg & 0x04) != 0;
        long contentSize = -1;
        if ((flg & 0x08) != 0) {
            need(8);
            contentSize = (Bytes.i32le(src, pos) & 0xFFFFFFFFL) | (long) Bytes.i32le(src, pos + 4) << 32;
            pos += 8;
        }
        if ((flg & 0x01) != 0) {
            need(4);
            pos += 4;  // the dictionary ID, refused below
        }
        need(1);
        int hc = src[pos] & 0xFF;
        if (hc != (XXH.hash(src, descriptor, pos - descriptor, 0) >> 8 & 0xFF)) {
            throw bad("ERROR_headerChecksum_invalid");
        }
        if ((flg & 0x01) != 0) {
            throw bad("a dictionary ID is set: frames with a dictionary are not supported");
        }
        pos++;
        int maxBlock = 1 << (2 * (bd >> 4 & 7) + 8);
        int frameStart = n;
        while (true) {
            int word = u32le();
            if (word == 0) {
                break;
            }
            int size = word & 0x7FFFFFFF;
            if (size > maxBlock) {
                throw bad("ERROR_maxBlockSize_invalid");
            }
            need(size + (blockChecksum ? 4L : 0L));
            if (blockChecksum && XXH.hash(src, pos, size, 0) != Bytes.i32le(src, pos + size)) {
                throw bad("ERROR_blockChecksum_invalid");
            }
            int blockStart = n;
            if (word < 0) {  // high bit: stored uncompressed
                reserve(size);
                System.arraycopy(src, pos, out, n, size);
                n += size;
            } else {
                block(pos, pos + size, linked ? frameStart : blockStart);
            }
            if (n - blockStart > maxBlock) {
                throw bad("ERROR_decompressionFailed (a block above the frame's maximum " + maxBlock + ")");
            }
            pos += size + (blockChecksum ? 4 : 0);
        }
        if (contentChecksum && XXH.hash(out, frameStart, n - frameStart, 0) != u32le()) {
            throw bad("ERROR_contentChecksum_invalid");
        }
        if (contentSize >= 0 && contentSize != n - frameStart) {
            throw bad("ERROR_frameSize_wrong");
        }
    }

    /** Room for {@code more} output bytes (at most limit in all). */
    private void reserve(int more) {
        long want = (long) n + more;
        if (want > limit) {
            throw Decompression.tooLarge("lz4", limit);
        }
        if (want > out.length) {
            out = Arrays.copyOf(out, (int) Math.min(limit + 1L, Math.max(want, 2L * out.length)));
        }
    }

    /** One LZ4 block {@code src[p..stop)}; matches may reach back to output position {@code floor}. */
    private void block(int p, int stop, int floor) {
        while (true) {
            if (p >= stop) {
                throw bad("ERROR_decompressionFailed (a sequence runs past the block)");
            }
            int token = src[p++] & 0xFF;
            int literals = token >>> 4;
            if (literals == 15) {
                int[] at = {p};
                literals = length(literals, at, stop);
                p = at[0];
            }
            if (stop - p < literals) {
                throw bad("ERROR_decompressionFailed (literals run past the block)");
            }
            reserve(literals);
            System.arraycopy(src, p, out, n, literals);
            n += literals;
            p += literals;
            if (p == stop) {
                return;  // the last sequence: literals only
            }
            if (stop - p < 2) {
                throw bad("ERROR_decompressionFailed (a match offset runs past the block)");
            }
            int offset = (src[p] & 0xFF) | (src[p + 1] & 0xFF) << 8;
            p += 2;
            if (offset == 0 || offset > n - floor) {
                throw bad("ERROR_decompressionFailed (match offset " + offset + " out of range)");
            }
            int match = token & 15;
            if (match == 15) {
                int[] at = {p};
                match = length(match, at, stop);
                p = at[0];
            }
            match += MIN_MATCH;
            reserve(match);
            int from = n - offset;
            if (offset >= match) {
                System.arraycopy(out, from, out, n, match);
            } else {
                for (int i = 0; i < match; i++) {  // overlapping: repeats the last offset bytes
                    out[n + i] = out[from + i];
                }
            }
            n += match;
        }
    }

    /** A length continued by 255-valued bytes at {@code at[0]}; advances it. */
    private int length(int base, int[] at, int stop) {
        long len = base;
        int b;
        do {
            if (at[0] >= stop) {
                throw bad("ERROR_decompressionFailed (a length runs past the block)");
            }
            b = src[at[0]++] & 0xFF;
            len += b;
            if (len > Integer.MAX_VALUE - 16) {
                throw bad("ERROR_decompressionFailed (length overflow)");
            }
        } while (b == 255);
        return (int) len;
    }
}
