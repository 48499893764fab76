package org.logbroker.spark;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

import com.fasterxml.jackson.databind.JsonNode;

import org.apache.spark.sql.connector.expressions.NamedReference;
import org.apache.spark.sql.connector.expressions.aggregate.AggregateFunc;
import org.apache.spark.sql.connector.expressions.aggregate.Aggregation;
import org.apache.spark.sql.connector.expressions.aggregate.Count;
import org.apache.spark.sql.connector.expressions.aggregate.CountStar;
import org.apache.spark.sql.connector.expressions.filter.Predicate;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.SupportsPushDownAggregates;
import org.apache.spark.sql.connector.read.SupportsPushDownRequiredColumns;
import org.apache.spark.sql.connector.read.SupportsPushDownV2Filters;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * What Spark pushes into a JVM read: the columns it needs (pruning), its
 * predicates (narrowing the offsets read, spark/narrow.py; each stays a
 * post-scan filter too, so Spark checks every row), and COUNT(*) or COUNT
 * of a never-null column without grouping, answered per split from batch
 * headers (Spark sums the splits' counts).
 */
final class LogbrokerScanBuilder
    implements SupportsPushDownRequiredColumns, SupportsPushDownV2Filters,
    SupportsPushDownAggregates {
  /** Columns no record leaves null: their COUNT is the number of records. */
  private static final List<String> NEVER_NULL =
      Arrays.asList("topic", "partition", "offset", "timestamp", "timestampType");

  private final LogbrokerTable table;
  private final CaseInsensitiveStringMap options;
  private StructType required;
  private Predicate[] pushed = new Predicate[0];
  private JsonNode filters;
  private int counts = -1;  // number of COUNT columns pushed; -1: none

  LogbrokerScanBuilder(LogbrokerTable table, CaseInsensitiveStringMap options, StructType schema) {
    this.table = table;
    this.options = options;
    this.required = schema;
  }

  @Override
  public void pruneColumns(StructType requiredSchema) {
    required = requiredSchema;
  }

  @Override
  public Predicate[] pushPredicates(Predicate[] predicates) {
    List<Predicate> used = new ArrayList<>();
    for (Predicate p : predicates) {
      if (Filters.tree(p) != null) used.add(p);
    }
    pushed = used.toArray(new Predicate[0]);
    filters = Filters.and(used);
    return predicates;  // all stay post-scan filters: the ranges read are a superset
  }

  @Override
  public Predicate[] pushedPredicates() {
    return pushed;
  }

  @Override
  public boolean pushAggregation(Aggregation aggregation) {
    if (aggregation.groupByExpressions().length > 0) return false;
    for (AggregateFunc f : aggregation.aggregateExpressions()) {
      if (f instanceof CountStar) continue;
      if (f instanceof Count && !((Count) f).isDistinct() && ((Count) f).column() instanceof NamedReference) {
        String[] names = ((NamedReference) ((Count) f).column()).fieldNames();
        if (names.length == 1 && NEVER_NULL.contains(names[0])) continue;
      }
      return false;
    }
    counts = aggregation.aggregateExpressions().length;
    return true;
  }

  @Override
  public boolean supportCompletePushDown(Aggregation aggregation) {
    return false;  // one count per split: Spark adds them up
  }

  @Override
  public Scan build() {
    StructType schema = required;
    if (counts >= 0) {
      schema = new StructType();
      for (int i = 0; i < counts; i++) {
        schema = schema.add(new StructField("count" + i, DataTypes.LongType, false,
            org.apache.spark.sql.types.Metadata.empty()));
      }
    }
    return new LogbrokerScan(table, options, schema, filters, counts >= 0);
  }
}
