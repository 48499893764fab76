package org.logbroker.spark.records;

/**
 * Bytes that are not a valid record batch: a bad header, CRC, records
 * section layout or compressed section. The JVM twin of Python's
 * {@code logbroker.errors.CorruptRecordError}: messages are worded as the
 * Python reader words them, so a Spark task fails with the same text
 * whichever reader ran.
 *
 * <p>Some errors are raised at a byte position (a batch header read from a
 * buffer): {@link #position()} is that position and {@link #reason()} the
 * message without its {@code " at position N"} part, which a file walker
 * replaces with the file name and file position. Every other error has
 * position -1 and a reason equal to its message.
 */
public class CorruptRecordException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    private final String reason;
    private final long position;

    /** An error with no position: {@code reason()} is {@code message}. */
    public CorruptRecordException(String message) {
        this(message, message, -1);
    }

    /**
     * An error found at byte {@code position} of a buffer: {@code message}
     * names the position, {@code reason} is the same text without it.
     */
    public CorruptRecordException(String message, String reason, long position) {
        super(message);
        this.reason = reason;
        this.position = position;
    }

    /** The message without the position it was found at. */
    public String reason() {
        return reason;
    }

    /** The byte position in the buffer the error was found at, or -1. */
    public long position() {
        return position;
    }
}
