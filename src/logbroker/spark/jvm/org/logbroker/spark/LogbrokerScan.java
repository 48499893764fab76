package org.logbroker.spark;

import java.util.ArrayList;
import java.util.List;
import java.util.OptionalLong;

import com.fasterxml.jackson.databind.JsonNode;

import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.Statistics;
import org.apache.spark.sql.connector.read.SupportsReportStatistics;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * A batch read on the JVM: planned once (by the Python planner, through
 * {@link PlannerBridge}) when Spark first asks for statistics or splits, so
 * a query is repeatable while a broker appends. A stream over the same
 * options is the Python source's (its cost is Spark's micro-batch overhead).
 */
final class LogbrokerScan implements Scan, Batch, SupportsReportStatistics {
  private final LogbrokerTable table;
  private final CaseInsensitiveStringMap options;
  private final StructType schema;
  private final JsonNode filters;
  private final boolean countOnly;
  private SplitPartition[] splits;

  LogbrokerScan(LogbrokerTable table, CaseInsensitiveStringMap options, StructType schema,
                JsonNode filters, boolean countOnly) {
    this.table = table;
    this.options = options;
    this.schema = schema;
    this.filters = filters;
    this.countOnly = countOnly;
  }

  @Override
  public StructType readSchema() {
    return schema;
  }

  @Override
  public String description() {
    return "logbroker (jvm) " + (countOnly ? "COUNT from batch headers" : schema.simpleString())
        + (filters == null ? "" : ", narrowed by " + filters);
  }

  @Override
  public Batch toBatch() {
    return this;
  }

  @Override
  public MicroBatchStream toMicroBatchStream(String checkpointLocation) {
    SupportsRead python = (SupportsRead) table.python();
    return python.newScanBuilder(options).build().toMicroBatchStream(checkpointLocation);
  }

  private synchronized SplitPartition[] splits() {
    if (splits == null) {
      List<String> columns = new ArrayList<>();
      if (!countOnly) {
        for (StructField f : schema.fields()) columns.add(f.name());
      }
      List<JsonNode> planned = PlannerBridge.plan(options.asCaseSensitiveMap(), columns, filters);
      splits = new SplitPartition[planned.size()];
      for (int i = 0; i < splits.length; i++) splits[i] = new SplitPartition(planned.get(i));
    }
    return splits;
  }

  @Override
  public InputPartition[] planInputPartitions() {
    return splits().clone();
  }

  @Override
  public PartitionReaderFactory createReaderFactory() {
    List<String> columns = new ArrayList<>();
    for (StructField f : schema.fields()) columns.add(f.name());
    return new ReaderFactory(columns.toArray(new String[0]), countOnly);
  }

  @Override
  public Statistics estimateStatistics() {
    long bytes = 0;
    long rows = 0;
    for (SplitPartition s : splits()) {
      bytes += s.bytes;
      rows += s.end - s.start;
    }
    long size = bytes, count = rows;
    return new Statistics() {
      @Override
      public OptionalLong sizeInBytes() {
        return OptionalLong.of(size);
      }

      @Override
      public OptionalLong numRows() {
        return OptionalLong.of(count);
      }
    };
  }
}
