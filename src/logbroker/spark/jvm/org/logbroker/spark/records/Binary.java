package org.logbroker.spark.records;

import java.util.Arrays;

/**
 * A read-only column of binary entries (keys, values, header keys or header
 * values of one batch), shaped like an Arrow binary array but with absolute
 * offsets: entry {@code i} is {@code data[offsets[i] .. offsets[i+1])}, or
 * null when {@code nulls != null && nulls[i]}.
 *
 * <p>Contract: {@code offsets.length == size() + 1}, offsets never decrease
 * and stay within {@code data}; {@code nulls} is null (no entry is null) or
 * has {@code size()} flags. A null entry's range is usually empty, but not
 * necessarily (our format does not check bytes behind a null entry), so
 * readers test {@link #isNull} first. {@code data} is shared, never copied
 * per entry: for our format it is the bytes the batch was read into (the
 * column is a view of them), for a Kafka batch a packed copy of its
 * records' bytes. Nobody may write to the arrays.
 */
public final class Binary {
    private static final byte[] EMPTY = new byte[0];

    public final byte[] data;
    public final int[] offsets;
    public final boolean[] nulls;

    /** A column over the given arrays (not copied; the contract above is the caller's). */
    public Binary(byte[] data, int[] offsets, boolean[] nulls) {
        this.data = data;
        this.offsets = offsets;
        this.nulls = nulls;
    }

    /** {@code n} entries, every one null (a column in mode ABSENT). */
    public static Binary allNull(int n) {
        boolean[] nulls = new boolean[n];
        Arrays.fill(nulls, true);
        return new Binary(EMPTY, new int[n + 1], nulls);
    }

    /** The number of entries. */
    public int size() {
        return offsets.length - 1;
    }

    public boolean isNull(int i) {
        return nulls != null && nulls[i];
    }

    /** True when some entry is null. */
    public boolean hasNulls() {
        if (nulls == null) {
            return false;
        }
        for (boolean n : nulls) {
            if (n) {
                return true;
            }
        }
        return false;
    }

    /** Position in {@code data} of entry {@code i}'s first byte. */
    public int start(int i) {
        return offsets[i];
    }

    /** Byte length of entry {@code i} (meaningless when it is null). */
    public int length(int i) {
        return offsets[i + 1] - offsets[i];
    }

    /** A copy of entry {@code i}, or null when it is null. */
    public byte[] get(int i) {
        return isNull(i) ? null : Arrays.copyOfRange(data, offsets[i], offsets[i + 1]);
    }
}
