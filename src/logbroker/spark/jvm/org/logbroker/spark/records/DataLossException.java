package org.logbroker.spark.records;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Offsets of a split that cannot be read (deleted by retention, missing
 * from the segment files) while {@code failOnDataLoss} is true. The message
 * is exactly Python's {@code SparkSourceError} of
 * {@code logbroker.spark.options.data_loss}:
 * {@code "<what>; set failOnDataLoss=false to skip them"}.
 */
public class DataLossException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    /** The logger of the warnings {@link #report} writes when not failing. */
    public static final Logger LOG = LoggerFactory.getLogger("org.logbroker.spark");

    public DataLossException(String message) {
        super(message);
    }

    /**
     * The one failOnDataLoss rule: {@code what} (e.g. {@code "t-0 offsets
     * [5, 9) are missing from the segment files"}) is thrown as a
     * DataLossException when {@code fail}, else logged at WARN on logger
     * {@code org.logbroker.spark} as {@code "<what>; skipping them
     * (failOnDataLoss=false)"} and the caller goes on.
     */
    public static void report(boolean fail, String what) {
        if (fail) {
            throw new DataLossException(what + "; set failOnDataLoss=false to skip them");
        }
        LOG.warn("{}; skipping them (failOnDataLoss=false)", what);
    }
}
