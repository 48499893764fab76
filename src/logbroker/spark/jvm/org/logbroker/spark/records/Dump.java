package org.logbroker.spark.records;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedWriter;
import java.io.IOException;
import java.io.OutputStreamWriter;
import java.io.PrintStream;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.util.Base64;

/**
 * Test harness: reads splits with {@link SplitReader} and prints their
 * records as JSON lines.
 *
 * <pre>java -cp &lt;classes&gt;:&lt;pyspark jars&gt;/* org.logbroker.spark.records.Dump '&lt;split json&gt;' ...</pre>
 *
 * A split is a JSON object with keys {@code data_dir, topic, partition,
 * start, end} and optional {@code hint_segment} (-1), {@code hint_position}
 * (0), {@code fail_on_data_loss} (true), {@code compacted} (false),
 * {@code headers_only} (false), {@code columns} (a list of column names
 * among timestamp, key, value, headers: only those are decoded; all when
 * absent). Each record in [start, end) is printed as
 * {@code {"offset":..,"timestamp":..,"timestampType":..,"key":b64|null,
 * "value":b64|null,"headers":[[key, b64|null],...]}} (with {@code columns},
 * only offset, timestampType and those columns; a batch of ours decoding
 * any other column is an IllegalStateException); with
 * {@code headers_only} one line per batch instead,
 * {@code {"baseOffset":..,"lastOffset":..,"inRange":..}}.
 *
 * <p>One split: exit 0, or on DataLossException / CorruptRecordException
 * {@code ERROR <SimpleName>: <message>} on stderr and exit 2. Several
 * splits (one JVM for many cases): each split's lines are followed by
 * {@code {"split":i,"records":n}} or {@code {"split":i,"error":"<SimpleName>",
 * "message":".."}} on stdout (the ERROR line still goes to stderr) and the
 * next split is read; exit 2 when any failed.
 */
public final class Dump {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final Base64.Encoder B64 = Base64.getEncoder();

    private Dump() {
    }

    public static void main(String[] args) throws IOException {
        Writer out = new BufferedWriter(new OutputStreamWriter(System.out, StandardCharsets.UTF_8), 1 << 16);
        boolean many = args.length > 1;
        boolean failed = false;
        for (int i = 0; i < args.length; i++) {
            long n = 0;
            try {
                n = dump(JSON.readTree(args[i]), out);
                if (many) {
                    line(out, JSON.createObjectNode().put("split", i).put("records", n));
                }
            } catch (DataLossException | CorruptRecordException exc) {
                failed = true;
                out.flush();
                String name = exc.getClass().getSimpleName();
                PrintStream err = System.err;
                err.println("ERROR " + name + ": " + exc.getMessage());
                err.flush();
                if (many) {
                    line(out, JSON.createObjectNode().put("split", i).put("error", name)
                            .put("message", exc.getMessage()));
                }
            }
        }
        out.flush();
        System.exit(failed ? 2 : 0);
    }

    /** Print the records (or batches) of one split; the number of lines printed. */
    private static long dump(JsonNode s, Writer out) throws IOException {
        long start = s.get("start").asLong();
        long end = s.get("end").asLong();
        boolean headersOnly = s.path("headers_only").asBoolean(false);
        int columns = Columns.ALL;
        if (s.has("columns")) {
            String[] names = new String[s.get("columns").size()];
            for (int i = 0; i < names.length; i++) {
                names[i] = s.get("columns").get(i).asText();
            }
            columns = Columns.of(names);
        }
        long lines = 0;
        try (SplitReader reader = new SplitReader(s.get("data_dir").asText(), s.get("topic").asText(),
                s.get("partition").asInt(), start, end, s.path("hint_segment").asLong(-1),
                s.path("hint_position").asLong(0), s.path("fail_on_data_loss").asBoolean(true),
                s.path("compacted").asBoolean(false), headersOnly).columns(columns)) {
            while (reader.hasNext()) {
                DecodedBatch b = reader.next();
                BatchHeader h = b.header;
                if (headersOnly) {
                    line(out, JSON.createObjectNode().put("baseOffset", h.baseOffset)
                            .put("lastOffset", h.lastOffset())
                            .put("inRange", SplitReader.countInRange(h, start, end)));
                    lines++;
                    continue;
                }
                if (h.magic == BatchHeader.MAGIC) {
                    undecoded(b, columns);
                }
                int lo = (int) Math.max(0, start - h.baseOffset);
                int hi = (int) Math.min(b.recordCount(), end - h.baseOffset);
                for (int i = lo; i < hi; i++) {
                    line(out, record(b, i, columns));
                    lines++;
                }
            }
        }
        return lines;
    }

    /** Fail unless the columns not asked for are absent (null) from a batch of ours. */
    private static void undecoded(DecodedBatch b, int columns) {
        boolean extra = (b.timestamps != null && !Columns.has(columns, Columns.TIMESTAMP))
                || (b.keys != null && !Columns.has(columns, Columns.KEY))
                || (b.values != null && !Columns.has(columns, Columns.VALUE))
                || ((b.headerStarts != null || b.headerKeys != null || b.headerValues != null)
                    && !Columns.has(columns, Columns.HEADERS));
        if (extra || b.columns != columns) {
            throw new IllegalStateException("batch at offset " + b.header.baseOffset
                    + " decoded columns not asked for");
        }
    }

    private static ObjectNode record(DecodedBatch b, int i, int columns) {
        ObjectNode r = JSON.createObjectNode();
        r.put("offset", b.header.baseOffset + i);
        if (Columns.has(columns, Columns.TIMESTAMP)) {
            r.put("timestamp", b.timestamps[i]);
        }
        r.put("timestampType", b.header.timestampType());
        if (Columns.has(columns, Columns.KEY)) {
            r.put("key", base64(b.keys, i));
        }
        if (Columns.has(columns, Columns.VALUE)) {
            r.put("value", base64(b.values, i));
        }
        if (!Columns.has(columns, Columns.HEADERS)) {
            return r;
        }
        ArrayNode headers = r.putArray("headers");
        if (b.headerStarts != null) {
            for (int j = b.headerStarts[i]; j < b.headerStarts[i + 1]; j++) {
                Binary k = b.headerKeys;
                headers.addArray()
                        .add(new String(k.data, k.start(j), k.length(j), StandardCharsets.UTF_8))
                        .add(base64(b.headerValues, j));
            }
        }
        return r;
    }

    private static String base64(Binary col, int i) {
        if (col.isNull(i)) {
            return null;
        }
        byte[] raw = new byte[col.length(i)];
        System.arraycopy(col.data, col.start(i), raw, 0, raw.length);
        return B64.encodeToString(raw);
    }

    private static void line(Writer out, JsonNode node) throws IOException {
        out.write(JSON.writeValueAsString(node));
        out.write('\n');
    }
}
