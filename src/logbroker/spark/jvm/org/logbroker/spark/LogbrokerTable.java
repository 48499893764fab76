package org.logbroker.spark;

import java.util.EnumSet;
import java.util.Map;
import java.util.Set;

import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.SupportsWrite;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceV2;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * One {@code load()} or {@code save()} of format logbroker. Batch reads of
 * a data dir, and bootstrap batch reads with {@code paths} (the replicas'
 * files), run here (the JVM engine); everything else goes to the Python
 * source's table, made on first use: streams, writes and reads on the
 * python engine. Spark sees one table with the capabilities of both.
 */
public final class LogbrokerTable implements Table, SupportsRead, SupportsWrite {
  private final StructType schema;
  private final Transform[] partitioning;
  private final Map<String, String> properties;
  private Table python;

  LogbrokerTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
    this.schema = schema;
    this.partitioning = partitioning;
    this.properties = properties;
  }

  @Override
  public String name() {
    return "logbroker";
  }

  @Override
  public StructType schema() {
    return schema;
  }

  @Override
  public Set<TableCapability> capabilities() {
    // no BATCH_WRITE: batch writes take the V1 path (LogbrokerProvider.createRelation)
    return EnumSet.of(TableCapability.BATCH_READ, TableCapability.MICRO_BATCH_READ,
        TableCapability.STREAMING_WRITE);
  }

  /** The Python source's table for the same schema and options (a Python worker plans it). */
  synchronized Table python() {
    if (python == null) {
      PythonDataSourceV2 source = new PythonDataSourceV2();
      source.setShortName("logbroker");
      python = source.getTable(schema, partitioning, properties);
    }
    return python;
  }

  @Override
  public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
    if (Options.engine(options).equals("python")) {
      return ((SupportsRead) python()).newScanBuilder(options);
    }
    return new LogbrokerScanBuilder(this, options, schema);
  }

  @Override
  public WriteBuilder newWriteBuilder(LogicalWriteInfo info) {
    return ((SupportsWrite) python()).newWriteBuilder(info);
  }
}
