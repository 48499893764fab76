package org.logbroker.spark.records;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;

/**
 * The segment files of one partition directory, as Python's
 * {@code scan.list_segments} and {@code storage.segment.parse_segment_name}
 * find them: {@code <dataDir>/<topic>-<partition>/<base>.log} where base is
 * exactly 20 decimal digits.
 */
public final class SegmentFiles {
    private static final String SUFFIX = ".log";
    private static final int DIGITS = 20;

    /** One segment file: its base offset and its path (as Python's os.path.join writes it). */
    public static final class Segment {
        public final long base;
        public final String path;

        Segment(long base, String path) {
            this.base = base;
            this.path = path;
        }

        @Override
        public String toString() {
            return base + "@" + path;
        }
    }

    private SegmentFiles() {
    }

    /** {@code a} joined with {@code b} as os.path.join does (b relative). */
    public static String join(String a, String b) {
        return a.isEmpty() || a.endsWith("/") ? a + b : a + "/" + b;
    }

    /** The directory of a partition: {@code join(dataDir, topic + "-" + partition)}. */
    public static String partitionDir(String dataDir, String topic, int partition) {
        return join(dataDir, topic + "-" + partition);
    }

    /**
     * The base offset a segment file name stands for, or -1 when the name is
     * not one. A 20-digit base above 2^63-1 (never written by a broker)
     * stands as 2^63-1: past every split's end.
     */
    public static long parseName(String name) {
        if (!name.endsWith(SUFFIX) || name.length() != DIGITS + SUFFIX.length()) {
            return -1;
        }
        long value = 0;
        for (int i = 0; i < DIGITS; i++) {
            char c = name.charAt(i);
            if (c < '0' || c > '9') {
                return -1;
            }
            int d = c - '0';
            value = value > (Long.MAX_VALUE - d) / 10 ? Long.MAX_VALUE : value * 10 + d;
        }
        return value;
    }

    /**
     * The segments of {@code directory}, ascending by (base, path); empty when
     * the directory does not exist. Other I/O errors are thrown unchecked.
     */
    public static List<Segment> list(String directory) {
        List<Segment> out = new ArrayList<>();
        try (DirectoryStream<Path> names = Files.newDirectoryStream(Paths.get(directory))) {
            for (Path p : names) {
                String name = p.getFileName().toString();
                long base = parseName(name);
                if (base >= 0) {
                    out.add(new Segment(base, join(directory, name)));
                }
            }
        } catch (NoSuchFileException exc) {
            return out;
        } catch (IOException exc) {
            throw new UncheckedIOException(exc);
        }
        out.sort(Comparator.<Segment>comparingLong(s -> s.base).thenComparing(s -> s.path));
        return out;
    }
}
