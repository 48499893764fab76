package org.logbroker.spark;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.logbroker.spark.records.SplitReader;

/**
 * Readers of one split, made on an executor: columnar batches of the
 * columns the query needs, or (a pushed COUNT) one row of the split's
 * record count from batch headers. Record bytes are read (and CRC-checked)
 * only when a column needs them: key, value, timestamp or headers.
 */
final class ReaderFactory implements PartitionReaderFactory {
  private static final long serialVersionUID = 1L;

  private final String[] columns;
  private final boolean countOnly;

  ReaderFactory(String[] columns, boolean countOnly) {
    this.columns = columns;
    this.countOnly = countOnly;
  }

  @Override
  public boolean supportColumnarReads(InputPartition partition) {
    return !countOnly;
  }

  @Override
  public PartitionReader<ColumnarBatch> createColumnarReader(InputPartition partition) {
    return new ColumnarReader((SplitPartition) partition, columns);
  }

  @Override
  public PartitionReader<InternalRow> createReader(InputPartition partition) {
    SplitPartition split = (SplitPartition) partition;
    if (countOnly) return new CountReader(split, columns.length);
    return new RowReader(new ColumnarReader(split, columns));
  }

  /** Whether the columns can be answered from batch headers alone. */
  static boolean headersOnly(String[] columns) {
    for (String c : columns) {
      switch (c) {
        case "topic":
        case "partition":
        case "offset":
        case "timestampType":
          break;
        default:
          return false;
      }
    }
    return true;
  }

  /** The records of [start, end) of a split, counted from batch headers: one row. */
  static final class CountReader implements PartitionReader<InternalRow> {
    private final SplitPartition split;
    private final int width;
    private boolean done;
    private long count;

    CountReader(SplitPartition split, int width) {
      this.split = split;
      this.width = width;
    }

    @Override
    public boolean next() {
      if (done) return false;
      try (SplitReader r = ColumnarReader.open(split, true)) {
        while (r.hasNext()) {
          count += r.next().header.countIn(split.start, split.end);
        }
      }
      done = true;
      return true;
    }

    @Override
    public InternalRow get() {
      Object[] values = new Object[width];
      for (int i = 0; i < width; i++) values[i] = count;
      return new GenericInternalRow(values);
    }

    @Override
    public void close() {}
  }

  /** A columnar reader's rows, for a Spark that asks for rows. */
  static final class RowReader implements PartitionReader<InternalRow> {
    private final ColumnarReader batches;
    private java.util.Iterator<InternalRow> rows = java.util.Collections.emptyIterator();

    RowReader(ColumnarReader batches) {
      this.batches = batches;
    }

    @Override
    public boolean next() {
      while (!rows.hasNext()) {
        if (!batches.next()) return false;
        rows = batches.get().rowIterator();
      }
      return true;
    }

    @Override
    public InternalRow get() {
      return rows.next().copy();
    }

    @Override
    public void close() {
      batches.close();
    }
  }
}
