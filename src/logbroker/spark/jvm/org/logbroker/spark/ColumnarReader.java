package org.logbroker.spark;

import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.logbroker.spark.records.CorruptRecordException;
import org.logbroker.spark.records.DecodedBatch;
import org.logbroker.spark.records.SegmentFiles;
import org.logbroker.spark.records.SplitReader;

/**
 * A split's records as Spark columnar batches, one per record batch (its
 * records in [start, end)), in offset order; the vectors view the batch's
 * decoded bytes (Vectors.java). A column list with none of key, value,
 * timestamp and headers reads batch headers only.
 */
final class ColumnarReader implements PartitionReader<ColumnarBatch> {
  /** Record timestamps (ms) whose microseconds fit a long. */
  private static final long MAX_MS = Long.MAX_VALUE / 1000;

  private final SplitPartition split;
  private final String[] columns;
  private final SplitReader reader;
  private ColumnarBatch current;

  ColumnarReader(SplitPartition split, String[] columns) {
    this.split = split;
    this.columns = columns;
    this.reader = open(split, ReaderFactory.headersOnly(columns))
        .columns(org.logbroker.spark.records.Columns.of(columns));  // decode only these (CRC whole)
  }

  static SplitReader open(SplitPartition s, boolean headersOnly) {
    if (s.dataDir.isEmpty()) {
      // A replica's files (bootstrap + paths): the planned end is at most the leader's high
      // watermark, which every in-sync replica's files hold. Its index is not ours to read
      // (no hint): the walk starts at the base of the segment holding start.
      return new SplitReader(replicaDir(s), s.topic, s.partition, s.start, s.end, -1, 0,
          s.failOnDataLoss, s.compacted, headersOnly).aborted(s.aborted);
    }
    return new SplitReader(s.dataDir, s.topic, s.partition, s.start, s.end, s.hintSegment,
        s.hintPosition, s.failOnDataLoss, s.compacted, headersOnly).aborted(s.aborted);
  }

  /** The data dir of the first replica whose partition directory is on this host. */
  static String replicaDir(SplitPartition s) {
    StringBuilder looked = new StringBuilder();
    for (int i = 0; i < s.replicaDirs.length; i++) {
      String dir = SegmentFiles.partitionDir(s.replicaDirs[i], s.topic, s.partition);
      if (java.nio.file.Files.isDirectory(java.nio.file.Paths.get(dir))) return s.replicaDirs[i];
      looked.append(looked.length() == 0 ? "" : ", ").append(dir)
          .append(" (").append(s.replicaHosts[i]).append(")");
    }
    throw new IllegalStateException("no replica of " + s.topic + "-" + s.partition
        + " on this host: looked in " + (looked.length() == 0 ? "none (no replicas planned)"
        : looked) + "; run executors on the brokers' hosts, or read with engine python");
  }

  @Override
  public boolean next() {
    while (reader.hasNext()) {
      DecodedBatch b = reader.next();
      long base = b.header.baseOffset;
      int lo = (int) Math.max(0, split.start - base);
      int hi = (int) Math.min(b.header.recordCount, split.end - base);
      if (hi <= lo) continue;
      current = batch(b, lo, hi - lo);
      return true;
    }
    return false;
  }

  private ColumnarBatch batch(DecodedBatch b, int lo, int rows) {
    ColumnVector[] vectors = new ColumnVector[columns.length];
    for (int c = 0; c < columns.length; c++) {
      switch (columns[c]) {
        case "key":
          vectors[c] = new Vectors.Bytes(DataTypes.BinaryType, b.keys, lo, rows);
          break;
        case "value":
          vectors[c] = new Vectors.Bytes(DataTypes.BinaryType, b.values, lo, rows);
          break;
        case "topic":
          vectors[c] = new Vectors.ConstString(split.topic);
          break;
        case "partition":
          vectors[c] = new Vectors.ConstInt(split.partition);
          break;
        case "offset":
          vectors[c] = new Vectors.Offsets(b.header.baseOffset + lo);
          break;
        case "timestamp":
          checkTimestamps(b, lo, rows);
          vectors[c] = new Vectors.Micros(b.timestamps, lo);
          break;
        case "timestampType":
          vectors[c] = new Vectors.ConstInt(b.header.timestampType());
          break;
        case "headers":
          vectors[c] = new Vectors.Headers(b.headerStarts, b.headerKeys, b.headerValues, lo);
          break;
        default:
          throw new IllegalArgumentException("unknown column " + columns[c]);
      }
    }
    return new ColumnarBatch(vectors, rows);
  }

  private void checkTimestamps(DecodedBatch b, int lo, int rows) {
    for (int i = lo; i < lo + rows; i++) {
      long ms = b.timestamps[i];
      if (ms > MAX_MS || ms < -MAX_MS) {
        throw new CorruptRecordException("timestamp out of range for timestamp[us]: " + ms
            + " ms at offset " + (b.header.baseOffset + i) + " of " + split.topic + "-"
            + split.partition);
      }
    }
  }

  @Override
  public ColumnarBatch get() {
    return current;
  }

  @Override
  public void close() {
    reader.close();
  }
}
