package org.logbroker.spark.records;

/**
 * Which record columns a read decodes, as bit flags: {@link #TIMESTAMP},
 * {@link #KEY}, {@link #VALUE}, {@link #HEADERS}. Offsets, partition, topic
 * and timestamp type come from the batch header and need none of them.
 *
 * <p>A batch decoded for some columns is still CRC-checked over all its
 * bytes and its whole records section's layout is checked (every part in
 * place, the section ending where the batch ends); the per-entry rules
 * (offsets in order, header counts in order, header keys UTF-8, timestamps
 * in range) are checked for the columns decoded, as Python checks them
 * for the entries it reads. The columns not decoded are null in
 * {@link DecodedBatch} and must not be used.
 */
public final class Columns {
    public static final int TIMESTAMP = 1;
    public static final int KEY = 2;
    public static final int VALUE = 4;
    public static final int HEADERS = 8;
    public static final int NONE = 0;
    public static final int ALL = TIMESTAMP | KEY | VALUE | HEADERS;

    private Columns() {
    }

    /**
     * The flags of Spark column names ({@code key, value, timestamp,
     * headers}); other names (answered from batch headers) add none.
     */
    public static int of(String... names) {
        int flags = NONE;
        for (String name : names) {
            switch (name) {
                case "timestamp":
                    flags |= TIMESTAMP;
                    break;
                case "key":
                    flags |= KEY;
                    break;
                case "value":
                    flags |= VALUE;
                    break;
                case "headers":
                    flags |= HEADERS;
                    break;
                default:
                    break;
            }
        }
        return flags;
    }

    /** True when {@code flags} has every flag of {@code column}. */
    static boolean has(int flags, int column) {
        return (flags & column) == column;
    }
}
